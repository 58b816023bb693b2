// Sharded data parallelism (ZeRO stages 1 and 2, pcg/training_recipe.h;
// stage 3 in zero3_test.cpp):
// what the memory model keeps per device (worked by hand on one Linear),
// the collectives and the update share the cost model charges, that the
// simulator runs the same, and how a strategy file records the stage.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/collectives.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

CostModel model(ZeroStage z, Precision p = Precision::kFp32) {
  return CostModel(toy_machine(), toy_efficiency(), {}, {}, {p, Recompute::kNone, z});
}

TEST(Zero, NamesParseBack) {
  for (const ZeroStage z : kZeroStages) EXPECT_EQ(zero_named(name(z)), z);
  EXPECT_FALSE(zero_named("4"));
  EXPECT_FALSE(zero_named("auto"));
}

// x[64, 32] times w[32, 16] data parallel on 8 devices: every device holds
// all 512 parameters. FP32: 4 bytes of weight, 4 of gradient, 8 of Adam's
// moments each; bf16 adds a 4-byte master and keeps a 2-byte weight.
TEST(Zero, MemoryShardsWhatTheStageNamesWorkedByHand) {
  const Graph g = linear_graph(64, 32, 16);
  const Graph dp = data_parallel(g, 8);
  struct Case {
    ZeroStage zero;
    Precision precision;
    double weights, master, gradients, optimizer;
  };
  for (const Case& c : {Case{ZeroStage::k0, Precision::kFp32, 2048, 0, 2048, 4096},
                        Case{ZeroStage::k1, Precision::kFp32, 2048, 0, 2048, 512},
                        Case{ZeroStage::k2, Precision::kFp32, 2048, 0, 256, 512},
                        Case{ZeroStage::k1, Precision::kBf16, 1024, 256, 2048, 512},
                        Case{ZeroStage::k2, Precision::kBf16, 1024, 256, 256, 512}}) {
    SCOPED_TRACE(std::string("ZeRO ") + name(c.zero) + " " + name(c.precision));
    const CostModel cm = model(c.zero, c.precision);
    const Strategy s = MachineMapper(cm).map(dp);
    ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
    const auto mem = memory_breakdown(Placement(s.graph, s.views, 8), cm.recipe());
    ASSERT_EQ(mem.size(), 8u);
    for (const DeviceMemory& m : mem) {
      EXPECT_DOUBLE_EQ(m.weights, c.weights);
      EXPECT_DOUBLE_EQ(m.master, c.master);
      EXPECT_DOUBLE_EQ(m.gradients, c.gradients);
      EXPECT_DOUBLE_EQ(m.optimizer, c.optimizer);
    }
  }
}

// One bucket of 2048 gradient bytes over the 8 devices: all-reduced at
// stage 0, reduce-scattered from stage 1, then the updated weights
// all-gathered; each device updates 1/8 of the weight. The simulator runs
// the same tasks and agrees with the DP.
TEST(Zero, ChargesReduceScatterTheUpdateShareAndTheGather) {
  const Graph dp = data_parallel(linear_graph(64, 32, 16), 8);
  const CostModel c0 = model(ZeroStage::k0);
  const Strategy s0 = MachineMapper(c0).map(dp);
  ASSERT_TRUE(s0.estimate.feasible);
  std::vector<int64_t> all{0, 1, 2, 3, 4, 5, 6, 7};
  const GroupShape group = group_shape(c0.machine(), all);
  const double pack = c0.bucket_pack_time(2048);
  EXPECT_NEAR(s0.estimate.sync, allreduce_times(c0.machine(), group, 2048).best() + pack, 1e-15);
  EXPECT_EQ(s0.estimate.gather, 0);
  for (const ZeroStage z : {ZeroStage::k1, ZeroStage::k2}) {
    SCOPED_TRACE(std::string("ZeRO ") + name(z));
    const CostModel cm = model(z);
    const Strategy s = MachineMapper(cm).map(dp);
    ASSERT_TRUE(s.estimate.feasible);
    EXPECT_EQ(s.views, s0.views);
    EXPECT_EQ(s.estimate.buckets, 1);
    EXPECT_NEAR(s.estimate.sync, collective_time(cm.machine(), Collective::kReduceScatter, group, 2048) + pack, 1e-15);
    EXPECT_NEAR(s.estimate.gather, collective_time(cm.machine(), Collective::kAllGather, group, 2048), 1e-15);
    EXPECT_GT(s.estimate.gather, 0);
    // No launch cost in the toy efficiency: the update streams 1/8 of the bytes.
    EXPECT_NEAR(s.estimate.update, s0.estimate.update / 8, 1e-15);
    EXPECT_NEAR(s.estimate.once, s.estimate.update + (s.estimate.sync - s.estimate.sync_hidden) + s.estimate.gather, 1e-15);
    const Simulator simulator(s.graph, s.views, cm);
    const Estimate sim = simulated_estimate(simulator);
    EXPECT_NEAR(sim.gather, s.estimate.gather, 1e-15);
    // The gathers are communication on the critical path, which the terms add up to.
    const SimulationSummary sum = simulator.summary();
    EXPECT_NEAR(sum.compute + sum.communication + sum.sync, sum.time, 1e-12 * sum.time);
    EXPECT_NEAR(sum.gather, s.estimate.gather, 1e-15);
    EXPECT_LE(sum.gather, sum.communication);
    EXPECT_NEAR(sim.time, s.estimate.time, 1e-9 * s.estimate.time);
    for (size_t d = 0; d < sim.memory.size(); ++d) EXPECT_DOUBLE_EQ(sim.memory[d], s.estimate.memory[d]);
  }
}

// A device that does its own communication (a CPU) all-gathers the
// weights itself: in the simulator the gathers hold the devices, so the
// calibrated per-step overhead of running the nodes follows them instead
// of hiding them, and the simulator prices the step as the estimate does.
TEST(Zero, DevicesThatDoNotOverlapGatherTheWeightsThemselves) {
  Machine m = toy_machine();
  m.device.overlaps_communication = false;
  Profile overhead;
  overhead.node_overhead = 2e-6;
  const Graph dp = data_parallel(linear_graph(64, 32, 16), 8);
  const CostModel cm(m, toy_efficiency(), overhead, {}, {Precision::kFp32, Recompute::kNone, ZeroStage::k1});
  const Strategy s = MachineMapper(cm).map(dp);
  ASSERT_TRUE(s.estimate.feasible);
  ASSERT_GT(s.estimate.gather, 0);
  ASSERT_GT(s.estimate.overhead, 0);
  const Simulator simulator(s.graph, s.views, cm);
  EXPECT_NEAR(simulator.summary().gather, s.estimate.gather, 1e-15);
  EXPECT_NEAR(simulator.time(), s.estimate.time, 1e-9 * s.estimate.time);
}

// Nothing to shard on one device: the stages cost and keep the same.
TEST(Zero, OneReplicaShardsNothing) {
  const Graph g = linear_graph(64, 32, 16);
  const Strategy s0 = MachineMapper(model(ZeroStage::k0).with_devices(1)).map(g);
  const Strategy s2 = MachineMapper(model(ZeroStage::k2).with_devices(1)).map(g);
  ASSERT_TRUE(s0.estimate.feasible && s2.estimate.feasible);
  EXPECT_DOUBLE_EQ(s2.estimate.time, s0.estimate.time);
  EXPECT_DOUBLE_EQ(s2.estimate.max_memory(), s0.estimate.max_memory());
}

// The tiny GPT data parallel on 8 devices: each stage keeps less, the
// simulator counts the same memory and prices it alike.
TEST(Zero, TinyGptEachStageKeepsLessAndTheSimulatorAgrees) {
  const Graph g = build_model("gpt-tiny", {{"batch", 16}});
  double previous = 0;
  for (const ZeroStage z : kZeroStages) {
    SCOPED_TRACE(std::string("ZeRO ") + name(z));
    const CostModel cm = model(z, Precision::kBf16);
    const Strategy dp = MachineMapper(cm).map(data_parallel(g, 8));
    ASSERT_TRUE(dp.estimate.feasible);
    if (previous > 0) {
      EXPECT_LT(dp.estimate.max_memory(), previous);
    }
    previous = dp.estimate.max_memory();
    const Estimate e = simulated_estimate(Simulator(dp.graph, dp.views, cm));
    ASSERT_EQ(e.memory.size(), dp.estimate.memory.size());
    for (size_t d = 0; d < e.memory.size(); ++d) EXPECT_NEAR(e.memory[d], dp.estimate.memory[d], 1e-6);
    EXPECT_NEAR(e.gather, dp.estimate.gather, 1e-9);
    EXPECT_NEAR(e.time / dp.estimate.time, 1.0, 0.25);
  }
}

// The strategy file records the stage; a file without one shards nothing;
// a wrong one is an error naming the field.
TEST(Zero, TheStrategyFileRecordsIt) {
  const CostModel cm = model(ZeroStage::k2);
  const Graph g = linear_graph(64, 32, 16);
  StrategyFile f{g.name(), cm.machine(), 8, "data-parallel", {}, MachineMapper(cm).map(data_parallel(g, 8))};
  f.recipe = cm.recipe();
  const std::string text = strategy_to_json(f);
  const StrategyFile back = strategy_from_json(text, "s.json");
  EXPECT_EQ(back.recipe, cm.recipe());
  EXPECT_DOUBLE_EQ(back.strategy.estimate.gather, f.strategy.estimate.gather);
  nlohmann::json old = nlohmann::json::parse(text);
  old.erase("zero");
  EXPECT_EQ(strategy_from_json(old.dump(), "s.json").recipe.zero, ZeroStage::k0);
  for (const std::string wrong : {"4", "\"1\"", "-1", "null"}) {
    nlohmann::json bad = nlohmann::json::parse(text);
    bad["zero"] = nlohmann::json::parse(wrong);
    try {
      strategy_from_json(bad.dump(), "s.json");
      FAIL() << "ZeRO stage " << wrong << " was accepted";
    } catch (const FileError& e) {
      EXPECT_EQ(std::string(e.what()), "s.json: zero: expected one of 0, 1, 2, 3, got " + wrong);
    }
  }
}

}  // namespace
}  // namespace pcgx::search
