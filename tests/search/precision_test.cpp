// Training precision (pcg/precision.h) as the cost model, the memory model
// and the simulator read it: the machine's peak for the precision, float
// tensors at its element size, FP32 master weights and gradients beside a
// mixed-precision compute copy. Worked by hand on a toy machine, and the
// simulator checked against the DP at every precision.
#include <gtest/gtest.h>

#include <map>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/collectives.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/strategy_text.h"
#include "search/toy_machines.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

TEST(Precision, NamesAndBytes) {
  for (const Precision p : kPrecisions) EXPECT_EQ(precision_named(name(p)), p);
  EXPECT_FALSE(precision_named("fp8"));
  EXPECT_EQ(param_state_bytes(Precision::kFp32), 16);
  EXPECT_EQ(param_state_bytes(Precision::kTf32), 16);
  EXPECT_EQ(param_state_bytes(Precision::kBf16), 18);  // 2 + master 4 + gradient 4 + Adam 8
  EXPECT_EQ(activation_bytes(Precision::kFp16), 2);
  EXPECT_EQ(activation_bytes(Precision::kTf32), 4);
}

// The same Linear as CostModel.DataParallelLinearByHand, in BF16.
TEST(Precision, MixedPrecisionLinearByHand) {
  const Machine m = mixed_machine();
  const CostModel cm(m, toy_efficiency(), {}, {}, {Precision::kBf16});
  const MachineMapper mapper(cm);
  const Graph g = linear_graph(1000, 1000, 1000);

  // One device: 2e9 FLOPs at 2 TFLOP/s = 1 ms forward, 2 ms backward
  // (3 x 2 MB at 100 GB/s = 0.06 ms: compute-bound); the update streams
  // 7.5 FP32 words per parameter: 7.5 x 4 MB / 100 GB/s = 0.3 ms.
  const Strategy one = mapper.map(g);
  ASSERT_TRUE(one.estimate.feasible);
  EXPECT_NEAR(one.estimate.time, 3e-3 + 3e-4, 1e-9);
  // 1e6 parameters x 18 bytes, and the 1e6-element output at 2 bytes.
  EXPECT_NEAR(one.estimate.memory[0], 18e6 + 2e6, 1);
  const auto kinds = memory_breakdown(Placement(one.graph, one.views, m.num_devices()), {Precision::kBf16});
  EXPECT_NEAR(kinds[0].weights, 2e6, 1);
  EXPECT_NEAR(kinds[0].master, 4e6, 1);
  EXPECT_NEAR(kinds[0].gradients, 4e6, 1);
  EXPECT_NEAR(kinds[0].optimizer, 8e6, 1);
  EXPECT_NEAR(kinds[0].activations, 2e6, 1);

  // Data parallel over one node: the output gathered at 2 bytes an element,
  // the gradients all-reduced in FP32 (4 MB, as in FP32).
  const Strategy s = mapper.map(data_parallel(g, 4));
  ASSERT_TRUE(s.estimate.feasible);
  const GroupShape node = strided_group(m, 0, 1, 4);
  const double gather = collective_time(m, Collective::kGather, node, 2e6);
  const double sync = collective_time(m, Collective::kAllReduce, node, 4e6) + 1.6e-4;
  EXPECT_NEAR(s.estimate.compute, 0.75e-3 + 3e-4, 1e-9);
  EXPECT_NEAR(s.estimate.sync, sync, 1e-12);
  EXPECT_NEAR(s.estimate.time, 0.75e-3 + 3e-4 + 2 * gather + sync, 1e-9);
  EXPECT_NEAR(s.estimate.memory[0], 18e6 + 0.5e6 + 2e6, 1);
}

TEST(Precision, AMachineWithoutTheFigureCannotPriceIt) {
  Machine m = mixed_machine();
  m.device.peak_flops_by_precision[static_cast<size_t>(Precision::kBf16)] = 0;
  try {
    CostModel(m, toy_efficiency(), {}, {}, {Precision::kBf16});
    FAIL() << "a bf16 plan was priced without a bf16 figure";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "Machine.device.peak_flops_by_precision");
    EXPECT_NE(e.reason().find("bf16"), std::string::npos) << e.what();
  }
  // A machine without a table computes every precision at its one figure.
  m.device.peak_flops_by_precision = {};
  const Graph g = linear_graph(1000, 1000, 1000);
  EXPECT_NEAR(CostModel(m, toy_efficiency(), {}, {}, {Precision::kFp16}).task_time(g, g.node(2)).forward, 2e-3, 1e-12);
}

// The simulator prices every task with the same cost model: on one device
// it adds up to the DP's estimate at every precision, and on eight the
// memory it reports is the memory model's.
TEST(Precision, SimulatorAgreesWithTheEstimateAtEveryPrecision) {
  double fp32 = 0;
  for (const Precision p : kPrecisions) {
    SCOPED_TRACE(name(p));
    const CostModel cm(mixed_machine(), default_efficiency(), {}, {}, {p});
    // (The mapper keeps a reference to its cost model: a named one, not
    // the temporary with_devices returns, which TBB's allocator reuses.)
    const CostModel cm1 = cm.with_devices(1);
    const MachineMapper one(cm1);
    const Graph g = build_model("mlp-tiny", {{"batch", 256}});
    const Strategy s = one.map(g);
    ASSERT_TRUE(s.estimate.feasible);
    const Simulator sim(g, s.views, one.cost());
    EXPECT_NEAR(sim.time(), s.estimate.time, 1e-12);
    if (p == Precision::kFp32) fp32 = s.estimate.time;
    if (is_mixed(p)) {
      EXPECT_LT(s.estimate.time, fp32);
    }

    const MachineMapper eight(cm);
    const Strategy dp = eight.map(data_parallel(g, 8));
    ASSERT_TRUE(dp.estimate.feasible);
    const Simulator sim8(dp.graph, dp.views, cm);
    const Estimate e = simulated_estimate(sim8);
    ASSERT_EQ(e.memory.size(), dp.estimate.memory.size());
    for (size_t d = 0; d < e.memory.size(); ++d) EXPECT_NEAR(e.memory[d], dp.estimate.memory[d], 1e-6);
  }
}

// The strategy file records the precision; a file without one (written
// before precisions existed) trains in the default, and a wrong one is an
// error naming the field.
TEST(Precision, TheStrategyFileRecordsIt) {
  const CostModel cm(mixed_machine(), default_efficiency(), {}, {}, {Precision::kFp16});
  const Graph g = linear_graph(64, 32, 16);
  StrategyFile f{g.name(), cm.machine(), 8, "data-parallel", {}, MachineMapper(cm).map(data_parallel(g, 8))};
  f.recipe.precision = Precision::kFp16;
  const std::string text = strategy_to_json(f);
  EXPECT_EQ(strategy_from_json(text, "s.json").recipe.precision, Precision::kFp16);
  EXPECT_EQ(strategy_from_json(without_field(text, "precision", "\"fp16\""), "s.json").recipe.precision, kDefaultPrecision);
  EXPECT_EQ(strategy_error(with_field(text, "precision", "\"fp16\"", "\"fp8\"")),
            "s.json: precision: expected one of fp32, tf32, bf16, fp16, got \"fp8\"");
}

// The optimizer: its states in memory (4 bytes each per parameter) and
// its update's traffic (3 FP32 words per parameter and 2 per state: 3, 5,
// 7), counted and priced by the recipe, recorded in the strategy file (a
// file without it was priced with Adam, and reads so).
TEST(Precision, TheOptimizerIsCountedPricedAndRecorded) {
  for (const OptimizerState o : kOptimizerStates) EXPECT_EQ(optimizer_named(name(o)), o);
  EXPECT_FALSE(optimizer_named("lamb"));
  EXPECT_EQ(kDefaultOptimizer, OptimizerState::kAdam);
  EXPECT_EQ(param_state_bytes(Precision::kFp32, OptimizerState::kSgd), 8);
  EXPECT_EQ(param_state_bytes(Precision::kFp32, OptimizerState::kMomentum), 12);
  EXPECT_EQ(param_state_bytes(Precision::kBf16, OptimizerState::kMomentum), 14);
  const Graph g = linear_graph(1000, 1000, 1000);
  std::map<OptimizerState, double> update;
  for (const OptimizerState o : kOptimizerStates) {
    SCOPED_TRACE(name(o));
    TrainingRecipe r;
    r.precision = Precision::kFp32, r.optimizer = o;
    const CostModel cm(mixed_machine().with_devices(1), toy_efficiency(), {}, {}, r);
    const Strategy one = MachineMapper(cm).map(g);
    ASSERT_TRUE(one.estimate.feasible);
    update[o] = one.estimate.update;
    // 1e6 parameters: 4 bytes of weight, 4 of gradient, 4 per state.
    const auto kinds = memory_breakdown(Placement(one.graph, one.views, 1), r);
    EXPECT_NEAR(kinds[0].optimizer, 4e6 * optimizer_states(o), 1);
    EXPECT_NEAR(kinds[0].weights + kinds[0].gradients, 8e6, 1);
    const Simulator sim(one.graph, one.views, cm);
    EXPECT_NEAR(sim.time(), one.estimate.time, 1e-12);
  }
  EXPECT_NEAR(update[OptimizerState::kSgd] / update[OptimizerState::kAdam], 3.0 / 7.0, 1e-9);
  EXPECT_NEAR(update[OptimizerState::kMomentum] / update[OptimizerState::kAdam], 5.0 / 7.0, 1e-9);

  const CostModel cm(mixed_machine(), default_efficiency());
  StrategyFile f{g.name(), cm.machine(), 8, "data-parallel", {}, MachineMapper(cm).map(data_parallel(g, 8))};
  f.recipe.optimizer = OptimizerState::kMomentum;
  const std::string text = strategy_to_json(f);
  EXPECT_EQ(strategy_from_json(text, "s.json").recipe.optimizer, OptimizerState::kMomentum);
  EXPECT_EQ(strategy_from_json(without_field(text, "optimizer", "\"momentum\""), "s.json").recipe.optimizer, OptimizerState::kAdam);
  EXPECT_EQ(strategy_error(with_field(text, "optimizer", "\"momentum\"", "\"lamb\"")),
            "s.json: optimizer: expected one of sgd, momentum, adam, got \"lamb\"");
}

}  // namespace
}  // namespace pcgx::search
