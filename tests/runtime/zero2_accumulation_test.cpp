// ZeRO stages 2 and 3 over micro-batches (pcg/training_recipe.h's
// syncs_every_micro_batch, device_executor.h): each micro-batch's
// gradients are reduce-scattered after its backward pass and added into
// the device's block, where stage 1 sums them whole over the step and
// reduce-scatters once. Against stage 1 on the same micro-batches and
// against one device: the same losses and weights to rounding (the sums
// run in another order); the bytes: a reduce-scatter per micro-batch, as
// predicted; with pipeline stages, refused.
#include <gtest/gtest.h>

#include <cmath>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/pipeline.h"
#include "mapped_plan.h"
#include "same_training.h"

namespace pcgx::runtime {
namespace {

using Plan = pcgx::testing::MappedPlan;

constexpr int64_t kMicro = 4;

// Data parallel over `devices`, the inputs cut into kMicro micro-batches.
Plan accumulating(const std::string& model, int devices) {
  const Graph dp = search::data_parallel(build_model(model, {{"batch", 16}}), devices);
  return pcgx::testing::mapped_plan(search::pipelined(dp, kMicro, true), devices);
}

TrainOptions options(ZeroStage zero, bool scheduled, int64_t steps = 5) {
  TrainOptions o;
  // SGD with momentum: Adam would scale the rounding noise of the
  // attention keys' bias (whose gradient is zero: softmax ignores a shift
  // of every key alike) up to whole steps, in whichever order the sums run.
  o.steps = steps, o.seed = 5, o.batches = 2, o.optimizer.lr = 0.05, o.optimizer.momentum = 0.9, o.zero = zero;
  if (scheduled) o.pipeline = PipelineShape{1, kMicro, 1, PipelineSchedule::k1F1B};
  return o;
}

TrainResult run(const Plan& p, const TrainOptions& o) { return train(p.graph, p.views, p.devices, o); }

using pcgx::testing::expect_same_training;

// Both ways the runtime runs micro-batches: one after another (no
// schedule) and under a one-stage 1F1B schedule (a strategy file's); at
// stage 3 every micro-batch gathers the weights again.
TEST(Zero2Accumulation, ReachesStageOnesWeightsAndOneDevices) {
  for (const char* model : {"mlp-tiny", "gpt-tiny"}) {
    const Plan p = accumulating(model, 4);
    const TrainResult one = run({build_model(model, {{"batch", 16}}), {}, 1}, options(ZeroStage::k0, false));
    for (const bool scheduled : {false, true}) {
      SCOPED_TRACE(std::string(model) + (scheduled ? ", one-stage schedule" : ", one micro-batch after another"));
      const TrainResult stage1 = run(p, options(ZeroStage::k1, scheduled));
      for (const ZeroStage z : {ZeroStage::k2, ZeroStage::k3}) {
        SCOPED_TRACE(std::string("ZeRO ") + name(z));
        const TrainResult sharded = run(p, options(z, scheduled));
        expect_same_training(sharded, stage1, 1e-5);
        expect_same_training(sharded, one, 1e-4);
      }
    }
  }
}

// Megatron's plan (tensor parallel 2 inside data parallel 2): its
// row-parallel Linears' biases are scaled once per step
// (ScalarMul(Replicate(bias)), a layout computed from the stored one), so
// their gradients arrive once, after the last micro-batch, and go in a
// bucket of their own, reduce-scattered once; the others every
// micro-batch. The same weights as stage 1, and the bytes as predicted.
TEST(Zero2Accumulation, WeightsWhoseGradientsArriveOncePerStepAreSentOnce) {
  const Graph g = build_model("gpt-tiny", {{"batch", 16}});
  const Graph e = *search::expert(g, search::find_machine("dgx-h100").with_devices(4), 4, 2);
  const Plan p = pcgx::testing::mapped_plan(search::pipelined(e, kMicro, true), 4);
  ExecutionPlan plan = make_plan(p.graph, p.views, p.devices);
  set_zero(plan, ZeroStage::k2, 0, {}, kDefaultBucketBytes);
  int64_t once = 0, every = 0;
  for (const SyncBucket& b : plan.buckets)
    if (b.devices.size() > 1) ++(b.every_micro_batch ? every : once);
  ASSERT_GT(once, 0);
  ASSERT_GT(every, 0);
  for (const bool scheduled : {false, true}) {
    SCOPED_TRACE(scheduled ? "one-stage schedule" : "one micro-batch after another");
    const int64_t steps = 4;
    const TrainResult stage1 = run(p, options(ZeroStage::k1, scheduled, steps));
    const TrainResult stage2 = run(p, options(ZeroStage::k2, scheduled, steps));
    expect_same_training(stage2, stage1, 1e-5);
    EXPECT_DOUBLE_EQ(static_cast<double>(stage2.bytes_sent),
                     static_cast<double>(steps) * (step_bytes(p.graph, p.views, p.devices) + sharded_sync_extra_bytes(plan)));
  }
}

// Per bucket of k devices padded to k blocks of b floats, each micro-batch
// after the first reduce-scatters (k - 1) k b floats more than stage 1;
// the trainer's prediction (step_communication.h plus
// sharded_sync_extra_bytes) is what it sends.
TEST(Zero2Accumulation, SendsAReduceScatterPerMicroBatch) {
  const Plan p = accumulating("mlp-tiny", 4);
  const int64_t steps = 3;
  const TrainResult stage1 = run(p, options(ZeroStage::k1, false, steps));
  const TrainResult stage2 = run(p, options(ZeroStage::k2, false, steps));
  ExecutionPlan plan = make_plan(p.graph, p.views, p.devices);
  ASSERT_EQ(plan.micro_batches, kMicro);
  int64_t again = 0;
  for (const SyncBucket& b : plan.buckets) {
    const auto k = static_cast<int64_t>(b.devices.size());
    again += (kMicro - 1) * (k - 1) * k * ((b.floats + k - 1) / k);
  }
  ASSERT_GT(again, 0);
  EXPECT_EQ(stage2.bytes_sent, stage1.bytes_sent + steps * again * static_cast<int64_t>(sizeof(float)));
  set_zero(plan, ZeroStage::k2, 0, {}, kDefaultBucketBytes);
  EXPECT_DOUBLE_EQ(static_cast<double>(stage2.bytes_sent),
                   static_cast<double>(steps) * (step_bytes(p.graph, p.views, p.devices) + sharded_sync_extra_bytes(plan)));
  // Stage 3: each micro-batch also gathers each weight twice, as predicted.
  const TrainResult stage3 = run(p, options(ZeroStage::k3, false, steps));
  set_zero(plan, ZeroStage::k3, 0, {}, kDefaultBucketBytes);
  EXPECT_GT(stage3.bytes_sent, stage2.bytes_sent);
  EXPECT_DOUBLE_EQ(static_cast<double>(stage3.bytes_sent),
                   static_cast<double>(steps) * (step_bytes(p.graph, p.views, p.devices) + sharded_sync_extra_bytes(plan)));
}

// DeepSpeed's pipeline engine shards at most the optimizer state: so does
// pcgx, with one error naming the option.
TEST(Zero2Accumulation, PipelineStagesAreRefused) {
  const Graph g = build_model("mlp-tiny", {{"batch", 8}});
  const search::PipelineResult r = pcgx::testing::pipeline_plan(g, "cpu-host", 4, search::Algorithm::kDataParallel, {2, 2});
  const Plan p = pcgx::testing::plan_of(r, 4);
  TrainOptions o = options(ZeroStage::k2, false, 1);
  o.pipeline = PipelineShape{2, 2, 1, PipelineSchedule::k1F1B};
  try {
    run(p, o);
    FAIL() << "ZeRO 2 with two pipeline stages was accepted";
  } catch (const FieldError& e) {
    EXPECT_NE(std::string(e.what()).find("ZeRO stage 2 with pipeline stages"), std::string::npos) << e.what();
  }
  o.zero = ZeroStage::k1;
  EXPECT_NO_THROW(run(p, o));
}

}  // namespace
}  // namespace pcgx::runtime
