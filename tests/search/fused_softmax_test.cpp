// Megatron-LM's masked-softmax fusion (training_recipe.h's
// AttentionKernel::kFused, pcg/attention_kernels.h's
// fused_softmax_kernels): in each layer the scale and the softmax after it
// are one kernel, priced as the softmax's own pass; nothing else changes
// (what is kept, what is recomputed). The simulator agrees, a strategy
// file records it, and the CPU runtime trains it as eager.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "pcgx/pcg/attention_kernels.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

CostModel model(AttentionKernel a, Recompute r = Recompute::kNone) {
  TrainingRecipe recipe{Precision::kFp32, r, ZeroStage::k0};
  recipe.attention = a;
  return CostModel(toy_machine(), toy_efficiency(), {}, {}, recipe);
}

// The tiny GPT's two layers: the scale and the softmax of each, the scale
// first; an MLP has none.
TEST(FusedSoftmax, TheScaleAndTheSoftmaxOfEachLayer) {
  const Graph g = data_parallel(build_model("gpt-tiny", {}), 2);
  const AttentionKernels k = fused_softmax_kernels(g, source_layouts(g));
  ASSERT_EQ(k.members.size(), 2u);
  for (size_t l = 0; l < 2; ++l) {
    const std::string b = "block" + std::to_string(l) + ".attn.";
    ASSERT_EQ(k.members[l].size(), 2u);
    EXPECT_EQ(g.node(k.members[l][0]).name, b + "scale");
    EXPECT_EQ(g.node(k.members[l][1]).name, b + "softmax");
    EXPECT_TRUE(k.first(k.members[l][0]));
  }
  const Graph mlp = build_model("mlp-tiny", {});
  EXPECT_TRUE(fused_softmax_kernels(mlp, source_layouts(mlp)).members.empty());
}

// Each kernel costs the softmax's own task and the scale's pass is gone:
// the mapped step is eager's less one scale task per layer on the busiest
// device (data parallelism: every device runs every layer), recomputation
// and memory as eager's; the simulator prices it as the estimate does.
TEST(FusedSoftmax, PricedAsTheSoftmaxAloneAndTheSimulatorAgrees) {
  const Graph g = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 256}}), 8);
  const CostModel eager = model(AttentionKernel::kEager), fused = model(AttentionKernel::kFused);
  const AttentionKernels k = fused.attention_kernels(g, source_layouts(g));
  ASSERT_EQ(k.members.size(), 2u);
  double scales = 0;
  for (const auto& members : k.members) {
    const Seconds softmax = eager.task_time(g, g.node(members[1])), scale = eager.task_time(g, g.node(members[0]));
    const Seconds first = fused.operator_time(g, {k, {}}, members[0]), second = fused.operator_time(g, {k, {}}, members[1]);
    EXPECT_DOUBLE_EQ(first.forward, softmax.forward);
    EXPECT_DOUBLE_EQ(first.backward, softmax.backward);
    EXPECT_EQ(second.forward + second.backward, 0.0);
    scales += scale.forward + scale.backward;
  }
  ASSERT_GT(scales, 0);
  const Strategy e = MachineMapper(eager).map(g), f = MachineMapper(fused).map(g);
  ASSERT_TRUE(f.estimate.feasible) << f.estimate.infeasible;
  EXPECT_NEAR(e.estimate.time - f.estimate.time, scales, 1e-9 * e.estimate.time);
  EXPECT_DOUBLE_EQ(f.estimate.max_memory(), e.estimate.max_memory());
  const Simulator sim(f.graph, f.views, fused);
  EXPECT_NEAR(sim.time(), f.estimate.time, 1e-9 * f.estimate.time);
  // Selective and full recomputation re-run a kernel's two members
  // together (the kernel again, priced at the scale), never one alone.
  for (const Recompute r : {Recompute::kSelective, Recompute::kFull}) {
    const RecomputePlan plan = plan_recompute(g, source_layouts(g), model(AttentionKernel::kFused, r).recipe());
    for (const auto& members : k.members) {
      EXPECT_TRUE(plan.recomputed[static_cast<size_t>(members[0])]) << name(r);
      EXPECT_EQ(plan.recomputed[static_cast<size_t>(members[0])], plan.recomputed[static_cast<size_t>(members[1])]) << name(r);
    }
  }
  const CostModel selective = model(AttentionKernel::kFused, Recompute::kSelective), eager_selective = model(AttentionKernel::kEager, Recompute::kSelective);
  EXPECT_LT(MachineMapper(selective).map(g).estimate.time, MachineMapper(eager_selective).map(g).estimate.time);
}

// One member recomputed alone (recompute operators naming the softmax, or
// the scale) re-runs its own eager pass, not the kernel's and not nothing.
TEST(FusedSoftmax, AMemberRecomputedAloneRerunsItsOwnPass) {
  const Graph g = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 256}}), 8);
  const CostModel eager = model(AttentionKernel::kEager), fused = model(AttentionKernel::kFused);
  const AttentionKernels k = fused.attention_kernels(g, source_layouts(g));
  ASSERT_EQ(k.members.size(), 2u);
  const Strategy base = MachineMapper(fused).map(g);
  for (const size_t member : {size_t{0}, size_t{1}}) {
    TrainingRecipe r = fused.recipe();
    r.recompute = Recompute::kOperators;
    double own = 0;
    for (const auto& members : k.members) {
      r.recompute_operators.push_back(g.node(members[member]).name);
      own += eager.task_time(g, g.node(members[member])).forward;
    }
    const CostModel alone = fused.with_recipe(r);
    const RecomputePlan plan = plan_recompute(g, source_layouts(g), r);
    for (const auto& members : k.members) {
      ASSERT_TRUE(plan.recomputed[static_cast<size_t>(members[member])]);
      ASSERT_FALSE(plan.recomputed[static_cast<size_t>(members[1 - member])]);
    }
    const Strategy s = MachineMapper(alone).map(g);
    ASSERT_EQ(s.views, base.views);
    EXPECT_NEAR(s.estimate.time - base.estimate.time, own, 1e-9 * base.estimate.time) << "member " << member;
    EXPECT_NEAR(Simulator(s.graph, s.views, alone).time(), s.estimate.time, 1e-9 * s.estimate.time);
  }
}

// The strategy file records it; read back, the same recipe.
TEST(FusedSoftmax, TheStrategyFileRecordsIt) {
  EXPECT_EQ(attention_named("fused"), AttentionKernel::kFused);
  const CostModel cm = model(AttentionKernel::kFused);
  const Graph g = build_model("gpt-tiny", {});
  StrategyFile f{g.name(), cm.machine(), 8, "data-parallel", {}, MachineMapper(cm).map(data_parallel(g, 8))};
  f.recipe = cm.recipe();
  const std::string text = strategy_to_json(f);
  EXPECT_NE(text.find("\"attention\": \"fused\""), std::string::npos);
  EXPECT_EQ(strategy_from_json(text, "s.json").recipe.attention, AttentionKernel::kFused);
}

}  // namespace
}  // namespace pcgx::search
