// A parameter read through two layouts (a tied LM head reads the word
// embedding table transposed; source_layout.h's parameter_copies) is one
// parameter: held once per device, updated once and synchronized once,
// by the memory model, the cost model and the simulator alike, as PyTorch
// DDP/FSDP and Megatron-LM without pipeline stages keep it. A weight of
// its own in the same place is two.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/model_info.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

enum class Second { kSameTensor, kTransposed, kOwnWeight };

// x[64, 256] -> x W -> (x W) W2 -> MSE, with W2 = W, W transposed, or a
// weight of its own; every weight 256 x 256.
Graph two_products(Second second) {
  GraphBuilder b("tied");
  const TensorRef x = b.input("x", {64, 256});
  const TensorRef w = b.weight("W", {256, 256});
  const TensorRef h = b.matmul(x, w, "first");
  const TensorRef w2 = second == Second::kSameTensor ? w : second == Second::kTransposed ? b.transpose(w, {1, 0}, "W.T") : b.weight("W2", {256, 256});
  const TensorRef y = b.matmul(h, w2, "second");
  b.mse_loss(y, b.input("target", {64, 256}), "loss");
  return b.finish();
}

CostModel model(ZeroStage z) { return CostModel(toy_machine(), toy_efficiency(), {}, {}, TrainingRecipe{Precision::kBf16, Recompute::kNone, z}); }

TEST(TiedParameters, ATiedWeightIsHeldUpdatedAndSynchronizedOnce) {
  for (const ZeroStage z : {ZeroStage::k0, ZeroStage::k1, ZeroStage::k2}) {
    SCOPED_TRACE("ZeRO " + std::to_string(static_cast<int>(z)));
    const CostModel cm = model(z);
    auto mapped = [&](Second s) { return MachineMapper(cm).map(data_parallel(two_products(s), 8)); };
    const Strategy same = mapped(Second::kSameTensor), tied = mapped(Second::kTransposed), own = mapped(Second::kOwnWeight);
    ASSERT_TRUE(same.estimate.feasible && tied.estimate.feasible && own.estimate.feasible);
    // The transposed read costs what reading W twice does.
    EXPECT_NEAR(tied.estimate.sync, same.estimate.sync, 1e-12 * same.estimate.sync);
    EXPECT_NEAR(tied.estimate.time, same.estimate.time, 1e-9 * same.estimate.time);
    EXPECT_EQ(tied.estimate.buckets, same.estimate.buckets);
    // A second weight synchronizes twice the bytes and updates twice the state.
    EXPECT_GT(own.estimate.sync, tied.estimate.sync * 1.5);
    EXPECT_GT(own.estimate.time, tied.estimate.time);
    const auto m_tied = memory_breakdown(Placement(tied.graph, tied.views, 8), cm.recipe());
    const auto m_own = memory_breakdown(Placement(own.graph, own.views, 8), cm.recipe());
    const ParamBytes per = param_bytes(Precision::kBf16);
    const double parameters = 256.0 * 256.0, shards = z == ZeroStage::k0 ? 1.0 : 8.0;
    for (size_t d = 0; d < m_tied.size(); ++d) {
      EXPECT_DOUBLE_EQ(m_tied[d].weights, parameters * static_cast<double>(per.weight));
      EXPECT_DOUBLE_EQ(m_tied[d].master, parameters * static_cast<double>(per.master) / shards);
      EXPECT_DOUBLE_EQ(m_tied[d].optimizer, parameters * static_cast<double>(per.optimizer) / shards);
      EXPECT_DOUBLE_EQ(m_own[d].weights, 2 * m_tied[d].weights);
      EXPECT_DOUBLE_EQ(m_own[d].optimizer, 2 * m_tied[d].optimizer);
    }
    // The simulator runs the one synchronization the estimate prices.
    const Simulator sim(tied.graph, tied.views, cm);
    EXPECT_EQ(sim.summary().buckets, tied.estimate.buckets);
    EXPECT_NEAR(sim.summary().sync_total, tied.estimate.sync, 1e-9 * tied.estimate.sync);
    EXPECT_NEAR(sim.time(), tied.estimate.time, 1e-6 * tied.estimate.time);
  }
}

// The copy on other devices (the second product on devices 4-7, the
// first on 0-3, as a pipeline's last stage holds the head's copy) is a
// parameter of its own there: held, synchronized and updated on those
// devices too, in the estimate's terms and the simulator's alike.
TEST(TiedParameters, ACopyOnOtherDevicesIsItsOwn) {
  const CostModel cm = model(ZeroStage::k0);
  const Strategy s = MachineMapper(cm).map(data_parallel(two_products(Second::kTransposed), 4));
  ASSERT_TRUE(s.estimate.feasible);
  std::vector<MachineView> apart(s.views.begin(), s.views.end());
  NodeId second = -1;
  for (const Node& n : s.graph.nodes())
    if (n.name == "second") second = n.id;
  ASSERT_GE(second, 0);
  ASSERT_EQ(apart[static_cast<size_t>(second)].start, 0);
  apart[static_cast<size_t>(second)].start = 4;
  const Placement together(s.graph, s.views, 8), away(s.graph, apart, 8);
  const SourceLayouts layouts = source_layouts(s.graph);
  const std::map<TensorRef, ParameterCopy> copies = parameter_copy_map(s.graph, layouts);
  ASSERT_EQ(copies.size(), 1U);
  EXPECT_TRUE(held_by_original(together, copies.begin()->first, copies.begin()->second));
  EXPECT_FALSE(held_by_original(away, copies.begin()->first, copies.begin()->second));
  const auto m_together = memory_breakdown(together, cm.recipe()), m_away = memory_breakdown(away, cm.recipe());
  const double w = 256.0 * 256.0 * static_cast<double>(param_bytes(Precision::kBf16).weight);
  for (size_t d = 0; d < 8; ++d) {
    EXPECT_DOUBLE_EQ(m_together[d].weights, d < 4 ? w : 0.0) << d;
    EXPECT_DOUBLE_EQ(m_away[d].weights, w) << d;
  }
  // Two groups of 4 synchronize (and update) where one did.
  const Simulator one(s.graph, s.views, cm), two(s.graph, apart, cm);
  EXPECT_GT(two.summary().sync_total, 1.9 * one.summary().sync_total);
}

// Megatron-LM's tensor-parallel GPT: the vocabulary-parallel embedding
// and head split the table alike; where the mapping's views put their
// blocks on the same devices the table is one parameter, and the
// estimate's update and synchronization are the simulator's whatever
// views the mapping settled on.
TEST(TiedParameters, TensorParallelTablesAgreeWithTheSimulator) {
  bool shared = false;
  for (const int64_t devices : {int64_t{4}, int64_t{8}}) {
    SCOPED_TRACE(std::to_string(devices) + " devices");
    const std::optional<Graph> t = expert(build_model("gpt-tiny", {{"batch", 16}}), toy_machine(), devices, 2, false);
    ASSERT_TRUE(t.has_value());
    const CostModel cm = model(ZeroStage::k0);
    const Strategy s = MachineMapper(cm).map(*t);
    ASSERT_TRUE(s.estimate.feasible);
    const Placement place(s.graph, s.views, 8);
    const std::map<TensorRef, ParameterCopy> copies = parameter_copy_map(s.graph, source_layouts(s.graph));
    ASSERT_EQ(copies.size(), 1U);
    const Simulator sim(s.graph, s.views, cm);
    EXPECT_NEAR(sim.summary().update, s.estimate.update, 1e-9 * s.estimate.update);
    EXPECT_NEAR(sim.summary().sync_total, s.estimate.sync, 1e-9 * s.estimate.sync);
    shared = shared || held_by_original(place, copies.begin()->first, copies.begin()->second);
  }
  // (On 8 devices the views settle with the two tables' blocks together:
  // the case where the DP's first placement and the final one differ.)
  EXPECT_TRUE(shared);
}

// GPT's tied head on 8 devices, data parallel: each device holds the
// model's parameters once (pcgx info's count), not the table twice.
TEST(TiedParameters, GptsTableIsCountedOnce) {
  const Graph g = build_model("gpt-tiny", {{"batch", 16}});
  const CostModel cm = model(ZeroStage::k0);
  const Strategy s = MachineMapper(cm).map(data_parallel(g, 8));
  const auto mem = memory_breakdown(Placement(s.graph, s.views, 8), cm.recipe());
  ASSERT_EQ(mem.size(), 8U);
  const double parameters = static_cast<double>(model_info(g).parameters);
  for (const DeviceMemory& m : mem) {
    EXPECT_DOUBLE_EQ(m.weights, parameters * static_cast<double>(param_bytes(Precision::kBf16).weight));
    EXPECT_DOUBLE_EQ(m.master, parameters * static_cast<double>(param_bytes(Precision::kBf16).master));
  }
}

}  // namespace
}  // namespace pcgx::search
