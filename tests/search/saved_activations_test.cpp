// What the memory model keeps per transformer layer (pcg/saved_tensors.h)
// against Korthikanti et al. 2022 (§4, "Reducing Activation Recomputation
// in Large Transformer Models"): 34 s b h + 5 a s^2 b bytes per GPT layer
// in 16-bit precision, 34 s b h / t under tensor and sequence parallelism
// with selective recomputation. pcgx keeps what its own gradient rules
// read, which is their count less the three dropout masks (s b h bytes
// each after the two projections, a s^2 b after the softmax: pcgx draws a
// mask again from its seed) and the GeLU's input (8 s b h: pcgx's Linear
// with a fused GeLU computes its product again in backward).
#include <gtest/gtest.h>

#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

constexpr int64_t kSeq = 512, kBatch = 1, kHidden = 1024, kHeads = 16;

Graph gpt(int64_t layers, int64_t batch = kBatch) {
  return build_model("gpt", {{"layers", layers}, {"hidden", kHidden}, {"heads", kHeads}, {"ffn", 4 * kHidden}, {"seq", kSeq},
                             {"vocab", 1024}, {"batch", batch}});
}

// Activations kept on device 0 for `g` placed on `devices` devices.
double kept(const Graph& g, int64_t devices, Recompute r) {
  const TrainingRecipe recipe{Precision::kFp16, r};
  const CostModel cm(toy_machine().with_devices(devices), toy_efficiency(), {}, {}, recipe);
  const Strategy s = MachineMapper(cm).map(g);
  return memory_breakdown(Placement(s.graph, s.views, devices), recipe)[0].activations;
}

TEST(SavedActivations, PerLayerWithoutParallelismOrRecomputation) {
  const double s = kSeq, b = kBatch, h = kHidden, a = kHeads;
  const double korthikanti = 34 * s * b * h + 5 * a * s * s * b;
  const double masks = 2 * s * b * h + a * s * s * b, gelu_input = 8 * s * b * h;
  EXPECT_DOUBLE_EQ(kept(gpt(2), 1, Recompute::kNone) - kept(gpt(1), 1, Recompute::kNone), korthikanti - masks - gelu_input);
}

TEST(SavedActivations, PerLayerUnderSequenceParallelismAndSelectiveRecomputation) {
  const int64_t t = 4;
  const Machine m = toy_machine().with_devices(t);
  auto layer = [&](int64_t layers) { return kept(*expert(gpt(layers), m, t, t, true), t, Recompute::kSelective); };
  const double s = kSeq, b = kBatch, h = kHidden;
  const double korthikanti = 34 * s * b * h / t, masks = 2 * s * b * h / t, gelu_input = 8 * s * b * h / t;
  EXPECT_DOUBLE_EQ(layer(2) - layer(1), korthikanti - masks - gelu_input);
}


// Megatron-LM's sequence parallelism without recomputation keeps each
// Linear's sequence-split input and gathers it again in backward: their
// Table 2's 34 s b h / t + 5 a s^2 b / t, less the same masks and GeLU
// input, all split by t. Keeping the gathered copies instead (none) holds
// two more layer inputs' worth, 4 s b h (t - 1) / t bytes.
TEST(SavedActivations, PerLayerUnderSequenceParallelismGatheringAgain) {
  const int64_t t = 4;
  const Machine m = toy_machine().with_devices(t);
  auto layer = [&](int64_t layers, Recompute r) { return kept(*expert(gpt(layers), m, t, t, true), t, r); };
  const double s = kSeq, b = kBatch, h = kHidden, a = kHeads;
  const double korthikanti = (34 * s * b * h + 5 * a * s * s * b) / t, masks = (2 * s * b * h + a * s * s * b) / t, gelu_input = 8 * s * b * h / t;
  const double gathers = layer(2, Recompute::kGathers) - layer(1, Recompute::kGathers);
  EXPECT_DOUBLE_EQ(gathers, korthikanti - masks - gelu_input);
  EXPECT_DOUBLE_EQ(layer(2, Recompute::kNone) - layer(1, Recompute::kNone) - gathers, 4 * s * b * h * (t - 1) / t);
}

// A pipeline stage is searched pipelined, holding the micro-batches in
// flight (CostModel::with_micro_batches_in_flight): each kept activation
// counts that many of its micro-slices, the transients one, the weights
// and optimizer state once; the mapper's memory check uses the count.
TEST(SavedActivations, APipelinedGraphKeepsTheMicroBatchesInFlight) {
  const Graph g = pipelined(gpt(2, 4), 4, true);
  const TrainingRecipe recipe{Precision::kFp16, Recompute::kNone};
  const CostModel cm(toy_machine().with_devices(1), toy_efficiency(), {}, {}, recipe);
  const Strategy s = MachineMapper(cm).map(g);
  const Placement p(s.graph, s.views, 1);
  const DeviceMemory one = memory_breakdown(p, recipe)[0], three = memory_breakdown(p, recipe, 3)[0], all = memory_breakdown(p, recipe, 4)[0];
  const double slice = all.activations - three.activations;  // one micro-slice of every pipelined activation kept
  EXPECT_GT(slice, 0);
  EXPECT_DOUBLE_EQ(three.activations - one.activations, 2 * slice);
  EXPECT_DOUBLE_EQ(memory_breakdown(p, recipe, 9)[0].activations, all.activations);  // never more than the micro-batches
  EXPECT_DOUBLE_EQ(three.transient, one.transient);
  EXPECT_DOUBLE_EQ(three.weights, one.weights);
  EXPECT_DOUBLE_EQ(three.optimizer, one.optimizer);
  EXPECT_DOUBLE_EQ(s.estimate.max_memory(), one.total());
  const Strategy held = MachineMapper(cm.with_micro_batches_in_flight(3)).map(g);
  EXPECT_DOUBLE_EQ(held.estimate.max_memory(), three.total());
  EXPECT_EQ(cm.with_micro_batches_in_flight(3).with_devices(1).micro_batches_in_flight(), 3);
}

}  // namespace
}  // namespace pcgx::search
