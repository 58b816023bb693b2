// The gradient buckets reduced after the backward pass
// (TrainingRecipe::overlap_grad_reduce off: Megatron-LM's DDP before
// Megatron-Core, DeepSpeed's pipeline engine): the estimate exposes every
// bucket, the simulator runs them on the devices after their backward
// tasks, and the two charge alike what the overlap hid. Nothing changes
// under ZeRO 3 (its reduce-scatters run beside the backward pass either
// way) or where the devices do their own communication. A strategy file
// records it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/collectives.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/gradient_sync.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/priced_both_ways.h"
#include "search/recipe_flag_checks.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

CostModel model(bool beside, ZeroStage zero = ZeroStage::k0, Machine m = toy_machine()) {
  TrainingRecipe recipe{Precision::kFp32, Recompute::kNone, zero};
  recipe.overlap_grad_reduce = beside;
  CommOptions comm;
  comm.bucket_bytes = 64 << 10;
  return CostModel(std::move(m), toy_efficiency(), {}, comm, recipe);
}

Graph gpt(int64_t batch = 8) { return build_model("gpt-tiny", {{"batch", batch}, {"seq", 128}}); }

// Worked by hand: two 1 MB buckets of one group over both nodes, ready 1
// and 2 ms into a 10 ms backward pass, each taking t. Beside it, the
// first runs from 1 ms, the second from max(1 ms + t, 2 ms), both done
// before the pass ends: nothing exposed. After it, one after the other
// from 10 ms: 2t exposed, the whole of it.
TEST(OverlapGradReduce, BucketsAfterTheBackwardPassAreAllExposed) {
  const Machine m = two_level_machine();
  const SyncGroup s{strided_group(m, 0, 1, 8), 1e6, 7, {0, 1, 2, 3, 4, 5, 6, 7}};
  const std::vector<ReadyGradient> grads{{1e-3, s, 0, 0}, {2e-3, s, 0, 0}};
  const CostModel beside = model(true, ZeroStage::k0, m), after = model(false, ZeroStage::k0, m);
  const double t = beside.bucket_time(s.group, 1e6);
  ASSERT_LT(std::max(1e-3 + t, 2e-3) + t, 10e-3) << "both buckets must fit in the pass for the test to tell the two apart";
  const SyncTimeline on = replay_buckets(beside, grads, 10e-3, 1e6), off = replay_buckets(after, grads, 10e-3, 1e6);
  EXPECT_EQ(on.buckets, 2);
  EXPECT_EQ(off.buckets, 2);
  EXPECT_DOUBLE_EQ(on.total, 2 * t);
  EXPECT_DOUBLE_EQ(on.exposed, 0.0);
  EXPECT_DOUBLE_EQ(off.total, 2 * t);
  EXPECT_DOUBLE_EQ(off.exposed, 2 * t);
  EXPECT_TRUE(buckets_beside_backward(beside));
  EXPECT_FALSE(buckets_beside_backward(after));
}

// Data parallelism, in one batch and in 4 micro-batches (ZeRO 0 and 1),
// and tensor x data parallelism: the same views either way; the estimate
// exposes exactly what the overlap hid; the simulator charges the same
// change within how far the two already part; and with the buckets after
// the backward pass no bucket starts before the backward tasks end.
TEST(OverlapGradReduce, EstimateAndSimulatorChargeWhatTheOverlapHidAlike) {
  const Graph g = gpt();
  const std::optional<Graph> tensor = expert(g, toy_machine(), 8, 2, false);
  ASSERT_TRUE(tensor);
  const std::tuple<const char*, Graph, ZeroStage> plans[] = {
      {"data parallel", data_parallel(g, 8), ZeroStage::k0},
      {"data parallel, ZeRO 1", data_parallel(g, 8), ZeroStage::k1},
      {"data parallel, 4 micro-batches", pipelined(data_parallel(gpt(32), 8), 4, true), ZeroStage::k0},
      {"tensor x data parallel", *tensor, ZeroStage::k0}};
  for (const auto& [what, plan, zero] : plans) {
    SCOPED_TRACE(what);
    const CostModel beside = model(true, zero), after = model(false, zero);
    const BothWays b = both_ways(plan, beside, after);
    const Strategy &x = b.off, &y = b.on;  // beside, after
    const double sim_x = b.simulated_off, sim_y = b.simulated_on;
    ASSERT_TRUE(x.estimate.feasible && y.estimate.feasible);
    ASSERT_EQ(x.views, y.views) << "the mapping does not depend on where the buckets run";
    EXPECT_GT(x.estimate.sync_hidden, 0) << "something must hide for the test to tell the two apart";
    EXPECT_DOUBLE_EQ(y.estimate.sync_hidden, 0.0);
    EXPECT_DOUBLE_EQ(y.estimate.sync, x.estimate.sync) << "the same buckets";
    const double exposed = y.estimate.time - x.estimate.time, eps = 1e-9 * x.estimate.time;
    EXPECT_NEAR(exposed, x.estimate.sync_hidden, eps);
    const double gap = std::abs(sim_x - x.estimate.time) + std::abs(sim_y - y.estimate.time);
    // (Tensor x data parallel hides 1.4 us of its 174 us of buckets in the
    // estimate, none in the simulation: the same step there.)
    EXPECT_GE(sim_y, sim_x * (1 - 1e-12));
    EXPECT_NEAR(sim_y - sim_x, exposed, gap + eps);
    EXPECT_NEAR(sim_y / y.estimate.time, 1.0, 0.05);
    const Simulator sim(y.graph, y.views, after);
    const Timeline& tl = sim.timeline();
    double last_backward = 0, first_bucket = 1e30;
    for (TaskId t = 0; t < static_cast<TaskId>(tl.size()); ++t) {
      if (sim.info(t).kind == SimKind::kBackward && tl.task(t).duration > 0) last_backward = std::max(last_backward, tl.task(t).end);
      if (sim.info(t).kind == SimKind::kSync) first_bucket = std::min(first_bucket, tl.task(t).start);
    }
    if (std::string(what).find("tensor") == std::string::npos) {  // (every group spans every device)
      EXPECT_GE(first_bucket, last_backward * (1 - 1e-12)) << "a bucket ran beside a backward task";
    }
  }
}

// Pipeline stages (Megatron-LM's plan, 2 stages of tensor parallelism 4
// over 32 devices, data parallelism 2, 8 micro-batches): each stage's
// buckets after its last backward, the estimate and the simulator
// charging the change alike.
TEST(OverlapGradReduce, AStageReducesAfterItsLastBackward) {
  static const Ruleset empty;
  static const RuleLibrary rules(empty);
  SearchOptions o;
  o.algorithm = Algorithm::kMegatron, o.tensor_degree = 4;
  const Graph g = build_model("gpt", {{"layers", 4}, {"hidden", 1024}, {"heads", 16}, {"ffn", 4096}, {"seq", 1024}, {"vocab", 1024}, {"batch", 32}});
  TrainingRecipe recipe{Precision::kBf16, Recompute::kNone, ZeroStage::k0};
  const Machine m = find_machine("dgx-a100").with_devices(32);
  const CostModel on(m, default_efficiency(), {}, {}, recipe);
  recipe.overlap_grad_reduce = false;
  const CostModel off(m, default_efficiency(), {}, {}, recipe);
  const PipelineOptions po{2, 8};
  const PipelineResult a = optimize_pipeline(g, rules, on, o, po), b = optimize_pipeline(g, rules, off, o, po);
  const PipelineShape shape{a.stages, a.micro_batches, a.virtual_stages, PipelineSchedule::k1F1B};
  const Strategy &x = a.search.strategy, &y = b.search.strategy;
  ASSERT_TRUE(x.estimate.feasible && y.estimate.feasible);
  ASSERT_EQ(x.views, y.views);
  EXPECT_GT(x.estimate.sync_hidden, 0);
  EXPECT_DOUBLE_EQ(y.estimate.sync_hidden, 0.0);
  const double sim_on = Simulator(x.graph, x.views, on, shape).time(), sim_off = Simulator(y.graph, y.views, off, shape).time();
  const double changed = y.estimate.time - x.estimate.time, simulated = sim_off - sim_on;
  EXPECT_GT(changed, 0);
  EXPECT_GT(simulated, 0);
  EXPECT_NEAR(simulated, changed, std::abs(sim_on - x.estimate.time) + std::abs(sim_off - y.estimate.time) + 1e-6 * x.estimate.time);
}

// ZeRO 3 gathering every block before use, and devices that do their own
// communication: the same step, to the bit, in the estimate and the
// simulator.
TEST(OverlapGradReduce, NothingChangesUnderZeroThreeOrOnDevicesDoingTheirOwnCommunication) {
  const Graph plan = data_parallel(gpt(), 8);
  Machine cpu = toy_machine();
  cpu.device.overlaps_communication = false;
  for (const auto& [what, zero, m] : {std::tuple<const char*, ZeroStage, Machine>{"ZeRO 3", ZeroStage::k3, toy_machine()},
                                      {"devices doing their own communication", ZeroStage::k0, cpu}}) {
    SCOPED_TRACE(what);
    const BothWays b = both_ways(plan, model(true, zero, m), model(false, zero, m));
    if (zero == ZeroStage::k3) {
      EXPECT_GT(b.off.estimate.gathered_for_use, 0);
    }
    EXPECT_DOUBLE_EQ(b.on.estimate.time, b.off.estimate.time);
    EXPECT_DOUBLE_EQ(b.simulated_on, b.simulated_off);
  }
}

TEST(OverlapGradReduce, AStrategyFileRecordsIt) {
  const CostModel after = model(false);
  const StrategyFile f = mapped_file(after, data_parallel(gpt(), 8), "gpt-tiny", 8);
  expect_recipe_flag_round_trip(f, "overlap_grad_reduce", &TrainingRecipe::overlap_grad_reduce, true);
}

}  // namespace
}  // namespace pcgx::search
