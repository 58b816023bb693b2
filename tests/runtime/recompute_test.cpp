// Activation recomputation in the runtime (execution_plan.h's
// set_recompute, device_executor.h): the backward pass re-runs what the
// policy does not keep. Against the same plan keeping everything: the same
// losses and weights to the bit (the re-run kernels see the same inputs
// and offsets, dropout the same masks), and buffer memory lower by what
// the memory model says the policy saves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "pcgx/pcg/attention_kernels.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/layout_search.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/user_plan.h"
#include "pcgx/pcg/relayout.h"
#include "mapped_plan.h"
#include "same_training.h"

namespace pcgx::runtime {
namespace {

using Plan = pcgx::testing::MappedPlan;
using pcgx::testing::mapped_plan;

TrainResult run(const Plan& p, Recompute policy, int32_t layers = kAllLayers) {
  TrainOptions o;
  o.steps = 4, o.seed = 7, o.batches = 2, o.optimizer.lr = 0.05, o.optimizer.momentum = 0.9;
  o.recompute = policy, o.recompute_layers = layers;
  return train(p.graph, p.views, p.devices, o);
}

using pcgx::testing::expect_same_bits;

// How many nodes a policy recomputes in a plan, checked to be some: a test
// of a policy that recomputes nothing would pass for nothing.
size_t recomputed(const Plan& p, Recompute policy) {
  ExecutionPlan plan = make_plan(p.graph, p.views, p.devices);
  set_recompute(plan, policy);
  size_t n = 0;
  for (const RecomputeSegment& s : plan.segments) n += s.nodes.size();
  return n;
}

TEST(RuntimeRecompute, SameGradientsAsKeepingEverything) {
  for (const char* model : {"gpt-tiny", "bert-large-tiny", "llama-tiny"}) {
    for (int devices : {1, 2}) {
      SCOPED_TRACE(std::string(model) + " on " + std::to_string(devices) + " devices");
      const Graph g = build_model(model, {{"batch", 8}});
      const Plan p = devices == 1 ? Plan{g, {}, 1} : mapped_plan(search::data_parallel(g, devices), devices);
      const TrainResult keep = run(p, Recompute::kNone);
      for (Recompute policy : {Recompute::kSelective, Recompute::kFull}) {
        SCOPED_TRACE(name(policy));
        ASSERT_GT(recomputed(p, policy), 0u);
        expect_same_bits(run(p, policy), keep);
      }
    }
  }
}

// Megatron's tensor parallelism inside each segment: the re-run forward
// sends its messages and runs its all-reduces again, paired up on every
// device as in the forward pass.
TEST(RuntimeRecompute, TensorParallelSegmentsRerunTheirCollectives) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const Graph e = *search::expert(g, search::find_machine("dgx-h100").with_devices(4), 4, 2);
  const Plan p = mapped_plan(e, 4);
  ASSERT_GT(recomputed(p, Recompute::kFull), 0u);
  const TrainResult keep = run(p, Recompute::kNone), full = run(p, Recompute::kFull);
  expect_same_bits(full, keep);
  // The segments' messages twice, as counted for the plan.
  const auto steps = static_cast<double>(keep.losses.size());
  EXPECT_EQ(static_cast<double>(keep.bytes_sent) / steps, step_bytes(p.graph, p.views, 4));
  const double again = recompute_step_bytes(p.graph, p.views, 4, Recompute::kFull);
  EXPECT_GT(again, 0);
  EXPECT_EQ(static_cast<double>(full.bytes_sent) / steps, step_bytes(p.graph, p.views, 4) + again);
}

// Sequence parallelism (the expert's, t = 2 on 2 devices): selective
// gathers each sequence-split input again in backward (a re-run of the
// Combine and Replicate alone), and so does gathers, which recomputes
// nothing else (Megatron-LM's sequence parallelism without
// recomputation): the same bits, the gathers' bytes twice as counted, and
// the memory the model says it saves.
TEST(RuntimeRecompute, SequenceParallelInputsAreGatheredAgain) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const Plan p = mapped_plan(*search::expert(g, search::find_machine("dgx-h100").with_devices(2), 2, 2, true), 2);
  const TrainResult keep = run(p, Recompute::kNone);
  const auto steps = static_cast<double>(keep.losses.size());
  const Placement place(p.graph, p.views, 2);
  auto predicted = [&](Recompute policy) {
    const search::DeviceMemory m = search::memory_breakdown(place, {Precision::kFp32, policy})[0];
    return m.activations + m.transient;
  };
  for (Recompute policy : {Recompute::kSelective, Recompute::kGathers}) {
    SCOPED_TRACE(name(policy));
    ExecutionPlan plan = make_plan(p.graph, p.views, 2);
    set_recompute(plan, policy);
    size_t gather_segments = 0;
    for (const RecomputeSegment& seg : plan.segments)
      gather_segments += std::all_of(seg.nodes.begin(), seg.nodes.end(),
                                     [&](NodeId n) { return p.graph.node(n).op->op_class == OpClass::kParallel; });
    ASSERT_GT(gather_segments, 0u);
    if (policy == Recompute::kGathers) {
      EXPECT_EQ(gather_segments, plan.segments.size()) << "gathers re-runs the gathers alone";
    }
    const TrainResult again_run = run(p, policy);
    expect_same_bits(again_run, keep);
    const double again = recompute_step_bytes(p.graph, p.views, 2, policy);
    EXPECT_GT(again, 0);
    EXPECT_EQ(static_cast<double>(again_run.bytes_sent) / steps, step_bytes(p.graph, p.views, 2) + again);
    const double saves = predicted(Recompute::kNone) - predicted(policy);
    EXPECT_GT(saves, 0);
    EXPECT_EQ(static_cast<double>(keep.buffer_bytes - again_run.buffer_bytes), saves);
  }
}

// full+gathers (Megatron-LM's sequence parallelism with
// --recompute-num-layers 1): the first layer re-runs whole and the other
// gathers its sequence-split inputs again: the same bits as keeping
// everything, the gathers' bytes counted again, and the memory the model
// predicts, below full of one layer's, which keeps the gathered copies of
// the layer left whole.
TEST(RuntimeRecompute, LayersLeftWholeGatherAgain) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const Plan p = mapped_plan(*search::expert(g, search::find_machine("dgx-h100").with_devices(2), 2, 2, true), 2);
  const Placement place(p.graph, p.views, 2);
  auto predicted = [&](Recompute policy, int32_t layers) {
    const search::DeviceMemory m = search::memory_breakdown(place, {Precision::kFp32, policy, ZeroStage::k0, layers})[0];
    return m.activations + m.transient;
  };
  const TrainResult keep = run(p, Recompute::kNone);
  const TrainResult full = run(p, Recompute::kFull, 1);
  const TrainResult mixed = run(p, Recompute::kFullGathers, 1);
  expect_same_bits(mixed, keep);
  const auto steps = static_cast<double>(keep.losses.size());
  const double again = recompute_step_bytes(p.graph, p.views, 2, Recompute::kFullGathers, false, 1);
  EXPECT_GT(again, recompute_step_bytes(p.graph, p.views, 2, Recompute::kFull, false, 1));
  EXPECT_EQ(static_cast<double>(mixed.bytes_sent) / steps, step_bytes(p.graph, p.views, 2) + again);
  EXPECT_EQ(static_cast<double>(keep.buffer_bytes - mixed.buffer_bytes),
            predicted(Recompute::kNone, kAllLayers) - predicted(Recompute::kFullGathers, 1));
  EXPECT_LT(mixed.buffer_bytes, full.buffer_bytes);
}

// Gradient accumulation: each micro-batch frees and re-runs its segments.
TEST(RuntimeRecompute, EveryMicroBatchRecomputes) {
  const Graph dp = search::data_parallel(build_model("gpt-tiny", {{"batch", 8}}), 2);
  const Plan p = mapped_plan(search::pipelined(dp, 4, true), 2);
  ASSERT_EQ(make_plan(p.graph, p.views, 2).micro_batches, 4);
  for (Recompute policy : {Recompute::kSelective, Recompute::kFull}) {
    SCOPED_TRACE(name(policy));
    ASSERT_GT(recomputed(p, policy), 0u);
    expect_same_bits(run(p, policy), run(p, Recompute::kNone));
  }
}

// Measured as predicted: the runtime's most buffer memory held at once
// drops by exactly what search's memory model says the policy saves (the
// activations it does not keep, less the largest segment, live while it
// is re-run), FP32, on every device.
TEST(RuntimeRecompute, SavesTheMemoryTheModelPredicts) {
  for (const char* model : {"gpt-tiny", "bert-large-tiny"}) {
    for (int devices : {1, 2}) {
      SCOPED_TRACE(std::string(model) + " on " + std::to_string(devices) + " devices");
      const Graph g = build_model(model, {{"batch", 8}});
      const Plan p = devices == 1 ? Plan{g, {}, 1} : mapped_plan(search::data_parallel(g, devices), devices);
      const Placement place(p.graph, p.views, p.devices);
      auto predicted = [&](Recompute policy) {
        const search::DeviceMemory m = search::memory_breakdown(place, {Precision::kFp32, policy})[0];
        return m.activations + m.transient;
      };
      const TrainResult keep = run(p, Recompute::kNone);
      for (Recompute policy : {Recompute::kSelective, Recompute::kFull}) {
        SCOPED_TRACE(name(policy));
        const double saves = predicted(Recompute::kNone) - predicted(policy);
        ASSERT_GT(saves, 0);
        const TrainResult r = run(p, policy);
        EXPECT_EQ(static_cast<double>(keep.buffer_bytes - r.buffer_bytes), saves)
            << "kept " << keep.buffer_bytes << " B, recomputing " << r.buffer_bytes << " B";
      }
    }
  }
}

// A sum splitting two dimensions before it merges (the layout search's
// split-first sequence, run as one step: pcg/relayout.h), on 4 devices:
// full recomputation re-runs the step whole (its splits between hold
// nothing), the same bits as keeping everything, and every device holds
// as much less as the memory model predicts.
TEST(RuntimeRecompute, ASumSplittingTwoDimensionsIsReRunAsOneStep) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const search::UserPlan plan = search::plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, "rules": [
    {"select": {}, "partition": {"samples": 2}},
    {"select": {"name": "block*.mlp.intermediate"}, "partition": {"samples": 2, "out": 2}},
    {"select": {"name": "block*.mlp.ffn_output"}, "partition": {"samples": 2, "reduce": 2}},
    {"select": {"name": "block*.mlp_dropout"}, "partition": {"dim1": 2, "dim2": 2}}]})", "two.json");
  const search::CostModel cm(search::find_machine("dgx-h100").with_devices(4), search::default_efficiency());
  const search::Strategy st = search::MachineMapper(cm).map(search::lower_plan(g, plan, 4));
  const search::Relaid r = search::cheapest_layout_changes(st.graph, st.views, cm);
  const Plan p{r.graph, r.views, 4};
  // The step is there: a Reduce whose partner is a second split.
  const auto consumers = p.graph.consumers();
  int runs = 0;
  for (const Node& n : p.graph.nodes())
    if (const auto partner = layout_change_partner(p.graph, n.id, consumers)) runs += !layout_change_inside(p.graph, n.id, *partner).empty();
  ASSERT_GT(runs, 0);
  ASSERT_GT(recomputed(p, Recompute::kFull), 0u);
  const Placement place(p.graph, p.views, p.devices);
  const TrainResult keep = run(p, Recompute::kNone), full = run(p, Recompute::kFull);
  expect_same_bits(full, keep);
  const auto none = search::memory_breakdown(place, {Precision::kFp32, Recompute::kNone});
  const auto all = search::memory_breakdown(place, {Precision::kFp32, Recompute::kFull});
  ASSERT_EQ(keep.device_buffer_bytes.size(), 4u);
  for (size_t d = 0; d < 4; ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    const double saves = (none[d].activations + none[d].transient) - (all[d].activations + all[d].transient);
    EXPECT_GT(saves, 0);
    EXPECT_EQ(static_cast<double>(keep.device_buffer_bytes[d] - full.device_buffer_bytes[d]), saves);
  }
}

// Full recomputation of some layers only (Megatron-LM's block method): the
// same bits as keeping everything, and the memory measured between none's
// and every layer's, as the memory model predicts at each count. And
// full+selective, whose other layers re-run their attention scores: the
// same bits, the memory predicted, less than full's at the same count.
TEST(RuntimeRecompute, SomeLayersSaveWhatTheModelPredicts) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}, {"layers", 3}});
  for (int devices : {1, 2}) {
    SCOPED_TRACE(std::to_string(devices) + " devices");
    const Plan p = devices == 1 ? Plan{g, {}, 1} : mapped_plan(search::data_parallel(g, devices), devices);
    const Placement place(p.graph, p.views, p.devices);
    auto predicted = [&](Recompute policy, int32_t layers) {
      const search::DeviceMemory m = search::memory_breakdown(place, {Precision::kFp32, policy, ZeroStage::k0, layers})[0];
      return m.activations + m.transient;
    };
    const TrainResult keep = run(p, Recompute::kNone);
    std::vector<int64_t> full(4, keep.buffer_bytes);  // full[k]: k layers recomputed whole
    for (const Recompute policy : {Recompute::kFull, Recompute::kFullSelective}) {
      for (int32_t layers = 1; layers <= 3; ++layers) {
        SCOPED_TRACE(std::string(name(policy)) + ", " + std::to_string(layers) + " layers");
        const TrainResult r = run(p, policy, layers);
        expect_same_bits(r, keep);
        EXPECT_EQ(static_cast<double>(keep.buffer_bytes - r.buffer_bytes), predicted(Recompute::kNone, kAllLayers) - predicted(policy, layers));
        if (policy == Recompute::kFull) {
          EXPECT_LT(r.buffer_bytes, full[static_cast<size_t>(layers) - 1]);
          full[static_cast<size_t>(layers)] = r.buffer_bytes;
        } else if (layers < 3) {  // with every layer whole selective has nothing left
          ExecutionPlan mixed = make_plan(p.graph, p.views, p.devices), whole = make_plan(p.graph, p.views, p.devices);
          set_recompute(mixed, policy, layers), set_recompute(whole, Recompute::kFull, layers);
          EXPECT_GT(mixed.segments.size(), whole.segments.size()) << "the layers left whole recompute something";
          EXPECT_LT(r.buffer_bytes, full[static_cast<size_t>(layers)]);
        }
      }
    }
  }
}

// What the runtime cannot re-run is one error naming the node: here a
// selective segment (a product that grows its inputs) whose output is the
// graph's.
TEST(RuntimeRecompute, RefusesRecomputingAGraphOutput) {
  GraphBuilder b("scores-out");
  const TensorRef q = b.input("q", {2, 8, 2}), k = b.input("k", {2, 2, 8});
  const TensorRef scores = b.batch_matmul(q, k, "scores");
  b.graph().add_output(scores);
  const Graph g = b.finish();
  ExecutionPlan plan = make_plan(g, {}, 1);
  try {
    set_recompute(plan, Recompute::kSelective);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scores"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("output of the graph"), std::string::npos) << e.what();
  }
  ExecutionPlan keep = make_plan(g, {}, 1);
  set_recompute(keep, Recompute::kNone);
  EXPECT_TRUE(keep.segments.empty());
}

// FlashAttention's plans (training_recipe.h): the CPU runtime runs the
// kernels eager but keeps none of their scores, re-running them in
// backward as the kernel does: the same bits as keeping everything, and
// the memory saved that the model predicts for eager kernels re-running
// the scores (selective recomputation's, here the same operators); the
// model's flash figure, a GPU kernel that never writes the scores, is
// lower still by their transient.
TEST(RuntimeRecompute, FlashAttentionKeepsNoScores) {
  for (const char* model : {"gpt-tiny", "llama-tiny"}) {
    SCOPED_TRACE(model);
    const Graph g = build_model(model, {{"batch", 8}});
    const Plan p = mapped_plan(search::data_parallel(g, 2), 2);
    TrainOptions o;
    o.steps = 4, o.seed = 7, o.batches = 2, o.optimizer.lr = 0.05, o.optimizer.momentum = 0.9;
    const TrainResult keep = train(p.graph, p.views, p.devices, o);
    o.attention = AttentionKernel::kFlash;
    const TrainResult flash = train(p.graph, p.views, p.devices, o);
    expect_same_bits(flash, keep);
    const Placement place(p.graph, p.views, p.devices);
    auto predicted = [&](AttentionKernel a, Recompute policy) {
      TrainingRecipe r{Precision::kFp32, policy};
      r.attention = a;
      const search::DeviceMemory m = search::memory_breakdown(place, r)[0];
      return m.activations + m.transient;
    };
    const double saves = predicted(AttentionKernel::kEager, Recompute::kNone) - predicted(AttentionKernel::kEager, Recompute::kSelective);
    ASSERT_GT(saves, 0);
    EXPECT_EQ(static_cast<double>(keep.buffer_bytes - flash.buffer_bytes), saves);
    EXPECT_LT(predicted(AttentionKernel::kFlash, Recompute::kNone), predicted(AttentionKernel::kEager, Recompute::kSelective));
  }
}

// Megatron-LM's fused scale and softmax changes only the price: the CPU
// runtime trains it as eager, the same bits, buffers and bytes, with
// recomputation too.
TEST(RuntimeRecompute, AFusedSoftmaxTrainsAsEager) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const Plan p = mapped_plan(search::data_parallel(g, 2), 2);
  for (const Recompute policy : {Recompute::kNone, Recompute::kSelective}) {
    SCOPED_TRACE(name(policy));
    TrainOptions o;
    o.steps = 4, o.seed = 7, o.batches = 2, o.optimizer.lr = 0.05, o.optimizer.momentum = 0.9, o.recompute = policy;
    const TrainResult eager = train(p.graph, p.views, p.devices, o);
    o.attention = AttentionKernel::kFused;
    const TrainResult fused = train(p.graph, p.views, p.devices, o);
    expect_same_bits(fused, eager);
    EXPECT_EQ(fused.buffer_bytes, eager.buffer_bytes);
    EXPECT_EQ(fused.bytes_sent, eager.bytes_sent);
  }
}

// FlashAttention's re-run of the scores sends again what they read from
// another device: with every attention kernel's operators on device 1 and
// the rest on device 0, the re-run scores receive the query and key again
// (recompute_step_bytes with flash, no policy), the same bits as keeping.
TEST(RuntimeRecompute, FlashAttentionsRerunReceivesItsInputsAgain) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const AttentionKernels kernels = find_attention_kernels(g, source_layouts(g));
  ASSERT_EQ(kernels.members.size(), 2u);
  std::vector<MachineView> views(g.size());
  for (const auto& members : kernels.members)
    for (const NodeId n : members) views[static_cast<size_t>(n)].start = 1;
  TrainOptions o;
  o.steps = 4, o.seed = 7, o.batches = 2, o.optimizer.lr = 0.05, o.optimizer.momentum = 0.9;
  const TrainResult keep = train(g, views, 2, o);
  o.attention = AttentionKernel::kFlash;
  const TrainResult flash = train(g, views, 2, o);
  expect_same_bits(flash, keep);
  const auto steps = static_cast<double>(keep.losses.size());
  const double again = recompute_step_bytes(g, views, 2, Recompute::kNone, false, kAllLayers, {}, {}, AttentionKernel::kFlash);
  EXPECT_GT(again, 0);
  EXPECT_EQ(static_cast<double>(keep.bytes_sent) / steps, step_bytes(g, views, 2));
  EXPECT_EQ(static_cast<double>(flash.bytes_sent) / steps, step_bytes(g, views, 2) + again);
}

}  // namespace
}  // namespace pcgx::runtime
