// Recomputation per operator in the runtime (training_recipe.h's
// operators; set_recompute): the operators named re-run in backward.
// Against the same plan keeping everything: the same losses and weights to
// the bit, the buffer memory lower by what the memory model says, and
// with tensor parallelism the re-run layout changes' bytes as counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/user_plan.h"
#include "mapped_plan.h"
#include "same_training.h"

namespace pcgx::runtime {
namespace {

using Plan = pcgx::testing::MappedPlan;
using pcgx::testing::mapped_plan;

TrainResult run(const Plan& p, const std::vector<std::string>& names) {
  TrainOptions o;
  o.steps = 4, o.seed = 7, o.batches = 2, o.optimizer.lr = 0.05, o.optimizer.momentum = 0.9;
  if (!names.empty()) o.recompute = Recompute::kOperators, o.recompute_operators = names;
  return train(p.graph, p.views, p.devices, o);
}

using pcgx::testing::expect_same_bits;

TEST(RuntimeRecomputeOperators, SameBitsAndTheMemoryPredicted) {
  // Per model: its feed-forward operators, then its attention's.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"gpt-tiny", {"*.mlp.*", "*.attn.*"}}, {"bert-large-tiny", {"layer*.intermediate,layer*.ffn_*", "layer*.attention.*"}}};
  for (const auto& [model, patterns] : cases) {
    for (int devices : {1, 2}) {
      const Graph g = build_model(model, {{"batch", 8}});
      const Plan p = devices == 1 ? Plan{g, {}, 1} : mapped_plan(search::data_parallel(g, devices), devices);
      const Placement place(p.graph, p.views, p.devices);
      const TrainResult keep = run(p, {});
      for (const std::string& pattern : patterns) {
        SCOPED_TRACE(model + " on " + std::to_string(devices) + " devices, " + pattern);
        std::vector<std::string> globs;
        for (size_t at = 0, comma; at <= pattern.size(); at = comma + 1) {
          comma = std::min(pattern.find(',', at), pattern.size());
          globs.push_back(pattern.substr(at, comma - at));
        }
        const std::vector<std::string> names = search::recompute_operator_names(g, globs, "test");
        TrainingRecipe recipe{Precision::kFp32, Recompute::kOperators};
        recipe.recompute_operators = names;
        const RecomputePlan plan = plan_recompute(p.graph, source_layouts(p.graph), recipe);
        ASSERT_GT(plan.segments, 0);
        const search::DeviceMemory none = search::memory_breakdown(place, {Precision::kFp32})[0];
        const search::DeviceMemory named = search::memory_breakdown(place, recipe)[0];
        const double saves = (none.activations + none.transient) - (named.activations + named.transient);
        ASSERT_GT(saves, 0);
        const TrainResult r = run(p, names);
        expect_same_bits(r, keep);
        EXPECT_EQ(static_cast<double>(keep.buffer_bytes - r.buffer_bytes), saves)
            << "kept " << keep.buffer_bytes << " B, recomputing " << r.buffer_bytes << " B";
      }
    }
  }
}

// Megatron's plan (tensor parallel 2 on 4 devices): the attention's
// output product and the dropout reading its summed halves, named, re-run
// with the all-reduce between them, which sends its bytes again as
// counted.
TEST(RuntimeRecomputeOperators, TensorParallelLayoutChangesRerunWithThem) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const Plan p = mapped_plan(*search::expert(g, search::find_machine("dgx-h100").with_devices(4), 4, 2), 4);
  const std::vector<std::string> names{"block0.attn.output", "block0.attn_dropout"};
  const TrainResult keep = run(p, {}), named = run(p, names);
  expect_same_bits(named, keep);
  const auto steps = static_cast<double>(keep.losses.size());
  const double again = recompute_step_bytes(p.graph, p.views, 4, Recompute::kOperators, false, kAllLayers, {}, names);
  EXPECT_GT(again, 0);
  EXPECT_EQ(static_cast<double>(named.bytes_sent) / steps, step_bytes(p.graph, p.views, 4) + again);
}

// Named without names, or names beside another policy: one error naming the option.
TEST(RuntimeRecomputeOperators, NamesGoWithTheirPolicy) {
  const Plan p{build_model("mlp-tiny", {}), {}, 1};
  TrainOptions o;
  o.steps = 1, o.recompute = Recompute::kOperators;
  EXPECT_THROW(train(p.graph, p.views, 1, o), FieldError);
  o.recompute = Recompute::kSelective, o.recompute_operators = {"dense0"};
  EXPECT_THROW(train(p.graph, p.views, 1, o), FieldError);
}

}  // namespace
}  // namespace pcgx::runtime
