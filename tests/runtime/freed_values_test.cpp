// Values no backward pass reads (pcg/saved_tensors.h) are freed by the
// runtime after their last forward reader: against the same plan keeping
// them, the same gradients to the bit (no reverse rule read a freed
// buffer), and buffer memory lower by exactly what search's memory model
// says (their bytes, less the most of them alive at once in the forward
// pass).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/device_executor.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "mapped_plan.h"

namespace pcgx::runtime {
namespace {

using Plan = pcgx::testing::MappedPlan;

struct Step {
  int64_t buffer_bytes = 0;
  double freed_bytes = 0;  // what plan.freed's nodes hold on device 0 when kept
  std::vector<std::vector<float>> gradients;  // of every source shard on device 0, after two steps
};

// `freed`: the nodes whose bytes to count (the freeing plan's list).
Step run(const Plan& p, const ExecutionPlan& plan, const std::vector<FreedNode>& freed) {
  Step out;
  InProcessWorld world(p.devices);
  world.run([&](Communicator& c) {
    DeviceExecutor ex(plan, c);
    const SourceFn<float> src = random_sources<float>(5);
    for (const Node& n : p.graph.nodes())
      if (n.op->op_class == OpClass::kSource) ex.set_source(n.id, src(n));
    for (int s = 0; s < 2; ++s) ex.forward_backward();
    if (c.rank() != 0) return;
    out.buffer_bytes = ex.buffer_bytes();
    for (const FreedNode& f : freed)
      for (size_t o = 0; o < p.graph.node(f.node).outputs.size(); ++o)
        for (const Buffer& b : ex.values({f.node, static_cast<int32_t>(o)}))
          if (b) out.freed_bytes += static_cast<double>(b.numel) * sizeof(float);
    for (const Node& n : p.graph.nodes())
      if (n.op->op_class == OpClass::kSource)
        for (int64_t s = 0; s < p.graph.shape({n.id, 0}).num_shards(); ++s) {
          const Tensor<float> g = ex.gradient({n.id, 0}, s);
          out.gradients.push_back(g.data);
        }
  });
  return out;
}

class FreedValues : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(FreedValues, SameGradientsAndTheMemoryTheModelPredicts) {
  const auto& [model, devices] = GetParam();
  const Graph g = build_model(model, {{"batch", 8}});
  const Plan p = devices == 1 ? Plan{g, {}, 1} : pcgx::testing::mapped_plan(search::data_parallel(g, devices), devices);
  const ExecutionPlan plan = make_plan(p.graph, p.views, p.devices);
  ASSERT_FALSE(plan.freed.empty());
  ExecutionPlan keep = plan;
  keep.freed.clear();
  const Step freeing = run(p, plan, plan.freed), keeping = run(p, keep, plan.freed);
  ASSERT_EQ(freeing.gradients.size(), keeping.gradients.size());
  for (size_t i = 0; i < keeping.gradients.size(); ++i) {
    const auto &a = freeing.gradients[i], &b = keeping.gradients[i];
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "source shard " << i;
  }
  const search::DeviceMemory m = search::memory_breakdown(Placement(p.graph, p.views, p.devices), {})[0];
  ASSERT_GT(keeping.freed_bytes, 0);
  EXPECT_EQ(static_cast<double>(keeping.buffer_bytes - freeing.buffer_bytes), keeping.freed_bytes - m.transient)
      << "kept " << keeping.buffer_bytes << " B, freeing " << freeing.buffer_bytes << " B";
}

INSTANTIATE_TEST_SUITE_P(Tiny, FreedValues,
                         ::testing::Combine(::testing::Values("gpt-tiny", "bert-large-tiny", "resnext-50-tiny", "llama-tiny", "dlrm-tiny"),
                                            ::testing::Values(1, 2)),
                         [](const auto& param_info) {
                           std::string name = std::get<0>(param_info.param) + "_on_" + std::to_string(std::get<1>(param_info.param));
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace pcgx::runtime
