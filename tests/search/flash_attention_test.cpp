// FlashAttention (training_recipe.h's AttentionKernel::kFlash,
// pcg/attention_kernels.h): where a graph's attention runs as one kernel,
// what the cost model charges for it (worked by hand), what the memory
// model keeps, that the simulator agrees, and how a strategy file records
// it.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "pcgx/pcg/attention_kernels.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

CostModel model(AttentionKernel a, Recompute r = Recompute::kNone, Machine m = toy_machine()) {
  TrainingRecipe recipe{Precision::kFp32, r, ZeroStage::k0};
  recipe.attention = a;
  return CostModel(std::move(m), toy_efficiency(), {}, {}, recipe);
}

// The tiny GPT's two layers: one kernel each, from the scores' product
// through scale, softmax and dropout to the weighted sum; in its
// data-parallel strategy too (no parallel operator inside attention).
TEST(FlashAttention, OneKernelPerLayerFromTheScoresToTheWeightedSum) {
  const Graph g = build_model("gpt-tiny", {});
  for (const Graph& x : {g, data_parallel(g, 2)}) {
    const AttentionKernels k = find_attention_kernels(x, source_layouts(x));
    ASSERT_EQ(k.members.size(), 2u);
    for (size_t l = 0; l < 2; ++l) {
      std::vector<std::string> names;
      for (const NodeId n : k.members[l]) names.push_back(x.node(n).name);
      const std::string b = "block" + std::to_string(l) + ".attn.";
      EXPECT_EQ(names, (std::vector<std::string>{b + "scores", b + "scale", b + "softmax", b + "attn_dropout", b + "context"}));
      EXPECT_TRUE(k.first(k.members[l].front()));
      EXPECT_FALSE(k.first(k.members[l].back()));
    }
    // The transposes into the heads' layout and back are the kernel's
    // strides (attention_kernels.h), nothing else is; the fused softmax
    // (an eager attention's) reads through none.
    std::vector<std::string> strided;
    for (const Node& n : x.nodes())
      if (k.strided_view(n.id)) strided.push_back(n.name);
    std::vector<std::string> want;
    for (const std::string b : {"block0.attn.", "block1.attn."})
      for (const std::string t : {"q_t", "k_t", "v_t", "context_t"}) want.push_back(b + t);
    std::sort(strided.begin(), strided.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(strided, want);
    const AttentionKernels fused = fused_softmax_kernels(x, source_layouts(x));
    for (const Node& n : x.nodes()) EXPECT_FALSE(fused.strided_view(n.id)) << n.name;
  }
  // Nothing in an MLP.
  EXPECT_TRUE(find_attention_kernels(build_model("mlp-tiny", {}), source_layouts(build_model("mlp-tiny", {}))).members.empty());
}

// q [1, 2, 128, 4] times k^T [1, 2, 4, 128], a causal softmax, times v
// [1, 2, 128, 4] on the toy device (1 TFLOP/s, 100 GB/s, every efficiency
// 1): the operators' FLOPs, 129/256 of them under the causal mask
// ((s + 1) / 2s of the 128 x 128 scores), against the bytes of q, k^T, v
// and the output alone (4 x 1024 floats), the larger; backward twice the
// forward (the toy's fallback).
TEST(FlashAttention, KernelTimeWorkedByHand) {
  GraphBuilder b("attn");
  const TensorRef q = b.input("q", IntList{1, 2, 128, 4}), kt = b.input("kt", IntList{1, 2, 4, 128}),
                  v = b.input("v", IntList{1, 2, 128, 4});
  const TensorRef probs = b.softmax(b.batch_matmul(q, kt, "scores"), true, "softmax");
  b.graph().add_output(b.batch_matmul(probs, v, "context"));
  const Graph g = b.finish();
  const AttentionKernels k = find_attention_kernels(g, source_layouts(g));
  ASSERT_EQ(k.members.size(), 1u);
  ASSERT_EQ(k.members[0].size(), 3u);
  double flops = 0;
  for (const NodeId n : k.members[0]) {
    const Node& node = g.node(n);
    std::vector<TensorType> in, out;
    for (const TensorRef& t : node.inputs) in.push_back({g.shape(t).logical_shape(), g.shape(t).dtype});
    out.push_back({node.outputs[0].logical_shape(), node.outputs[0].dtype});
    flops += node.op->flops(node.attrs, in, out);
  }
  ASSERT_GT(flops, 2 * 2 * (2 * 128 * 128 * 4));  // the two products, and the softmax
  const CostModel cm = model(AttentionKernel::kFlash);
  const double forward = std::max(flops * 129.0 / 256.0 / 1e12, 4 * 1024 * 4 / 1e11);
  ASSERT_GT(flops * 129.0 / 256.0 / 1e12, 4 * 1024 * 4 / 1e11);  // compute-bound: the mask counts
  const Seconds s = cm.attention_kernel_time(g, k.members[0]);
  EXPECT_DOUBLE_EQ(s.forward, forward);
  EXPECT_DOUBLE_EQ(s.backward, 2 * forward);
}

// Which transposes the kernel reads or writes through its strides: those
// that leave the head dimension innermost, read by the kernel alone (or
// reading its output alone), and no graph output. q, k and v from
// [1, 128, 2, 4] projections (d = 4 innermost).
TEST(FlashAttention, TransposesReadThroughStridesKeepTheHeadDimensionInnermost) {
  enum class Variant { kPlain, kQIsAnOutput, kKReadTwice, kDNotInnermost };
  auto strided = [](Variant v) {
    GraphBuilder b("attn");
    const bool d_outer = v == Variant::kDNotInnermost;
    const TensorRef xq = b.input("xq", d_outer ? IntList{1, 128, 4, 2} : IntList{1, 128, 2, 4});
    const TensorRef xk = b.input("xk", IntList{1, 128, 2, 4}), xv = b.input("xv", IntList{1, 128, 2, 4});
    const TensorRef q = b.transpose(xq, d_outer ? IntList{0, 3, 1, 2} : IntList{0, 2, 1, 3}, "q_t");
    const TensorRef k = b.transpose(xk, {0, 2, 3, 1}, "k_t"), vt = b.transpose(xv, {0, 2, 1, 3}, "v_t");
    const TensorRef probs = b.softmax(b.batch_matmul(q, k, "scores"), true, "softmax");
    b.graph().add_output(b.transpose(b.batch_matmul(probs, vt, "context"), {0, 2, 1, 3}, "context_t"));
    if (v == Variant::kQIsAnOutput) b.graph().add_output(q);
    if (v == Variant::kKReadTwice) b.graph().add_output(b.unary("Relu", k, "k_again"));
    const Graph g = b.finish();
    const AttentionKernels kernels = find_attention_kernels(g, source_layouts(g));
    EXPECT_EQ(kernels.members.size(), 1u);
    std::set<std::string> names;
    for (const Node& n : g.nodes())
      if (kernels.strided_view(n.id)) names.insert(n.name);
    return names;
  };
  EXPECT_EQ(strided(Variant::kPlain), (std::set<std::string>{"q_t", "k_t", "v_t", "context_t"}));
  EXPECT_EQ(strided(Variant::kQIsAnOutput), (std::set<std::string>{"k_t", "v_t", "context_t"}));
  EXPECT_EQ(strided(Variant::kKReadTwice), (std::set<std::string>{"q_t", "v_t", "context_t"}));
  EXPECT_EQ(strided(Variant::kDNotInnermost), (std::set<std::string>{"k_t", "v_t", "context_t"}));
}

// Grouped-query attention: the key/value heads' copies for their query
// heads (the zoo's `_repeat` concats, doubling, one more where the group
// is odd) are read by the kernel through strides: every copy no forward
// pass, the last one (standing for them) a backward of one pass summing
// the copies' gradients into the head's (worked by hand on the toy
// device: 100 GB/s, every efficiency 1, no launch). q has no copies; with
// every head its own (kv_heads 0) nothing is copied. The simulator agrees.
TEST(FlashAttention, GroupedHeadsCopiesAreReadThroughStrides) {
  for (const int64_t kv : {1, 2, 0}) {
    const Graph g = build_model("llama-tiny", {{"heads", 6}, {"hidden", 48}, {"kv_heads", kv}, {"seq", 64}});
    const int64_t group = kv == 0 ? 1 : 6 / kv;
    const AttentionKernels k = find_attention_kernels(g, source_layouts(g));
    ASSERT_EQ(k.members.size(), 2u);
    std::set<std::string> copies, last, read;
    for (const Node& n : g.nodes()) {
      const bool copy = n.name.find("_repeat") != std::string::npos;  // (the copies, and the view of them as heads)
      if (copy && n.name.find("_repeated") == std::string::npos) {
        EXPECT_TRUE(k.strided_view(n.id)) << n.name;
        copies.insert(n.name);
      }
      const bool k_or_v_t = n.name.ends_with(".k_t") || n.name.ends_with(".v_t");
      EXPECT_EQ(k.grouped_copies(n.id), (copy || k_or_v_t) && group > 1 ? group : 0) << n.name;
      if (k.grouped_sum_copies(n.id) > 0) {
        EXPECT_EQ(k.grouped_sum_copies(n.id), group) << n.name;
        last.insert(n.name);
      }
    }
    // Six copies: three (two concats: a doubling, one more for the odd
    // count) doubled; three: the first two concats alone.
    const size_t per_tensor = group == 6 ? 3 : group == 3 ? 2 : 0;
    EXPECT_EQ(copies.size(), 2 * 2 * per_tensor);  // k and v in two layers
    EXPECT_EQ(last.size(), group == 1 ? 0u : 4u);
    const CostModel cm = model(AttentionKernel::kFlash, Recompute::kNone, toy_machine().with_devices(2));
    for (const Node& n : g.nodes()) {
      if (k.grouped_sum_copies(n.id) == 0) continue;
      const double bytes = static_cast<double>(n.outputs[0].num_elements()) * 4;
      const Seconds t = cm.operator_time(g, {k, {}}, n.id);
      EXPECT_EQ(t.forward, 0.0) << n.name;
      EXPECT_DOUBLE_EQ(t.backward, bytes * (1.0 + 1.0 / static_cast<double>(group)) / 1e11) << n.name;
    }
    if (group == 1) continue;
    const Graph dp = data_parallel(g, 2);
    const Strategy f = MachineMapper(cm).map(dp);
    ASSERT_TRUE(f.estimate.feasible);
    EXPECT_NEAR(Simulator(f.graph, f.views, cm).time(), f.estimate.time, 1e-9 * f.estimate.time);
    // Memory: the transposed copies k^T and v that the kernel keeps count
    // as the head alone, where selective recomputation (the same tensors
    // kept, eager kernels) keeps the copies.
    const CostModel selective = model(AttentionKernel::kEager, Recompute::kSelective, toy_machine().with_devices(2));
    const Placement placed(f.graph, f.views, 2);
    const std::vector<DeviceMemory> fm = memory_breakdown(placed, cm.recipe()), sm = memory_breakdown(placed, selective.recipe());
    double copies_kept = 0;  // per device: half the samples
    const AttentionKernels fk = find_attention_kernels(f.graph, source_layouts(f.graph));
    for (const Node& n : f.graph.nodes())
      if (fk.grouped_copies(n.id) > 0 && n.op->permutes)
        copies_kept += static_cast<double>(n.outputs[0].shard_elements()) * 4 * (1.0 - 1.0 / static_cast<double>(group));
    ASSERT_GT(copies_kept, 0);
    for (size_t d = 0; d < 2; ++d) EXPECT_DOUBLE_EQ(sm[d].activations - fm[d].activations, copies_kept) << "device " << d;
  }
}

// Copies are taken as strides only where every concatenated tensor is the
// one head, stacked along its last dimension, and each copy reaches the
// kernel alone: a copy also read elsewhere, a concatenation of two
// different tensors, or copies stacked along the heads, is a pass.
TEST(FlashAttention, OnlyCopiesOfOneHeadReadByTheKernelAloneAreStrides) {
  enum class Variant { kCopies, kCopyReadTwice, kTwoTensors, kAlongHeads };
  auto grouped = [](Variant v) {
    GraphBuilder b("attn");
    const TensorRef xq = b.input("xq", IntList{1, 128, 2, 4}), xk = b.input("xk", IntList{1, 128, 1, 4}),
                    other = b.input("other", IntList{1, 128, 1, 4}), xv = b.input("xv", IntList{1, 128, 2, 4});
    // (Along the heads, [1, 128, 2, 4] is head i % 1's copies in another
    // order than FlashAttention-2's i / g: left a pass.)
    const TensorRef copies = b.concat({xk, v == Variant::kTwoTensors ? other : xk}, v == Variant::kAlongHeads ? 2 : 3, "k_repeat");
    const TensorRef k = b.transpose(b.reshape(copies, {1, 128, 2, 4}, "k_repeated"), {0, 2, 3, 1}, "k_t");
    const TensorRef q = b.transpose(xq, {0, 2, 1, 3}, "q_t"), vt = b.transpose(xv, {0, 2, 1, 3}, "v_t");
    const TensorRef probs = b.softmax(b.batch_matmul(q, k, "scores"), true, "softmax");
    b.graph().add_output(b.batch_matmul(probs, vt, "context"));
    if (v == Variant::kCopyReadTwice) b.graph().add_output(b.unary("Relu", copies, "copies_again"));
    const Graph g = b.finish();
    const AttentionKernels kernels = find_attention_kernels(g, source_layouts(g));
    EXPECT_EQ(kernels.members.size(), 1u);
    const NodeId repeat = copies.node;
    return std::make_pair(kernels.strided_view(repeat), kernels.grouped_copies(repeat));
  };
  EXPECT_EQ(grouped(Variant::kCopies), std::make_pair(true, int64_t{2}));
  EXPECT_EQ(grouped(Variant::kCopyReadTwice), std::make_pair(false, int64_t{0}));
  EXPECT_EQ(grouped(Variant::kTwoTensors), std::make_pair(false, int64_t{0}));
  EXPECT_EQ(grouped(Variant::kAlongHeads), std::make_pair(false, int64_t{0}));
}

// A long sequence (1024): eager writes and reads the [b, a, s, s] scores
// between its kernels; flash reads q, k, v once. The mapped step under
// flash is faster, keeps less (no scores), and the simulator prices it as
// the estimate does; a stage that re-runs its layers whole (full) runs the
// kernel's forward again.
TEST(FlashAttention, FasterAndSmallerThanEagerAndTheSimulatorAgrees) {
  const Graph g = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 1024}}), 8);
  const CostModel eager = model(AttentionKernel::kEager), flash = model(AttentionKernel::kFlash);
  const Strategy e = MachineMapper(eager).map(g), f = MachineMapper(flash).map(g);
  ASSERT_TRUE(f.estimate.feasible) << f.estimate.infeasible;
  EXPECT_LT(f.estimate.time, e.estimate.time);
  EXPECT_LT(f.estimate.max_memory(), e.estimate.max_memory());
  // What flash keeps is what selective recomputation keeps (the same
  // tensors re-run in backward), at no re-run cost of its own; and, unlike
  // selective's re-run, the kernel never writes the scores, in the forward
  // pass or in its backward: less transient.
  const CostModel selective = model(AttentionKernel::kEager, Recompute::kSelective);
  const std::vector<DeviceMemory> fm = memory_breakdown(Placement(f.graph, f.views, 8), flash.recipe()),
                                  sm = memory_breakdown(Placement(f.graph, f.views, 8), selective.recipe());
  for (size_t d = 0; d < fm.size(); ++d) {
    EXPECT_DOUBLE_EQ(fm[d].activations, sm[d].activations);
    EXPECT_LT(fm[d].transient, sm[d].transient);
  }
  const Simulator sim(f.graph, f.views, flash);
  EXPECT_NEAR(sim.time(), f.estimate.time, 1e-9 * f.estimate.time);
  // Full recomputation: the kernel's forward runs again, its inner
  // operators are the layer's (not the kernel's) re-run.
  const CostModel full = model(AttentionKernel::kFlash, Recompute::kFull);
  const RecomputePlan plan = plan_recompute(f.graph, source_layouts(f.graph), full.recipe());
  const AttentionKernels k = find_attention_kernels(f.graph, source_layouts(f.graph));
  for (const NodeId n : k.members[0]) EXPECT_FALSE(plan.recomputed_in_kernel(n));
  const Strategy ff = MachineMapper(full).map(g);
  const CostModel full_eager = model(AttentionKernel::kEager, Recompute::kFull);
  const Strategy fe = MachineMapper(full_eager).map(g);
  EXPECT_LT(ff.estimate.time, fe.estimate.time);
  EXPECT_GT(ff.estimate.time, f.estimate.time);
  // Its re-run writes no scores either: what the layers keep is full's,
  // the transient less.
  const std::vector<DeviceMemory> ffm = memory_breakdown(Placement(ff.graph, ff.views, 8), full.recipe()),
                                  fem = memory_breakdown(Placement(ff.graph, ff.views, 8), full_eager.recipe());
  EXPECT_DOUBLE_EQ(ffm[0].activations, fem[0].activations);
  EXPECT_LT(ffm[0].transient, fem[0].transient);
  // Without full, the kernels' inner operators are re-run inside them.
  const RecomputePlan none = plan_recompute(f.graph, source_layouts(f.graph), flash.recipe());
  for (const std::vector<NodeId>& m : k.members) {
    for (size_t i = 0; i + 1 < m.size(); ++i) EXPECT_TRUE(none.recomputed_in_kernel(m[i]));
    EXPECT_FALSE(none.recomputed[static_cast<size_t>(m.back())]);
  }
}

// On one device the step is its tasks in turn: flash takes off each
// kernel's operators' eager times (forward and backward) and adds the
// kernel's, nothing else (no separate re-run of what it recomputes).
TEST(FlashAttention, OneDevicesStepTradesTheOperatorsForTheKernel) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}, {"seq", 256}});
  const Machine one = toy_machine().with_devices(1);
  const CostModel eager = model(AttentionKernel::kEager, Recompute::kNone, one), flash = model(AttentionKernel::kFlash, Recompute::kNone, one);
  const Strategy e = MachineMapper(eager).map(g), f = MachineMapper(flash).map(g);
  ASSERT_TRUE(e.estimate.feasible && f.estimate.feasible);
  double saved = 0;
  const AttentionKernels kernels = find_attention_kernels(g, source_layouts(g));
  for (const std::vector<NodeId>& k : kernels.members) {
    for (const NodeId n : k) saved += eager.task_time(g, g.node(n)).total();
    saved -= flash.attention_kernel_time(g, k).total();
  }
  // And the transposes it reads and writes through its strides.
  double transposes = 0;
  for (const Node& n : g.nodes())
    if (kernels.strided_view(n.id)) transposes += eager.task_time(g, n).total();
  ASSERT_GT(transposes, 0);
  saved += transposes;
  ASSERT_GT(saved, 0);
  EXPECT_NEAR(e.estimate.time - f.estimate.time, saved, 1e-9 * e.estimate.time);
}

// Recomputing an operator that feeds a kernel (operators naming
// block0's transposed keys) leaves that kernel to the choice made: no
// segment reads another's output, which the runtime could not re-run;
// block1's kernel is still flash's.
TEST(FlashAttention, AKernelAnotherChoiceFeedsIsLeftToIt) {
  const Graph g = build_model("gpt-tiny", {});
  const std::vector<std::string> names{"block0.attn.k_t"};
  const RecomputePlan plan = plan_recompute(g, source_layouts(g), Recompute::kOperators, kAllLayers, {}, names, AttentionKernel::kFlash);
  for (const Node& n : g.nodes()) {
    const int32_t s = plan.segment[static_cast<size_t>(n.id)];
    if (s < 0) continue;
    for (const TensorRef& t : n.inputs) {
      const int32_t from = plan.segment[static_cast<size_t>(t.node)];
      EXPECT_TRUE(from < 0 || from == s) << n.name << " reads " << g.node(t.node).name << " of another segment";
    }
  }
  const AttentionKernels k = find_attention_kernels(g, source_layouts(g));
  ASSERT_EQ(k.members.size(), 2u);
  EXPECT_FALSE(plan.recomputed_in_kernel(k.members[0].front()));
  EXPECT_TRUE(plan.recomputed_in_kernel(k.members[1].front()));
}

// Pipeline stages (2 of 4 devices, 4 micro-batches): every chunk's
// kernels priced as kernels, faster than eager, and the schedule simulated
// micro-batch by micro-batch within 5% of the closed form.
// Data-parallel stages of `g` on the 8 toy devices, under attention `a`.
PipelineResult pipelined_on_toy(const Graph& g, AttentionKernel a, const PipelineOptions& po = {2, 4}) {
  static const Ruleset empty;
  static const RuleLibrary rules(empty);
  SearchOptions o;
  o.algorithm = Algorithm::kDataParallel;
  return optimize_pipeline(g, rules, model(a, Recompute::kNone, toy_machine().with_devices(8)), o, po);
}

TEST(FlashAttention, APipelinedPlanPricesEveryChunksKernels) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}, {"seq", 256}, {"layers", 4}});
  const CostModel flash = model(AttentionKernel::kFlash, Recompute::kNone, toy_machine().with_devices(8));
  const PipelineResult f = pipelined_on_toy(g, AttentionKernel::kFlash), e = pipelined_on_toy(g, AttentionKernel::kEager);
  const Strategy& s = f.search.strategy;
  ASSERT_TRUE(s.estimate.feasible && e.search.strategy.estimate.feasible);
  EXPECT_LT(s.estimate.time, e.search.strategy.estimate.time);
  EXPECT_EQ(find_attention_kernels(s.graph, source_layouts(s.graph)).members.size(), 4u);
  const double simulated = Simulator(s.graph, s.views, flash, PipelineShape{2, 4, 1, PipelineSchedule::k1F1B}).time();
  EXPECT_NEAR(simulated / s.estimate.time, 1.0, 0.05) << "simulated " << simulated << ", predicted " << s.estimate.time;
}

// Where the stages are cut: the balanced cuts weigh each attention by its
// kernel's time, so with flash (attention cheaper, the LM head of a 2,048
// word vocabulary weighing more beside it, the transposes around each
// kernel strides rather than passes) the cut moves a layer and a half
// later than eager's, into the last layer, and the plan there is faster,
// under flash, than one cut where eager's weights balance.
TEST(FlashAttention, PipelineCutsBalanceTheKernelsTimes) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}, {"seq", 256}, {"layers", 4}, {"vocab", 2048}});
  const PipelineResult f = pipelined_on_toy(g, AttentionKernel::kFlash), e = pipelined_on_toy(g, AttentionKernel::kEager);
  EXPECT_EQ(e.stage[0].last, "block1.mlp_residual");  // (also the even layers' cut)
  ASSERT_EQ(f.stage[0].last, "block3.attn_residual");
  PipelineOptions at_eagers{2, 4};
  at_eagers.boundaries = {e.stage[0].last};
  const PipelineResult x = pipelined_on_toy(g, AttentionKernel::kFlash, at_eagers);
  EXPECT_LT(f.search.strategy.estimate.time, x.search.strategy.estimate.time);
}

// The strategy file records flash (eager, the default, is left out); a
// value that is neither is an error naming the field and the choices.
TEST(FlashAttention, TheStrategyFileRecordsIt) {
  EXPECT_EQ(attention_named("flash"), AttentionKernel::kFlash);
  EXPECT_EQ(attention_named("eager"), AttentionKernel::kEager);
  EXPECT_FALSE(attention_named("Flash"));
  const CostModel cm = model(AttentionKernel::kFlash);
  const Graph g = build_model("gpt-tiny", {});
  StrategyFile f{g.name(), cm.machine(), 8, "data-parallel", {}, MachineMapper(cm).map(data_parallel(g, 8))};
  f.recipe = cm.recipe();
  const std::string text = strategy_to_json(f);
  EXPECT_NE(text.find("\"attention\": \"flash\""), std::string::npos);
  EXPECT_EQ(strategy_from_json(text, "s.json").recipe.attention, AttentionKernel::kFlash);
  nlohmann::json bad = nlohmann::json::parse(text);
  bad["attention"] = "sdpa";
  try {
    strategy_from_json(bad.dump(), "s.json");
    FAIL() << "an unknown attention kernel was accepted";
  } catch (const FileError& e) {
    EXPECT_EQ(std::string(e.what()), "s.json: attention: expected one of eager, flash, fused, got \"sdpa\"");
  }
  f.recipe.attention = AttentionKernel::kEager;
  EXPECT_EQ(strategy_to_json(f).find("\"attention\""), std::string::npos);
}

}  // namespace
}  // namespace pcgx::search
