// ZeRO 2 and 3 hold less in the runtime (device_executor.h, ZeroBlock): a
// bucket's whole gradients (stages 2, 3) and weight copies (stage 3) exist
// only while the operators reading them run, each bucket reduce-scattered
// as soon as the backward pass has written its gradients. Measured per
// device against stage 1 on four devices: the saving is the memory
// model's (search/machine_mapping.h, memory_breakdown) up to what each
// counts in flight (the model: two operators' gathered weights, as FSDP
// prefetches; the runtime: the weights, gradients and flat buffer of the
// buckets in use); one bucket spanning the backward pass saves nothing;
// over micro-batches too, either way the runtime runs them; the training
// is stage 1's to the bit with two devices, and a checkpoint (the whole
// weights and moments, gathered outside the step) is stage 1's and leaves
// the memory a step holds as it was.
#include <gtest/gtest.h>

#include <string>

#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "mapped_plan.h"
#include "same_training.h"

namespace pcgx::runtime {
namespace {

using Plan = pcgx::testing::MappedPlan;

TrainOptions options(ZeroStage zero, double bucket_bytes) {
  TrainOptions o;
  o.steps = 4, o.seed = 5, o.batches = 2, o.optimizer.kind = OptimizerKind::kAdam, o.optimizer.lr = 0.01, o.zero = zero;
  o.bucket_bytes = bucket_bytes;
  return o;
}

TrainResult run(const Plan& p, ZeroStage zero, double bucket_bytes = 1) { return train(p.graph, p.views, p.devices, options(zero, bucket_bytes)); }

// What the memory model counts beside the optimizer's state (which the
// runtime's buffer_bytes leaves out): per device.
std::vector<double> predicted(const Plan& p, ZeroStage zero) {
  TrainingRecipe recipe;
  recipe.zero = zero, recipe.optimizer = OptimizerState::kAdam;
  std::vector<double> out;
  for (const search::DeviceMemory& m : search::memory_breakdown(Placement(p.graph, p.views, p.devices), recipe))
    out.push_back(m.weights + m.gradients + m.activations + m.transient);
  return out;
}

TEST(ZeroMemory, StagesTwoAndThreeHoldLessAsTheMemoryModelCounts) {
  for (const std::string model : {"mlp-tiny", "gpt-tiny"}) {
    const Plan p = pcgx::testing::zoo_data_parallel(model, 4);
    const TrainResult one = run(p, ZeroStage::k1), two = run(p, ZeroStage::k2), three = run(p, ZeroStage::k3);
    const auto base = predicted(p, ZeroStage::k1), less2 = predicted(p, ZeroStage::k2), less3 = predicted(p, ZeroStage::k3);
    for (size_t d = 0; d < 4; ++d) {
      const auto saved2 = static_cast<double>(one.device_buffer_bytes[d] - two.device_buffer_bytes[d]);
      const auto saved3 = static_cast<double>(one.device_buffer_bytes[d] - three.device_buffer_bytes[d]);
      const double want2 = base[d] - less2[d], want3 = base[d] - less3[d];
      ASSERT_GT(want2, 0);
      ASSERT_GT(want3, want2);
      // Each within a factor of two of the model's: what the two hold in
      // flight differs (the header comment), never the whole weights.
      EXPECT_GT(saved2, 0.5 * want2) << model << " device " << d << ": stage 2 saved " << saved2 << " B, the model " << want2;
      EXPECT_LT(saved2, 2.0 * want2) << model << " device " << d;
      EXPECT_GT(saved3, 0.5 * want3) << model << " device " << d << ": stage 3 saved " << saved3 << " B, the model " << want3;
      EXPECT_LT(saved3, 2.0 * want3) << model << " device " << d;
      EXPECT_GT(saved3, saved2) << model << " device " << d;
    }
  }
}

// A bucket's gradients live from the first backward writing one to the
// last: mlp-tiny's weights in one bucket, written from the first operator
// of the backward pass to the last, keep stage 1's memory.
TEST(ZeroMemory, OneBucketSpanningTheBackwardPassSavesNothing) {
  const Plan p = pcgx::testing::zoo_data_parallel("mlp-tiny", 4);
  const ExecutionPlan plan = make_plan(p.graph, p.views, p.devices);
  ASSERT_EQ(plan.buckets.size(), 1u);
  EXPECT_EQ(run(p, ZeroStage::k2, kDefaultBucketBytes).device_buffer_bytes, run(p, ZeroStage::k1, kDefaultBucketBytes).device_buffer_bytes);
  EXPECT_LT(run(p, ZeroStage::k2).buffer_bytes, run(p, ZeroStage::k1).buffer_bytes) << "one bucket per weight";
}

// With two devices a reduce-scatter sums what an all-reduce does: giving
// the copies back and taking them again changes no bit, nor does a
// checkpoint's gather of the whole weights midway, nor full recomputation
// (stage 3 gathers a layer's weights before its re-run).
TEST(ZeroMemory, TrainsAsStageOneToTheBit) {
  for (const std::string model : {"mlp-tiny", "gpt-tiny"}) {
    const Plan p = pcgx::testing::zoo_data_parallel(model, 2);
    const TrainResult one = run(p, ZeroStage::k1);
    for (const ZeroStage zero : {ZeroStage::k2, ZeroStage::k3}) {
      SCOPED_TRACE(model + " at stage " + name(zero));
      pcgx::testing::expect_same_bits(run(p, zero), one);
      TrainOptions o = options(zero, 1);
      o.checkpoint_every = 2, o.checkpoint = [](const TrainState&) {};
      pcgx::testing::expect_same_bits(train(p.graph, p.views, p.devices, o), one);
    }
  }
  const Plan p = pcgx::testing::zoo_data_parallel("gpt-tiny", 2);
  TrainOptions o = options(ZeroStage::k1, 1);
  o.recompute = Recompute::kFull;
  const TrainResult one = train(p.graph, p.views, p.devices, o);
  for (const ZeroStage zero : {ZeroStage::k2, ZeroStage::k3}) {
    o.zero = zero;
    SCOPED_TRACE(std::string("recomputed, at stage ") + name(zero));
    pcgx::testing::expect_same_bits(train(p.graph, p.views, p.devices, o), one);
  }
}

// Gradient accumulation: every micro-batch's gradients exist only while
// its backward writes them, one micro-batch after another or under a
// one-stage schedule (what `pcgx run` of an accumulating strategy runs).
TEST(ZeroMemory, OverMicroBatchesStageTwoAndThreeHoldLess) {
  const Graph dp = search::data_parallel(build_model("gpt-tiny", {{"batch", 16}}), 4);
  const Plan p = pcgx::testing::mapped_plan(search::pipelined(dp, 2, true), 4);
  for (const bool scheduled : {false, true}) {
    SCOPED_TRACE(scheduled ? "one-stage schedule" : "one micro-batch after another");
    std::vector<int64_t> held;
    for (const ZeroStage zero : {ZeroStage::k1, ZeroStage::k2, ZeroStage::k3}) {
      TrainOptions o = options(zero, 1);
      if (scheduled) o.pipeline = PipelineShape{1, 2, 1, PipelineSchedule::k1F1B};
      held.push_back(train(p.graph, p.views, p.devices, o).buffer_bytes);
    }
    EXPECT_LT(held[1], held[0]);
    EXPECT_LT(held[2], held[1]);
  }
}

// A checkpoint gathers the whole weights (stage 3) and moments outside the
// step: what it holds is stage 1's to the bit, and afterwards they go, so
// the steps hold what they held without it.
TEST(ZeroMemory, CheckpointsAreStageOnesAndLeaveTheStepsMemory) {
  const Plan p = pcgx::testing::zoo_data_parallel("gpt-tiny", 2);
  auto checkpointed = [&](ZeroStage zero, TrainState& saved) {
    TrainOptions o = options(zero, 1);
    o.checkpoint_every = 2, o.checkpoint = [&](const TrainState& s) { saved = s; };
    return train(p.graph, p.views, p.devices, o);
  };
  TrainState one;
  EXPECT_EQ(checkpointed(ZeroStage::k1, one).device_buffer_bytes, run(p, ZeroStage::k1).device_buffer_bytes);
  for (const ZeroStage zero : {ZeroStage::k2, ZeroStage::k3}) {
    SCOPED_TRACE(std::string("stage ") + name(zero));
    TrainState s;
    EXPECT_EQ(checkpointed(zero, s).device_buffer_bytes, run(p, zero).device_buffer_bytes);
    ASSERT_EQ(s.step, one.step);
    for (const auto& [name, w] : one.weights) EXPECT_TRUE(s.weights.at(name) == w) << name;
    ASSERT_EQ(s.moments.size(), one.moments.size());
    for (const auto& [name, m] : one.moments) EXPECT_TRUE(s.moments.at(name) == m) << name;
  }
}

// Under mixed precision ZeRO's FP32 masters are the blocks the optimizer
// updates, 1/r per device as the memory model counts them: a BF16 run
// holds what an FP32 run holds at every sharded stage (the runtime stores
// every value in 4 bytes) but the masters of the parameters no bucket
// holds (gpt-tiny's tied embedding, read through two layouts: trained
// whole on the device holding it), where at stage 0 every device keeps
// every master it updates beside the compute copies (without a tied
// weight, the memory model's count of them).
TEST(ZeroMemory, MixedPrecisionKeepsTheMastersAsBlocks) {
  for (const std::string model : {"mlp-tiny", "gpt-tiny"}) {
    const Plan p = pcgx::testing::zoo_data_parallel(model, 4);
    const ExecutionPlan plan = make_plan(p.graph, p.views, p.devices);
    std::vector<double> every(4, 0.0), unbucketed(4, 0.0);  // master bytes per device
    for (const Node& n : p.graph.nodes()) {
      if (!n.op->is_weight) continue;
      const TensorRef t = plan.parameter[static_cast<size_t>(n.id)];
      const ParallelTensorShape& s = p.graph.shape(t);
      for (int64_t k = 0; k < s.num_shards(); ++k) {
        const auto d = static_cast<size_t>(plan.owner(t, k));
        const double bytes = 4.0 * static_cast<double>(s.shard_elements());
        every[d] += bytes;
        if (t.node == n.id) unbucketed[d] += bytes;
      }
    }
    ASSERT_GT(every[0], 0) << model;
    for (const ZeroStage zero : {ZeroStage::k0, ZeroStage::k1, ZeroStage::k2, ZeroStage::k3}) {
      SCOPED_TRACE(model + " at stage " + name(zero));
      TrainOptions o = options(zero, 1);
      const TrainResult fp32 = train(p.graph, p.views, p.devices, o);
      o.precision = Precision::kBf16;
      const TrainResult bf16 = train(p.graph, p.views, p.devices, o);
      TrainingRecipe recipe;
      recipe.precision = Precision::kBf16, recipe.zero = zero, recipe.optimizer = OptimizerState::kAdam;
      const auto counted = search::memory_breakdown(Placement(p.graph, p.views, p.devices), recipe);
      ASSERT_EQ(bf16.device_buffer_bytes.size(), 4u);
      for (size_t d = 0; d < 4; ++d) {
        const auto extra = static_cast<double>(bf16.device_buffer_bytes[d] - fp32.device_buffer_bytes[d]);
        EXPECT_EQ(extra, zero == ZeroStage::k0 ? every[d] : unbucketed[d]) << "device " << d;
        if (model == "mlp-tiny") {
          EXPECT_EQ(unbucketed[d], 0) << d;
          if (zero == ZeroStage::k0) EXPECT_EQ(extra, counted[d].master) << d;
          else EXPECT_EQ(counted[d].master, every[d] / 4) << d;  // (what the blocks hold)
        }
      }
    }
  }
}

// A BF16 checkpoint gathers the FP32 masters whole outside the step: stage
// 0's to the bit (two devices), and afterwards they go again.
TEST(ZeroMemory, MixedPrecisionCheckpointsHoldStageZerosMasters) {
  const Plan p = pcgx::testing::zoo_data_parallel("gpt-tiny", 2);
  auto checkpointed = [&](ZeroStage zero, TrainState* saved) {
    TrainOptions o = options(zero, 1);
    o.precision = Precision::kBf16;
    if (saved) o.checkpoint_every = 2, o.checkpoint = [saved](const TrainState& s) { *saved = s; };
    return train(p.graph, p.views, p.devices, o);
  };
  TrainState zero_state;
  checkpointed(ZeroStage::k0, &zero_state);
  ASSERT_FALSE(zero_state.weights.empty());
  for (const ZeroStage zero : {ZeroStage::k1, ZeroStage::k2, ZeroStage::k3}) {
    SCOPED_TRACE(std::string("stage ") + name(zero));
    TrainState s;
    EXPECT_EQ(checkpointed(zero, &s).device_buffer_bytes, checkpointed(zero, nullptr).device_buffer_bytes);
    ASSERT_EQ(s.step, zero_state.step);
    for (const auto& [name, w] : zero_state.weights) EXPECT_TRUE(s.weights.at(name) == w) << name;
  }
}

}  // namespace
}  // namespace pcgx::runtime
