// ZeRO stages per weight group in the runtime (training_recipe.h's
// ZeroWeights, execution_plan.h's set_zero): each bucket holds weights of
// one stage, reduce-scattered, gathered before use (stage 3) or after the
// update, over micro-batches synchronized every micro-batch (from stage 2)
// or once (stage 1). Against stage 0 with two replicas: the same bits;
// against one device over micro-batches: the same weights to rounding; the
// bytes sent are the trainer's prediction; the memory saved against stage
// 1 is the memory model's, as for a whole-plan stage (zero_memory_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/step_communication.h"
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

// gpt-tiny's second layer's first MLP matrix at stage 3, its first
// layer's weights at 2, the rest at the plan's stage. (Not the token
// embedding: tied to the head, it is laid out twice, so the runtime
// synchronizes it where its layouts are computed, in no bucket.)
ZeroWeights groups(const Graph& g) {
  ZeroWeights out;
  for (const Node& n : g.nodes()) {
    if (!n.op->is_weight) continue;
    if (n.name == "block1.mlp.intermediate.W") out.push_back({n.name, ZeroStage::k3});
    else if (n.name.rfind("block0.", 0) == 0) out.push_back({n.name, ZeroStage::k2});
  }
  std::sort(out.begin(), out.end(), [](const WeightZero& a, const WeightZero& b) { return a.weight < b.weight; });
  return out;
}

TrainOptions options(ZeroStage zero, const ZeroWeights& by_weight, int64_t steps = 5) {
  TrainOptions o;
  o.steps = steps, o.seed = 5, o.batches = 2, o.optimizer.lr = 0.05, o.optimizer.momentum = 0.9, o.zero = zero, o.zero_weights = by_weight;
  return o;
}

TrainResult run(const Plan& p, const TrainOptions& o) { return train(p.graph, p.views, p.devices, o); }

TEST(ZeroWeightGroupsRun, EachBucketHoldsOneStage) {
  const Plan p = pcgx::testing::zoo_data_parallel("gpt-tiny", 2);
  const ZeroWeights by_weight = groups(p.graph);
  ASSERT_GT(by_weight.size(), 2u);
  ExecutionPlan plan = make_plan(p.graph, p.views, p.devices);
  set_zero(plan, ZeroStage::k1, 0, by_weight, kDefaultBucketBytes);
  std::map<TensorRef, std::string> weight_of;  // each parameter's Weight
  for (const Node& n : p.graph.nodes())
    if (n.op->is_weight) weight_of[plan.parameter[static_cast<size_t>(n.id)]] = n.name;
  int at[4] = {0, 0, 0, 0};
  for (const SyncBucket& b : plan.buckets) {
    ++at[static_cast<int>(b.zero)];
    EXPECT_EQ(b.gathered_for_use, b.zero == ZeroStage::k3);
    for (const SyncPart& part : b.parts) EXPECT_EQ(zero_of(ZeroStage::k1, by_weight, weight_of.at(part.tensor)), b.zero);
  }
  EXPECT_EQ(at[0], 0);
  EXPECT_GT(at[1], 0);
  EXPECT_GT(at[2], 0);
  EXPECT_EQ(at[3], 1);  // the matrix's one block, alone
}

// Two replicas: every stage gives stage 0's bits (zero3_run_test.cpp), so
// does a mix of them.
TEST(ZeroWeightGroupsRun, TwoReplicasGiveStageZerosBits) {
  const Plan p = pcgx::testing::zoo_data_parallel("gpt-tiny", 2);
  const TrainResult replicated = run(p, options(ZeroStage::k0, {}));
  const TrainResult mixed = run(p, options(ZeroStage::k1, groups(p.graph)));
  EXPECT_EQ(mixed.losses, replicated.losses);
  ASSERT_EQ(mixed.parameters.size(), replicated.parameters.size());
  for (const auto& [n, w] : replicated.parameters) EXPECT_EQ(mixed.parameters.at(n).data, w.data) << n;
}

// Over four micro-batches: the stage-2 and stage-3 weights' gradients
// reduce-scattered after each micro-batch (their buckets every_micro_batch),
// the stage-1 weights' once; the weights one device reaches, and the bytes
// the trainer predicts.
TEST(ZeroWeightGroupsRun, OverMicroBatchesEachGroupSynchronizesAtItsStage) {
  constexpr int64_t kMicro = 4;
  const Graph model = build_model("gpt-tiny", {{"batch", 16}});
  const Plan p = pcgx::testing::mapped_plan(search::pipelined(search::data_parallel(model, 4), kMicro, true), 4);
  const ZeroWeights by_weight = groups(p.graph);
  ExecutionPlan plan = make_plan(p.graph, p.views, p.devices);
  ASSERT_EQ(plan.micro_batches, kMicro);
  set_zero(plan, ZeroStage::k1, 0, by_weight, kDefaultBucketBytes);
  bool every = false, once = false;
  for (const SyncBucket& b : plan.buckets) {
    if (b.devices.size() < 2) continue;
    EXPECT_EQ(b.every_micro_batch, b.zero != ZeroStage::k1);
    (b.every_micro_batch ? every : once) = true;
  }
  EXPECT_TRUE(every && once);
  const int64_t steps = 3;
  const TrainResult one = run({model, {}, 1}, options(ZeroStage::k0, {}, steps));
  const TrainResult mixed = run(p, options(ZeroStage::k1, by_weight, steps));
  pcgx::testing::expect_same_training(mixed, one, 1e-4);
  EXPECT_DOUBLE_EQ(static_cast<double>(mixed.bytes_sent),
                   static_cast<double>(steps) * (step_bytes(p.graph, p.views, p.devices) + sharded_sync_extra_bytes(plan)));
}

// What the memory model counts beside the optimizer's state, per device.
std::vector<double> predicted(const Plan& p, ZeroStage zero, const ZeroWeights& by_weight) {
  TrainingRecipe recipe;
  recipe.zero = zero, recipe.zero_weights = by_weight, recipe.optimizer = OptimizerState::kAdam;
  std::vector<double> out;
  for (const search::DeviceMemory& m : search::memory_breakdown(Placement(p.graph, p.views, p.devices), recipe))
    out.push_back(m.weights + m.gradients + m.activations + m.transient);
  return out;
}

// Measured against stage 1 on four devices, the groups save what the
// memory model says they do, within the factor of two zero_memory_test.cpp
// allows a whole-plan stage (what each holds in flight differs); the model
// puts the mix strictly between stage 1 and stage 3.
TEST(ZeroWeightGroupsRun, HoldLessAsTheMemoryModelCounts) {
  const Plan p = pcgx::testing::zoo_data_parallel("gpt-tiny", 4);
  const ZeroWeights by_weight = groups(p.graph);
  auto train_at = [&](ZeroStage z, const ZeroWeights& w) {
    TrainOptions o = options(z, w, 4);
    o.optimizer.kind = OptimizerKind::kAdam, o.optimizer.lr = 0.01, o.bucket_bytes = 1;
    return run(p, o);
  };
  const TrainResult stage1 = train_at(ZeroStage::k1, {}), mixed = train_at(ZeroStage::k1, by_weight);
  const auto base = predicted(p, ZeroStage::k1, {}), less = predicted(p, ZeroStage::k1, by_weight), least = predicted(p, ZeroStage::k3, {});
  for (size_t d = 0; d < 4; ++d) {
    const double want = base[d] - less[d];
    ASSERT_GT(want, 0) << "device " << d;
    EXPECT_LT(want, base[d] - least[d]) << "device " << d;
    const auto saved = static_cast<double>(stage1.device_buffer_bytes[d] - mixed.device_buffer_bytes[d]);
    EXPECT_GT(saved, 0.5 * want) << "device " << d << ": saved " << saved << " B, the model " << want;
    EXPECT_LT(saved, 2.0 * want) << "device " << d;
  }
}

// Stage 0 beside a sharded stage is one error naming the field.
TEST(ZeroWeightGroupsRun, StageZeroBesideAShardedStageIsRefused) {
  const Plan p = pcgx::testing::zoo_data_parallel("gpt-tiny", 2);
  ExecutionPlan plan = make_plan(p.graph, p.views, p.devices);
  try {
    set_zero(plan, ZeroStage::k0, 0, {{"wte.table", ZeroStage::k3}}, kDefaultBucketBytes);
    FAIL() << "stage 0 beside stage 3 was accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "TrainOptions.zero_weights");
    EXPECT_NE(std::string(e.what()).find("wte.table"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pcgx::runtime
