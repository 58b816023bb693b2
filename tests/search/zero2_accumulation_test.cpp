// ZeRO stages 2 and 3 over micro-batches (pcg/training_recipe.h's
// syncs_every_micro_batch): each micro-batch's buckets are reduce-scattered
// in its own backward pass, the weights gathered once after the update.
// What the cost model charges against stage 1 on the same plan (M times
// the buckets, the same gather, less gradient memory, the bytes), and that
// the simulator runs the same buckets where the estimate puts them.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/simulator.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

constexpr int64_t kMicro = 4;

Strategy mapped(const Graph& g, const CostModel& cm) { return MachineMapper(cm).map(g); }

// x[64, 32] times w[32, 16], data parallel on 8 devices, 4 micro-batches:
// one bucket of 2048 bytes, reduce-scattered once per micro-batch at stage
// 2 and once per step at stage 1; gathered once either way.
TEST(Zero2Accumulation, EachMicroBatchReduceScattersItsBuckets) {
  const Graph g = pipelined(data_parallel(linear_graph(64, 32, 16), 8), kMicro, true);
  const CostModel c1(toy_machine(), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kNone, ZeroStage::k1});
  const CostModel c2(toy_machine(), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kNone, ZeroStage::k2});
  const Strategy s1 = mapped(g, c1), s2 = mapped(g, c2);
  ASSERT_TRUE(s1.estimate.feasible && s2.estimate.feasible);
  EXPECT_EQ(s1.estimate.buckets, 1);
  EXPECT_EQ(s2.estimate.buckets, kMicro);
  EXPECT_NEAR(s2.estimate.sync, kMicro * s1.estimate.sync, 1e-12 * s2.estimate.sync);
  EXPECT_GT(s2.estimate.gather, 0);
  EXPECT_NEAR(s2.estimate.gather, s1.estimate.gather, 1e-15);
  EXPECT_NEAR(s2.estimate.update, s1.estimate.update, 1e-15);
  // 7 of 8 devices' blocks sent once more per micro-batch after the first.
  EXPECT_DOUBLE_EQ(s2.estimate.bytes - s1.estimate.bytes, (kMicro - 1) * 7 * 2048.0);
  const auto m1 = memory_breakdown(Placement(s1.graph, s1.views, 8), c1.recipe());
  const auto m2 = memory_breakdown(Placement(s2.graph, s2.views, 8), c2.recipe());
  for (size_t d = 0; d < m1.size(); ++d) EXPECT_DOUBLE_EQ(m2[d].gradients, m1[d].gradients / 8);
  // The simulator runs a bucket per micro-batch, prices the step alike and
  // counts the same bytes.
  const Simulator sim(s2.graph, s2.views, c2);
  const SimulationSummary sum = sim.summary();
  EXPECT_EQ(sum.buckets, kMicro);
  EXPECT_NEAR(sum.sync_total, s2.estimate.sync, 1e-12 * s2.estimate.sync);
  EXPECT_NEAR(sim.time(), s2.estimate.time, 1e-6 * s2.estimate.time);
  EXPECT_DOUBLE_EQ(simulated_estimate(sim).bytes, s2.estimate.bytes);
}

// The tiny GPT data parallel on 8 DGX-H100 devices in BF16, accumulating
// over 4 micro-batches: at stage 2 the buckets of micro-batch k start in
// its own backward pass (before the next micro-batch's forward), every
// micro-batch's buckets alike; what runs past the last backward pass is
// what the estimate exposes.
TEST(Zero2Accumulation, BucketsRunInsideEveryMicroBatchsBackward) {
  const Graph g = build_model("gpt-tiny", {{"batch", 64}, {"hidden", 1024}, {"ffn", 4096}, {"seq", 256}});
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency(), {}, {},
                     {Precision::kBf16, Recompute::kNone, ZeroStage::k2});
  const Strategy s = mapped(pipelined(data_parallel(g, 8), kMicro, true), cm);
  ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
  const Simulator sim(s.graph, s.views, cm, PipelineShape{1, kMicro, 1, PipelineSchedule::k1F1B});
  std::vector<double> backward_start(kMicro, std::numeric_limits<double>::infinity()), backward_end(kMicro, 0.0);
  for (size_t i = 0; i < sim.timeline().size(); ++i) {
    const SimTaskInfo& k = sim.info(static_cast<TaskId>(i));
    const TimedTask& t = sim.timeline().task(static_cast<TaskId>(i));
    if (k.kind != SimKind::kBackward || k.micro_batch < 0 || t.duration <= 0) continue;
    backward_start[static_cast<size_t>(k.micro_batch)] = std::min(backward_start[static_cast<size_t>(k.micro_batch)], t.start);
    backward_end[static_cast<size_t>(k.micro_batch)] = std::max(backward_end[static_cast<size_t>(k.micro_batch)], t.end);
  }
  std::vector<int64_t> buckets(kMicro, 0);
  int64_t all = 0;
  for (size_t i = 0; i < sim.timeline().size(); ++i) {
    if (sim.info(static_cast<TaskId>(i)).kind != SimKind::kSync) continue;
    const TimedTask& t = sim.timeline().task(static_cast<TaskId>(i));
    ++all;
    // The micro-batch whose backward pass it starts in.
    for (int64_t m = 0; m < kMicro; ++m)
      if (t.start >= backward_start[static_cast<size_t>(m)] && t.start <= backward_end[static_cast<size_t>(m)]) ++buckets[static_cast<size_t>(m)];
  }
  ASSERT_EQ(all, s.estimate.buckets);
  ASSERT_EQ(all % kMicro, 0);
  for (int64_t m = 0; m < kMicro; ++m) EXPECT_GT(buckets[static_cast<size_t>(m)], 0) << "micro-batch " << m;
  const SimulationSummary sum = sim.summary();
  EXPECT_NEAR(sum.time / s.estimate.time, 1.0, 0.02) << "simulated " << sum.time << ", predicted " << s.estimate.time;
  EXPECT_NEAR(sum.sync_total, s.estimate.sync, 1e-9 * s.estimate.sync);
  EXPECT_NEAR(sum.sync_past, s.estimate.sync - s.estimate.sync_hidden, 0.05 * s.estimate.sync) << "past the last backward pass";
}

// Megatron's plan (tensor parallel 2 inside data parallel 2) scales its
// row-parallel biases once per step (a layout computed from the stored
// one): those are synchronized once, with the last micro-batch, the
// others with every micro-batch, in the estimate and the simulator alike.
TEST(Zero2Accumulation, WeightsComputedOncePerStepSyncWithTheLastMicroBatch) {
  const Graph g = build_model("gpt-tiny", {{"batch", 64}, {"hidden", 1024}, {"ffn", 4096}, {"seq", 256}});
  const Machine machine = find_machine("dgx-h100").with_devices(4);
  const Graph e = pipelined(*expert(g, machine, 4, 2), kMicro, true);
  const CostModel c1(machine, default_efficiency(), {}, {}, {Precision::kBf16, Recompute::kNone, ZeroStage::k1});
  const CostModel c2(machine, default_efficiency(), {}, {}, {Precision::kBf16, Recompute::kNone, ZeroStage::k2});
  const Strategy s1 = mapped(e, c1), s2 = mapped(e, c2);
  ASSERT_TRUE(s1.estimate.feasible && s2.estimate.feasible);
  // Some gradients once: less than M times stage 1's synchronization,
  // more than once. (Counted in seconds, not buckets: the biases share
  // their group's buckets with the norms' weights, which are copied over
  // the same devices, so the earlier micro-batches' buckets are as many,
  // only smaller.)
  EXPECT_GT(s2.estimate.buckets, s1.estimate.buckets);
  EXPECT_GT(s2.estimate.sync, s1.estimate.sync);
  EXPECT_LT(s2.estimate.sync, kMicro * s1.estimate.sync * (1 - 1e-6));
  const Simulator sim(s2.graph, s2.views, c2, PipelineShape{1, kMicro, 1, PipelineSchedule::k1F1B});
  const SimulationSummary sum = sim.summary();
  EXPECT_EQ(sum.buckets, s2.estimate.buckets);
  EXPECT_NEAR(sum.sync_total, s2.estimate.sync, 1e-9 * s2.estimate.sync);
  EXPECT_NEAR(sum.time / s2.estimate.time, 1.0, 0.02) << "simulated " << sum.time << ", predicted " << s2.estimate.time;
}

// Stage 3 over micro-batches (FSDP with gradient accumulation): every
// micro-batch gathers each weight before its forward and its backward and
// reduce-scatters its gradients. Against stage 3 in one batch of the same
// plan's micro-batch: M times the gathers and the buckets; and the
// simulator, which expands every micro-batch's passes (the gathers holding
// the sync channels), prices the step as the estimate does.
TEST(Zero2Accumulation, StageThreeGathersInEveryMicroBatch) {
  const Graph g = build_model("gpt-tiny", {{"batch", 64}, {"hidden", 1024}, {"ffn", 4096}, {"seq", 256}});
  const CostModel c3(find_machine("dgx-h100").with_devices(8), default_efficiency(), {}, {}, {Precision::kBf16, Recompute::kNone, ZeroStage::k3});
  const Graph dp = data_parallel(g, 8);
  const Strategy micro = mapped(pipelined(dp, kMicro, true), c3);
  ASSERT_TRUE(micro.estimate.feasible) << micro.estimate.infeasible;
  const Simulator sim(micro.graph, micro.views, c3, PipelineShape{1, kMicro, 1, PipelineSchedule::k1F1B});
  const SimulationSummary sum = sim.summary();
  int64_t gathers = 0;
  for (size_t i = 0; i < sim.timeline().size(); ++i) gathers += sim.info(static_cast<TaskId>(i)).kind == SimKind::kShardGather;
  // One batch of a micro-batch's size: its gathers, once.
  const Graph one = data_parallel(build_model("gpt-tiny", {{"batch", 64 / kMicro}, {"hidden", 1024}, {"ffn", 4096}, {"seq", 256}}), 8);
  const Strategy single = mapped(one, c3);
  const Simulator once(single.graph, single.views, c3);
  int64_t gathers_once = 0;
  for (size_t i = 0; i < once.timeline().size(); ++i) gathers_once += once.info(static_cast<TaskId>(i)).kind == SimKind::kShardGather;
  ASSERT_GT(gathers_once, 0);
  EXPECT_EQ(gathers, kMicro * gathers_once);
  // Every weight's buckets each micro-batch, but the tied embedding's and
  // the head's (layouts computed once per step: once).
  EXPECT_LT(micro.estimate.buckets, kMicro * single.estimate.buckets);
  EXPECT_GT(micro.estimate.buckets, (kMicro - 1) * single.estimate.buckets);
  EXPECT_EQ(sum.buckets, micro.estimate.buckets);
  EXPECT_NEAR(sum.sync_total, micro.estimate.sync, 1e-9 * micro.estimate.sync);
  EXPECT_GT(micro.estimate.sync, (kMicro - 1) * single.estimate.sync);
  EXPECT_NEAR(sum.time / micro.estimate.time, 1.0, 0.05) << "simulated " << sum.time << ", predicted " << micro.estimate.time;
}

}  // namespace
}  // namespace pcgx::search
