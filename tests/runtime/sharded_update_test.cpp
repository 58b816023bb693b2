// ZeRO stages 1 and 2 in the runtime (device_executor.h): each bucket's
// gradients reduce-scattered, a block updated per device with a block of
// the optimizer state, the weights all-gathered. Against stage 0: the same
// bits with two replicas (a sum of two is the same either way), the same
// weights to rounding with four; the bytes are the collectives'; a
// checkpoint holds whole moments and resumes bit for bit; the trace shows
// the gathers.
#include <gtest/gtest.h>

#include <cmath>

#include "pcgx/pcg/step_communication.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "mapped_plan.h"
#include "tensor_compare.h"

namespace pcgx::runtime {
namespace {

using pcgx::testing::relative_difference;

using Plan = pcgx::testing::MappedPlan;
using pcgx::testing::mapped_plan;

Plan data_parallel(const std::string& model, int devices) { return pcgx::testing::zoo_data_parallel(model, devices); }
Plan expert(const std::string& model) { return pcgx::testing::zoo_expert(model); }

TrainResult run(const Plan& p, ZeroStage zero, OptimizerKind optimizer, int64_t steps = 8) {
  TrainOptions o;
  o.steps = steps, o.seed = 3, o.batches = 2, o.optimizer.kind = optimizer, o.optimizer.lr = 0.02, o.zero = zero;
  return train(p.graph, p.views, p.devices, o);
}

// The largest bucket of the plan, in devices: the test needs real sharding.
size_t widest_bucket(const Plan& p) {
  size_t widest = 0;
  for (const SyncBucket& b : make_plan(p.graph, p.views, p.devices).buckets) widest = std::max(widest, b.devices.size());
  return widest;
}

TEST(ShardedUpdate, TwoReplicasGiveStageZerosBits) {
  const Plan p = data_parallel("mlp-tiny", 2);
  ASSERT_EQ(widest_bucket(p), 2u);
  for (const OptimizerKind opt : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
    SCOPED_TRACE(name(opt));
    const TrainResult replicated = run(p, ZeroStage::k0, opt);
    for (const ZeroStage z : {ZeroStage::k1, ZeroStage::k2}) {
      SCOPED_TRACE(std::string("ZeRO ") + name(z));
      const TrainResult sharded = run(p, z, opt);
      EXPECT_EQ(sharded.losses, replicated.losses);
      for (const auto& [n, w] : replicated.parameters) EXPECT_EQ(sharded.parameters.at(n).data, w.data) << n;
    }
  }
}

// With four replicas the reduce-scatter adds the four gradients in another
// order than the ring all-reduce: the weights agree to rounding, with
// stage 0's on the same devices and with the unpartitioned model's on one.
TEST(ShardedUpdate, FourDevicesReachTheReplicatedWeights) {
  for (const std::string model : {"mlp-tiny", "dlrm-tiny"}) {
    SCOPED_TRACE(model);
    const Plan p = model == "mlp-tiny" ? data_parallel(model, 4) : expert(model);
    ASSERT_EQ(widest_bucket(p), 4u);
    const TrainResult one = run({build_model(model, {{"batch", 8}}), {}, 1}, ZeroStage::k0, OptimizerKind::kAdam);
    const TrainResult replicated = run(p, ZeroStage::k0, OptimizerKind::kAdam);
    const TrainResult sharded = run(p, ZeroStage::k1, OptimizerKind::kAdam);
    for (const auto& [n, w] : one.parameters) EXPECT_LT(relative_difference(sharded.parameters.at(n), w, 1e-2), 1e-4) << n;
    ASSERT_EQ(sharded.losses.size(), replicated.losses.size());
    for (size_t s = 0; s < replicated.losses.size(); ++s)
      EXPECT_NEAR(sharded.losses[s], replicated.losses[s], 1e-5 * std::fabs(replicated.losses[s])) << "step " << s;
    ASSERT_EQ(sharded.parameters.size(), replicated.parameters.size());
    for (const auto& [n, w] : replicated.parameters) EXPECT_LT(relative_difference(sharded.parameters.at(n), w, 1e-2), 1e-5) << n;
  }
}

// Per bucket of k devices padded to k blocks of b floats, the reduce-scatter
// and the all-gather each send (k - 1) k b floats, where the all-reduce sent
// 2 (k - 1) x the bucket's floats: the same bytes, and the padding twice.
TEST(ShardedUpdate, SendsTheReduceScatterAndTheAllGather) {
  const Plan p = expert("dlrm-tiny");
  const int64_t steps = 3;
  const TrainResult replicated = run(p, ZeroStage::k0, OptimizerKind::kSgd, steps);
  const TrainResult sharded = run(p, ZeroStage::k2, OptimizerKind::kSgd, steps);
  int64_t padding = 0;
  for (const SyncBucket& b : make_plan(p.graph, p.views, p.devices).buckets) {
    const auto k = static_cast<int64_t>(b.devices.size());
    padding += 2 * (k - 1) * (k * ((b.floats + k - 1) / k) - b.floats);
  }
  EXPECT_EQ(replicated.bytes_sent, static_cast<int64_t>(steps * step_bytes(p.graph, p.views, p.devices)));
  EXPECT_EQ(sharded.bytes_sent, replicated.bytes_sent + steps * padding * static_cast<int64_t>(sizeof(float)));
}

// A checkpoint gathers each device's block of the moments into whole
// tensors (those of stage 0, to rounding), and resuming from it under ZeRO
// gives the bits of not stopping; a stage-0 plan takes it too.
TEST(ShardedUpdate, CheckpointHoldsWholeMomentsAndResumesExactly) {
  const Plan p = expert("dlrm-tiny");
  TrainOptions o;
  o.steps = 12, o.seed = 4, o.batches = 3, o.optimizer.kind = OptimizerKind::kAdam, o.optimizer.lr = 0.02, o.zero = ZeroStage::k1;
  const TrainResult whole = train(p.graph, p.views, p.devices, o);
  TrainState sharded, replicated;
  o.steps = 6, o.checkpoint_every = 6;
  o.checkpoint = [&](const TrainState& s) { sharded = s; };
  train(p.graph, p.views, p.devices, o);
  o.zero = ZeroStage::k0, o.checkpoint = [&](const TrainState& s) { replicated = s; };
  train(p.graph, p.views, p.devices, o);
  ASSERT_EQ(sharded.moments.size(), replicated.moments.size());
  for (const auto& [n, m] : replicated.moments) EXPECT_LT(relative_difference(sharded.moments.at(n), m, 1e-6), 1e-4) << n;

  o.steps = 12, o.checkpoint_every = 0, o.checkpoint = nullptr, o.resume = &sharded, o.zero = ZeroStage::k1;
  const TrainResult rest = train(p.graph, p.views, p.devices, o);
  ASSERT_EQ(rest.losses.size(), 6u);
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(rest.losses[k], whole.losses[6 + k]) << "step " << 6 + k;
  for (const auto& [n, w] : whole.parameters) EXPECT_EQ(rest.parameters.at(n).data, w.data) << n;
  EXPECT_EQ(rest.bytes_sent * 2, whole.bytes_sent) << "the checkpoint's gathers are not the plan's traffic";

  o.zero = ZeroStage::k0;
  const TrainResult on_stage0 = train(p.graph, p.views, p.devices, o);
  for (size_t k = 0; k < 6; ++k) EXPECT_NEAR(on_stage0.losses[k], whole.losses[6 + k], 1e-5 * std::fabs(whole.losses[6 + k])) << k;
}

// The traced step shows one weight gather per bucket of several devices on
// each of its devices, after the update.
TEST(ShardedUpdate, TraceShowsTheWeightGathers) {
  const Plan p = expert("dlrm-tiny");
  TrainOptions o;
  o.steps = 2, o.trace_step = 1, o.zero = ZeroStage::k1;
  const TrainResult r = train(p.graph, p.views, p.devices, o);
  std::vector<int> expected(static_cast<size_t>(p.devices), 0);
  for (const SyncBucket& b : make_plan(p.graph, p.views, p.devices).buckets)
    if (b.devices.size() > 1)
      for (int d : b.devices) ++expected[static_cast<size_t>(d)];
  ASSERT_EQ(r.trace.devices.size(), expected.size());
  for (size_t d = 0; d < expected.size(); ++d) {
    int gathers = 0;
    double update_end = -1;
    for (const StepEvent& e : r.trace.devices[d]) {
      if (e.kind == StepEventKind::kUpdate) update_end = e.end;
      if (e.kind != StepEventKind::kWeightGather) continue;
      ++gathers;
      EXPECT_GE(update_end, 0) << "device " << d << ": a gather before the update";
      EXPECT_GE(e.start, update_end) << "device " << d;
    }
    EXPECT_EQ(gathers, expected[d]) << "device " << d;
  }
}

}  // namespace
}  // namespace pcgx::runtime
