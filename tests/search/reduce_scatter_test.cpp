// ZeRO 1 with its gradients all-reduced whole (TrainingRecipe::
// reduce_scatter off, DeepSpeed's BF16 optimizer) instead of
// reduce-scattered: each bucket costs an all-reduce, the weights'
// all-gather after the update and each device's 1/k share of the update
// stay, the memory is the same, and one more gather's bytes cross the
// links. Worked by hand on one Linear over 8 devices; the simulator runs
// the same buckets; stages 0, 2 and 3 are unchanged; strategies and plans
// record it.
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
#include "pcgx/search/user_plan.h"
#include "search/recipe_flag_checks.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

CostModel model(ZeroStage z, bool reduce_scatter) {
  TrainingRecipe r{Precision::kFp32, Recompute::kNone, z};
  r.reduce_scatter = reduce_scatter;
  return CostModel(toy_machine(), toy_efficiency(), {}, {}, r);
}

// Off applies where every weight trains at stage 1.
TEST(ReduceScatter, OnlyZeroOneAllReducesWhenOff) {
  TrainingRecipe r;
  r.reduce_scatter = false;
  for (const ZeroStage z : kZeroStages) {
    r.zero = z;
    EXPECT_EQ(zero1_all_reduces(r), z == ZeroStage::k1) << name(z);
  }
  r.zero = ZeroStage::k1;
  r.zero_weights = {{"w", ZeroStage::k2}};
  EXPECT_FALSE(zero1_all_reduces(r)) << "a weight at stage 2: every bucket reduce-scattered";
  r.zero = ZeroStage::k2;
  r.zero_weights = {{"w", ZeroStage::k1}};
  EXPECT_FALSE(zero1_all_reduces(r));
  r = TrainingRecipe{};
  r.zero = ZeroStage::k1;
  EXPECT_FALSE(zero1_all_reduces(r)) << "on: reduce-scattered";
}

// x[64, 32] times w[32, 16] (512 parameters, 2048 gradient bytes) data
// parallel on the toy machine's 8 devices, one bucket: all-reduced, then
// each device updates its 1/8 and the weights are all-gathered.
TEST(ReduceScatter, AllReducedWholeByHand) {
  const Graph dp = data_parallel(linear_graph(64, 32, 16), 8);
  const CostModel scatter = model(ZeroStage::k1, true), whole = model(ZeroStage::k1, false);
  const Strategy a = MachineMapper(scatter).map(dp), b = MachineMapper(whole).map(dp);
  ASSERT_TRUE(a.estimate.feasible && b.estimate.feasible);
  ASSERT_EQ(a.views, b.views);
  const std::vector<int64_t> all{0, 1, 2, 3, 4, 5, 6, 7};
  const GroupShape group = group_shape(whole.machine(), all);
  const double pack = whole.bucket_pack_time(2048);
  EXPECT_NEAR(a.estimate.sync, collective_time(scatter.machine(), Collective::kReduceScatter, group, 2048) + pack, 1e-15);
  EXPECT_NEAR(b.estimate.sync, allreduce_times(whole.machine(), group, 2048).best() + pack, 1e-15);
  EXPECT_GT(b.estimate.sync, a.estimate.sync);
  EXPECT_NEAR(b.estimate.gather, collective_time(whole.machine(), Collective::kAllGather, group, 2048), 1e-15);
  EXPECT_DOUBLE_EQ(b.estimate.gather, a.estimate.gather);
  EXPECT_DOUBLE_EQ(b.estimate.update, a.estimate.update);
  EXPECT_EQ(b.estimate.memory, a.estimate.memory);
  // One more gather's bytes: 7 other holders of the 2048-byte weight.
  EXPECT_DOUBLE_EQ(b.estimate.bytes - a.estimate.bytes, 7 * 2048.0);
  EXPECT_NEAR(b.estimate.time - a.estimate.time, b.estimate.sync - a.estimate.sync, 1e-15) << "exposed, nothing else moves";
  // The simulator runs the same buckets.
  const Simulator sim(b.graph, b.views, whole);
  const Estimate s = simulated_estimate(sim);
  EXPECT_NEAR(s.sync, b.estimate.sync, 1e-15);
  EXPECT_NEAR(s.time, b.estimate.time, 1e-9 * b.estimate.time);
  EXPECT_DOUBLE_EQ(s.bytes, b.estimate.bytes);
}

// Stages 0, 2 and 3 are priced the same either way, and a strategy file
// records it only where it applies.
TEST(ReduceScatter, OtherStagesIgnoreIt) {
  const Graph dp = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 128}}), 8);
  for (const ZeroStage z : {ZeroStage::k0, ZeroStage::k2, ZeroStage::k3}) {
    SCOPED_TRACE(std::string("ZeRO ") + name(z));
    const Estimate a = MachineMapper(model(z, true)).map(dp).estimate, b = MachineMapper(model(z, false)).map(dp).estimate;
    ASSERT_TRUE(a.feasible && b.feasible);
    EXPECT_DOUBLE_EQ(a.time, b.time);
    EXPECT_DOUBLE_EQ(a.sync, b.sync);
    EXPECT_DOUBLE_EQ(a.bytes, b.bytes);
    EXPECT_FALSE(nlohmann::json::parse(strategy_to_json(mapped_file(model(z, false), dp, "gpt", 8))).contains("reduce_scatter"));
  }
}

TEST(ReduceScatter, StrategiesAndPlansRecordIt) {
  const CostModel whole = model(ZeroStage::k1, false);
  const StrategyFile f = mapped_file(whole, data_parallel(linear_graph(64, 16, 16), 8), "mlp", 8);
  expect_recipe_flag_round_trip(f, "reduce_scatter", &TrainingRecipe::reduce_scatter, true);
  const std::string head = R"({"format": "pcgx.plan", "format_version": 1, "reduce_scatter": false, )";
  const std::string rules = R"("rules": [{"select": {}, "partition": {"samples": 8}}]})";
  const UserPlan p = plan_from_json(head + R"("zero": 1, )" + rules, "p.json");
  ASSERT_TRUE(p.reduce_scatter.has_value());
  EXPECT_FALSE(*p.reduce_scatter);
  EXPECT_NE(plan_to_json(p).find("\"reduce_scatter\": false"), std::string::npos) << plan_to_json(p);
  EXPECT_FALSE(plan_from_json(head + rules, "p.json").reduce_scatter.value_or(true)) << "the stage left to the command";
  for (const char* zero : {R"("zero": 2, )", R"("zero": 0, )", R"("zero": 1, "zero_weights": {"w": 3}, )", R"("zero_weights": {"w": 2}, )"}) {
    try {
      (void)plan_from_json(head + zero + rules, "p.json");
      ADD_FAILURE() << zero << " accepted";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find("p.json: reduce_scatter: false applies to ZeRO stage 1"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pcgx::search
