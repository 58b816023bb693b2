// Activation recomputation (pcg/training_recipe.h, search/recompute.h): which
// operators each policy re-runs, what the memory model then keeps, what the
// cost model and the simulator charge for it, and how a strategy file
// records it. The memory figures are worked by hand on the tiny GPT.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/saved_tensors.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/shipped_library.h"
#include "search/strategy_text.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

// The tiny GPT: batch 2, sequence 16, 2 layers, hidden 32, 4 heads (of 8),
// feed-forward 128.
Graph tiny_gpt() { return build_model("gpt-tiny", {}); }

std::map<std::string, bool> recomputed_by_name(const Graph& g, Recompute policy) {
  const RecomputePlan plan = plan_recompute(g, source_layouts(g), policy);
  std::map<std::string, bool> out;
  for (const Node& n : g.nodes()) out[n.name] = plan.recomputed[static_cast<size_t>(n.id)] != 0;
  return out;
}

TEST(Recompute, NamesParseBack) {
  for (const Recompute r : kRecomputePolicies) EXPECT_EQ(recompute_named(name(r)), r);
  EXPECT_EQ(recompute_named("full+selective"), Recompute::kFullSelective);
  EXPECT_FALSE(recompute_named("auto"));
  EXPECT_FALSE(recompute_named("Full"));
}

// Selective re-runs attention's scores, scale, softmax and dropout (the
// [b, a, s, s] tensors) and nothing else; the weighted sum reading them,
// the projections and the feed-forward keep their outputs.
TEST(Recompute, SelectiveRecomputesTheSequenceQuadraticChain) {
  const Graph g = tiny_gpt();
  const auto r = recomputed_by_name(g, Recompute::kSelective);
  int count = 0;
  for (const auto& [n, yes] : r) count += yes;
  EXPECT_EQ(count, 8);  // four per layer
  for (const std::string layer : {"block0", "block1"}) {
    for (const char* op : {".attn.scores", ".attn.scale", ".attn.softmax", ".attn.attn_dropout"}) EXPECT_TRUE(r.at(layer + op)) << layer + op;
    for (const char* op : {".attn.context", ".attn.query", ".attn.q_t", ".mlp.intermediate", ".ln1"}) EXPECT_FALSE(r.at(layer + op)) << layer + op;
  }
  for (const auto& [n, yes] : recomputed_by_name(g, Recompute::kNone)) EXPECT_FALSE(yes) << n;
}

// Under sequence parallelism (the expert's, t = 2) selective also gathers
// each sequence-split LayerNorm output again in backward instead of
// keeping the gathered copy (Megatron-LM's): the Combine and Replicate
// before each layer's attention projections and feed-forward, and before
// the head, are recomputed, each layout change one segment, while the
// split LayerNorm outputs they read stay kept; the vocabulary-split
// logits gathered for the loss stay kept too. The memory model no longer
// keeps the gathered copies and holds the largest segment once.
TEST(Recompute, SelectiveGathersSequenceParallelInputsAgainInBackward) {
  const Graph g = build_model("gpt-tiny", {{"batch", 4}});
  const Graph sp = *expert(g, toy_machine().with_devices(2), 2, 2, true);
  const RecomputePlan plan = plan_recompute(sp, source_layouts(sp), Recompute::kSelective);
  const RecomputePlan attention_only = plan_recompute(g, source_layouts(g), Recompute::kSelective);
  int pairs = 0;
  const auto consumers = sp.consumers();
  for (const Node& n : sp.nodes()) {
    if (n.op->name != "Combine" || !plan.recomputed[static_cast<size_t>(n.id)]) continue;
    const Node& from = sp.node(n.inputs[0].node);
    EXPECT_FALSE(plan.recomputed[static_cast<size_t>(from.id)]) << describe(from);
    const auto& readers = consumers[static_cast<size_t>(n.id)];
    ASSERT_EQ(readers.size(), 1u);
    const Node& next = sp.node(readers[0].first);
    // The gather of a sequence-split input: Combine, then Replicate.
    ++pairs;
    EXPECT_EQ(from.op->name, "LayerNorm") << describe(from);
    EXPECT_EQ(next.op->name, "Replicate") << describe(next);
    EXPECT_EQ(plan.segment[static_cast<size_t>(next.id)], plan.segment[static_cast<size_t>(n.id)]);
  }
  EXPECT_EQ(pairs, 2 * 2 + 1);  // two per layer and the final LayerNorm's
  for (const Node& n : sp.nodes()) {
    if (n.op->loss == LossKind::kNone) continue;
    for (const TensorRef& t : n.inputs) {
      EXPECT_FALSE(plan.recomputed[static_cast<size_t>(t.node)]) << describe(sp.node(t.node));
    }
  }
  EXPECT_EQ(plan.segments, attention_only.segments + pairs);
  // Memory on device 0: each gathered copy ([4, 16, 32] floats) and, of
  // the attention chain's four [4, 4/2, 16, 16] tensors per layer, the two
  // kept without recomputation (the softmax's and the dropout's) are no
  // longer kept; but each sequence-split LayerNorm output ([4, 16/2, 32]),
  // freed once gathered when nothing re-runs from it, is kept for the
  // gather again. What is held besides, at most: the softmax's and the
  // dropout's outputs with the context product's [4, 2, 16, 8] output in
  // forward (the scores and their scaled copy go once read, in forward and
  // in the re-run), or the head's gathered input (its logits, split by
  // vocabulary, are kept for the loss's backward, which reads them split:
  // activations, not transient).
  const CostModel cm(toy_machine().with_devices(2), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kSelective});
  const Strategy s = MachineMapper(cm).map(sp);
  ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
  const Placement place(s.graph, s.views, 2);
  const DeviceMemory with = memory_breakdown(place, {Precision::kFp32, Recompute::kSelective})[0];
  const DeviceMemory without = memory_breakdown(place, {Precision::kFp32, Recompute::kNone})[0];
  const double gathered = 4 * 16 * 32 * 4.0, t = 4 * 2 * 16 * 16 * 4.0, split = gathered / 2, context = t / 2;
  EXPECT_DOUBLE_EQ(without.activations - with.activations, pairs * (gathered - split) + 2 * 2 * t);
  EXPECT_DOUBLE_EQ(with.transient, std::max(gathered, 2 * t + context));
}

// Gathers (Megatron-LM's sequence parallelism, which keeps its Linear's
// sequence-split input and all-gathers it again in backward whatever the
// recomputation): exactly selective's gathers, each its own segment, and
// nothing of the attention; without sequence parallelism nothing. The
// memory: each gathered copy less its split input, as selective saves for
// them; the time: the gathers again, in the estimate as in the simulator,
// and on one device (no gather) none's.
TEST(Recompute, GathersRecomputesTheSequenceParallelGathersAlone) {
  const Graph g = build_model("gpt-tiny", {{"batch", 4}});
  const Graph sp = *expert(g, toy_machine().with_devices(2), 2, 2, true);
  const SourceLayouts layouts = source_layouts(sp);
  const RecomputePlan gathers = plan_recompute(sp, layouts, Recompute::kGathers);
  const RecomputePlan selective = plan_recompute(sp, layouts, Recompute::kSelective);
  int pairs = 0;
  for (const Node& n : sp.nodes()) {
    const bool parallel = n.op->op_class == OpClass::kParallel;
    EXPECT_EQ(gathers.recomputed[static_cast<size_t>(n.id)] != 0, parallel && selective.recomputed[static_cast<size_t>(n.id)]) << describe(n);
    pairs += gathers.recomputed[static_cast<size_t>(n.id)] && n.op->name == "Combine";
  }
  EXPECT_EQ(pairs, 2 * 2 + 1);
  EXPECT_EQ(gathers.segments, pairs);
  EXPECT_EQ(plan_recompute(g, source_layouts(g), Recompute::kGathers).segments, 0);

  const CostModel none_cm(toy_machine().with_devices(2), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kNone});
  const CostModel cm(toy_machine().with_devices(2), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kGathers});
  const Strategy s = MachineMapper(none_cm).map(sp);
  ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
  const Placement place(s.graph, s.views, 2);
  const DeviceMemory with = memory_breakdown(place, {Precision::kFp32, Recompute::kGathers})[0];
  const DeviceMemory without = memory_breakdown(place, {Precision::kFp32, Recompute::kNone})[0];
  const double gathered = 4 * 16 * 32 * 4.0, split = gathered / 2;
  EXPECT_DOUBLE_EQ(without.activations - with.activations, pairs * (gathered - split));
  // The gathers again cost the estimate what they cost the simulator (on
  // this tiny plan the two part by 0.25 us, 0.4%, without them too).
  const Strategy again = MachineMapper(cm).map(sp);
  ASSERT_TRUE(again.estimate.feasible) << again.estimate.infeasible;
  ASSERT_EQ(again.views, s.views);
  const double sim_kept = Simulator(s.graph, s.views, none_cm).time(), sim_again = Simulator(again.graph, again.views, cm).time();
  EXPECT_GT(sim_again, sim_kept);
  EXPECT_NEAR(again.estimate.time - s.estimate.time, sim_again - sim_kept, 1e-9 * again.estimate.time);
  auto on_one = [&](Recompute r) {
    return MachineMapper(CostModel(toy_machine().with_devices(1), toy_efficiency(), {}, {}, {Precision::kFp32, r})).map(g).estimate.time;
  };
  EXPECT_EQ(on_one(Recompute::kGathers), on_one(Recompute::kNone));
}

// Full keeps each layer's input, as Megatron-LM does: of the tensors at
// single-tensor cuts (the token embedding, the residual stream, the
// logits), those where the repeating unit starts, so not the residual
// between a layer's attention and its feed-forward; and what follows the
// last cut (the loss). Everything else re-runs from the cut before it.
TEST(Recompute, FullKeepsEachLayersInput) {
  const Graph g = tiny_gpt();
  const auto r = recomputed_by_name(g, Recompute::kFull);
  for (const char* kept : {"wte", "emb_add", "emb_dropout", "block0.mlp_residual", "block1.mlp_residual", "lm_logits"})
    EXPECT_FALSE(r.at(kept)) << kept;
  for (const char* again : {"wpe", "block0.ln1", "block0.attn.query", "block0.attn.softmax", "block0.attn.output", "block0.attn_dropout",
                            "block0.attn_residual", "block0.ln2", "block0.mlp.intermediate", "block1.attn_residual",
                            "block1.mlp.ffn_output", "block1.mlp_dropout"})
    EXPECT_TRUE(r.at(again)) << again;
  int loss = 0;
  for (const Node& n : g.nodes()) loss += n.op->loss != LossKind::kNone && !r.at(n.name);
  EXPECT_EQ(loss, 1);
  const RecomputePlan plan = plan_recompute(g, source_layouts(g), Recompute::kFull);
  // The position embedding after the token embedding, then each layer.
  EXPECT_EQ(plan.segments, 3);
}

// A pipeline stage's graph ends in the activation it sends on, not in a
// loss: that output is kept, and the last layer before it re-runs like the
// others (before, its second half was kept for every micro-batch in flight).
TEST(Recompute, FullRecomputesAStagesLastLayer) {
  GraphBuilder b("stage");
  TensorRef x = b.input("x", {2, 8, 16});
  for (int layer = 0; layer < 3; ++layer) x = b.encoder_block(x, 4, 32, "block" + std::to_string(layer) + ".");
  b.graph().add_output(x);
  const Graph g = b.finish();
  const RecomputePlan plan = plan_recompute(g, source_layouts(g), Recompute::kFull);
  const auto r = recomputed_by_name(g, Recompute::kFull);
  EXPECT_FALSE(r.at(g.node(g.outputs()[0].node).name));
  int last_layer = 0, recomputed = 0;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class == OpClass::kSource) continue;
    last_layer += n.name.starts_with("block2.");
    recomputed += n.name.starts_with("block2.") && r.at(n.name);
  }
  // Post-LN blocks on a model input: the repeating unit found starts at
  // the residual sum before the attention's LayerNorm, and one tensor a
  // layer is kept there. So block 2 keeps that sum and the stage's output,
  // and re-runs the rest.
  EXPECT_FALSE(r.at("block2.attn_residual"));
  EXPECT_FALSE(r.at("block2.ffn_ln"));
  EXPECT_EQ(recomputed, last_layer - 2);
  // Block 0's attention (from its first cut), then from each residual sum
  // to the next, and from the last to the output.
  EXPECT_EQ(plan.segments, 4);
}

// Block recomputation (Megatron-LM's --recompute-num-layers): N of full's
// segments re-run, the others keep their outputs. The layers come first,
// in forward order; the position embedding's segment, whose re-run frees
// nothing (no backward reads its output), comes last.
TEST(Recompute, FullOfTheFirstLayersOnly) {
  const Graph g = build_model("gpt-tiny", {{"layers", 4}});
  const SourceLayouts layouts = source_layouts(g);
  const RecomputePlan all = plan_recompute(g, layouts, Recompute::kFull);
  ASSERT_EQ(all.segments, 5);  // the position embedding, then four layers
  const auto wpe = std::find_if(g.nodes().begin(), g.nodes().end(), [](const Node& n) { return n.name == "wpe"; });
  ASSERT_NE(wpe, g.nodes().end());
  ASSERT_EQ(all.segment[static_cast<size_t>(wpe->id)], 0);
  for (int32_t k = 0; k <= all.segments + 1; ++k) {
    SCOPED_TRACE(k);
    const RecomputePlan some = plan_recompute(g, layouts, Recompute::kFull, k);
    EXPECT_EQ(some.segments, std::min(k, all.segments));
    for (const Node& n : g.nodes()) {
      const auto i = static_cast<size_t>(n.id);
      const int32_t s = all.segment[i];
      // Layer j (segment j + 1) is among the first k layers; the embedding
      // only once all four are.
      const bool chosen = s > 0 ? s <= k : s == 0 && k >= 5;
      EXPECT_EQ(some.recomputed[i] != 0, chosen) << n.name;
      if (chosen) EXPECT_EQ(some.segment[i], k >= 5 ? s : s - 1) << n.name;
      else EXPECT_EQ(some.segment[i], -1) << n.name;
    }
  }
  EXPECT_EQ(plan_recompute(g, layouts, Recompute::kFull, kAllLayers).recomputed, all.recomputed);
  // The count applies to full only.
  EXPECT_EQ(plan_recompute(g, layouts, Recompute::kSelective, 1).recomputed, plan_recompute(g, layouts, Recompute::kSelective).recomputed);
}

// Under a pipeline the count is per chunk (Megatron-LM counts
// --recompute-num-layers per stage's model chunk): the first N layers of
// each, each chunk's layers found repeating within it.
TEST(Recompute, ACountPerChunk) {
  const Graph g = build_model("gpt-tiny", {{"layers", 4}});
  const SourceLayouts layouts = source_layouts(g);
  std::vector<int64_t> chunk(g.size(), 0);  // blocks 2 and 3 and the head in the second chunk
  bool second = false;
  for (const Node& n : g.nodes()) {
    second = second || n.name.starts_with("block2.");
    chunk[static_cast<size_t>(n.id)] = second ? 1 : 0;
  }
  const RecomputePlan all = plan_recompute(g, layouts, Recompute::kFull, kAllLayers, chunk);
  EXPECT_EQ(all.recomputed, plan_recompute(g, layouts, Recompute::kFull).recomputed);
  for (int32_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE(k);
    const RecomputePlan some = plan_recompute(g, layouts, Recompute::kFull, k, chunk);
    // Chunk 0: min(k, 2) layers, then the position embedding; chunk 1: min(k, 2) layers.
    EXPECT_EQ(some.segments, std::min(k, 3) + std::min(k, 2));
    for (const Node& n : g.nodes()) {
      const auto i = static_cast<size_t>(n.id);
      if (!all.recomputed[i]) {
        EXPECT_FALSE(some.recomputed[i]) << n.name;
        continue;
      }
      const int layer = n.name.starts_with("block") ? n.name[5] - '0' : -1;
      const bool chosen = layer < 0 ? k >= 3 : (layer % 2) < k;
      EXPECT_EQ(some.recomputed[i] != 0, chosen) << n.name;
    }
  }
  EXPECT_THROW(plan_recompute(g, layouts, Recompute::kFull, 1, std::vector<int64_t>(3, 0)), Error);
}

// A pipelined plan recomputing one layer of each chunk: the search (each
// stage planned alone) and the simulator (the joined plan, its chunks
// found from the views) count the same layers, so they agree as with
// none, and each layer adds time.
TEST(Recompute, APipelinesCountIsPricedAlikeByTheSearchAndTheSimulator) {
  const Graph g = build_model("gpt-tiny", {{"layers", 4}, {"batch", 8}});
  SearchOptions o;  // unity: the two stages run their layers differently
  o.budget = 4;
  std::map<int32_t, double> time, simulated;
  std::map<int32_t, std::vector<double>> held, counted;  // memory per device: the simulator's, the search's
  for (const int32_t k : {0, 1, 2}) {
    SCOPED_TRACE(k);
    const TrainingRecipe recipe{Precision::kFp32, k == 0 ? Recompute::kNone : Recompute::kFull, ZeroStage::k0, k == 0 ? kAllLayers : k};
    const CostModel cm(find_machine("dgx-a100").with_devices(4), default_efficiency(), {}, {}, recipe);
    const PipelineResult r = optimize_pipeline(g, shipped_library(), cm, o, PipelineOptions{2, 4});
    const Strategy& s = r.search.strategy;
    ASSERT_TRUE(s.estimate.feasible);
    const PipelineShape shape{r.stages, r.micro_batches, r.virtual_stages, PipelineSchedule::k1F1B};
    time[k] = s.estimate.time;
    const Simulator sim(s.graph, s.views, cm, shape);
    simulated[k] = sim.time();
    EXPECT_NEAR(simulated[k] / time[k], 1.0, 0.02);
    held[k] = sim.memory(), counted[k] = s.estimate.memory;
    ASSERT_EQ(held[k].size(), counted[k].size());
  }
  EXPECT_LT(time[0], time[1]);
  EXPECT_LT(time[1], time[2]);
  // What one layer per chunk adds: the same in both (with the layers found
  // on the joined graph, where the stages' layers differ, the simulator
  // re-ran half layers and was 6% below the search at two layers).
  EXPECT_NEAR((simulated[1] - simulated[0]) / (time[1] - time[0]), 1.0, 0.1);
  // What each count takes off every device's memory, the same in both (the
  // simulator's on the joined plan's chunks; both count a stage's
  // boundary differently by a constant, which cancels).
  for (const int32_t k : {1, 2})
    for (size_t d = 0; d < held[0].size(); ++d) {
      EXPECT_LT(counted[k][d], counted[0][d]) << k << ", device " << d;
      EXPECT_NEAR(held[0][d] - held[k][d], counted[0][d] - counted[k][d], 1.0) << k << ", device " << d;
    }
}

Strategy one_device(const Graph& g, Recompute r, Precision p = Precision::kFp32) {
  const CostModel cm(toy_machine().with_devices(1), toy_efficiency(), {}, {}, {p, r});
  return MachineMapper(cm).map(g);
}

// A layer's attention chain is four [2, 4, 16, 16] tensors (scores, their
// scaled copy, softmax, dropout), t bytes each. Without recomputation the
// step keeps the softmax's and the dropout's outputs (the softmax's reverse
// rule reads its output, the context product its input) and frees the
// scores and the scaled copy once read: both alive at once, at the scaling,
// are the most the forward pass holds of what it frees. Selective keeps
// none of the four. The scores and the scaled copy still go once read, in
// forward and in the re-run; the softmax's and the dropout's outputs live
// until the context product has run, whose [2, 4, 16, 8] output (t / 2,
// freed after the transpose reading it) is allocated beside them in
// forward, and through the chain's backward after its re-run.
TEST(Recompute, SelectiveMemoryWorkedByHand) {
  const Graph g = tiny_gpt();
  const Strategy s = one_device(g, Recompute::kNone);
  const Placement p(s.graph, s.views, 1);
  for (const Precision prec : {Precision::kFp32, Precision::kBf16}) {
    const double bytes = static_cast<double>(activation_bytes(prec));
    const DeviceMemory none = memory_breakdown(p, {prec, Recompute::kNone})[0];
    const DeviceMemory sel = memory_breakdown(p, {prec, Recompute::kSelective})[0];
    const double t = 2.0 * 4 * 16 * 16 * bytes;
    EXPECT_DOUBLE_EQ(none.activations - sel.activations, 2 * 2 * t);
    EXPECT_DOUBLE_EQ(sel.transient, 2 * t + t / 2);
    EXPECT_DOUBLE_EQ(none.transient, 2 * t);
    EXPECT_DOUBLE_EQ(sel.weights, none.weights);
    EXPECT_DOUBLE_EQ(sel.optimizer, none.optimizer);
  }
}

// Full keeps less than selective, and what it keeps plus the one segment
// it re-creates is less than every output of the model; it no longer
// keeps what its segments re-create (of that, what the step would keep
// without recomputation: pcg/saved_tensors.h).
TEST(Recompute, FullKeepsLeastAndHoldsOneSegment) {
  const Graph g = tiny_gpt();
  const Strategy s = one_device(g, Recompute::kNone);
  const Placement p(s.graph, s.views, 1);
  const DeviceMemory none = memory_breakdown(p, {Precision::kFp32, Recompute::kNone})[0];
  const DeviceMemory sel = memory_breakdown(p, {Precision::kFp32, Recompute::kSelective})[0];
  const DeviceMemory full = memory_breakdown(p, {Precision::kFp32, Recompute::kFull})[0];
  EXPECT_LT(full.activations, sel.activations);
  EXPECT_GT(full.transient, 0);
  double everything = 0;
  for (const Node& n : g.nodes())
    if (n.op->op_class != OpClass::kSource)
      for (const auto& o : n.outputs) everything += activation_shard_bytes(o, Precision::kFp32);
  EXPECT_LT(full.activations + full.transient, everything);
  // The segments re-run one at a time, each holding through its backward
  // what the reverse rules read of it (and the rest only until read): at
  // least the largest segment's held outputs, at most the largest
  // segment's outputs all together, never the sum of the three.
  const SourceLayouts layouts = source_layouts(g);
  const RecomputePlan plan = plan_recompute(g, layouts, Recompute::kFull);
  const OutputLives kept_without = output_lives(g, layouts, plan_recompute(g, layouts, Recompute::kNone));
  const OutputLives lives = output_lives(g, layouts, plan);
  std::vector<double> seg(static_cast<size_t>(plan.segments), 0.0), held(seg);
  double no_longer_kept = 0;
  for (const Node& n : g.nodes())
    if (plan.recomputed[static_cast<size_t>(n.id)])
      for (size_t o = 0; o < n.outputs.size(); ++o) {
        const double b = activation_shard_bytes(n.outputs[o], Precision::kFp32);
        const auto k = static_cast<size_t>(plan.segment[static_cast<size_t>(n.id)]);
        seg[k] += b;
        if (lives.at({n.id, static_cast<int32_t>(o)}) == OutputLife::kRecomputed) held[k] += b;
        if (kept_without.at({n.id, static_cast<int32_t>(o)}) == OutputLife::kKept) no_longer_kept += b;
      }
  EXPECT_GE(full.transient, *std::max_element(held.begin(), held.end()));
  EXPECT_LT(full.transient, *std::max_element(seg.begin(), seg.end()));
  EXPECT_DOUBLE_EQ(none.activations - full.activations, no_longer_kept);
}

// A pipeline stage keeps its kept tensors for every micro-batch in
// flight, but re-creates one micro-batch's segment at a time: the
// transient memory is one micro-batch's, however many are in flight.
TEST(Recompute, InFlightMicroBatchesShareOneTransientSegment) {
  const Strategy s = one_device(pipelined(tiny_gpt(), 2, true), Recompute::kNone);
  const Placement p(s.graph, s.views, 1);
  const TrainingRecipe full{Precision::kFp32, Recompute::kFull};
  const DeviceMemory one = memory_breakdown(p, full, 1)[0], two = memory_breakdown(p, full, 2)[0];
  EXPECT_GT(one.transient, 0);
  EXPECT_DOUBLE_EQ(two.transient, one.transient);
  EXPECT_GT(two.activations, one.activations);
}

// On one device the DP's step grows by exactly the recomputed operators'
// forward times, and the simulator agrees with it under every policy.
TEST(Recompute, OneDeviceCostsTheRecomputedForwardAndTheSimulatorAgrees) {
  const Graph g = tiny_gpt();
  const Strategy none = one_device(g, Recompute::kNone);
  ASSERT_TRUE(none.estimate.feasible);
  for (const Recompute r : {Recompute::kSelective, Recompute::kFull}) {
    SCOPED_TRACE(name(r));
    const CostModel cm(toy_machine().with_devices(1), toy_efficiency(), {}, {}, {Precision::kFp32, r});
    const Strategy s = MachineMapper(cm).map(g);
    ASSERT_TRUE(s.estimate.feasible);
    const RecomputePlan plan = plan_recompute(g, source_layouts(g), r);
    double again = 0;
    for (const Node& n : g.nodes())
      if (plan.recomputed[static_cast<size_t>(n.id)] && n.op->op_class == OpClass::kCompute) again += cm.task_time(g, n).forward;
    EXPECT_GT(again, 0);
    EXPECT_NEAR(s.estimate.time - none.estimate.time, again, 1e-9 * s.estimate.time);
    EXPECT_NEAR(Simulator(g, s.views, cm).time(), s.estimate.time, 1e-9 * s.estimate.time);
  }
}

// Data parallel on eight devices: the simulator counts the same memory as
// the DP under every policy, and full recomputation (collectives re-run
// included) is the slowest.
TEST(Recompute, EightDevicesSimulatorCountsTheSameMemory) {
  const Graph g = build_model("gpt-tiny", {{"batch", 16}});
  double previous = 0;
  for (const Recompute r : kRecomputes) {
    SCOPED_TRACE(name(r));
    const CostModel cm(toy_machine(), toy_efficiency(), {}, {}, {Precision::kFp32, r});
    const MachineMapper mapper(cm);
    const Strategy dp = mapper.map(data_parallel(g, 8));
    ASSERT_TRUE(dp.estimate.feasible);
    const Simulator sim(dp.graph, dp.views, cm);
    const Estimate e = simulated_estimate(sim);
    ASSERT_EQ(e.memory.size(), dp.estimate.memory.size());
    for (size_t d = 0; d < e.memory.size(); ++d) EXPECT_NEAR(e.memory[d], dp.estimate.memory[d], 1e-6);
    EXPECT_GT(e.time, previous);
    EXPECT_NEAR(e.time / dp.estimate.time, 1.0, 0.25);
    previous = e.time;
  }
}

// Recomputing more layers keeps less and costs more, one layer's forward at
// a time, and the simulator agrees with the DP at every count.
TEST(Recompute, EachLayerRecomputedTradesItsMemoryForItsForward) {
  const Graph g = build_model("gpt-tiny", {{"layers", 4}});
  const SourceLayouts layouts = source_layouts(g);
  double time = 0, memory = 0;
  for (int32_t k = 0; k <= 5; ++k) {
    SCOPED_TRACE(k);
    const TrainingRecipe recipe{Precision::kFp32, k == 0 ? Recompute::kNone : Recompute::kFull, ZeroStage::k0, k == 0 ? kAllLayers : k};
    const CostModel cm(toy_machine().with_devices(1), toy_efficiency(), {}, {}, recipe);
    const Strategy s = MachineMapper(cm).map(g);
    ASSERT_TRUE(s.estimate.feasible);
    if (k > 0) {
      EXPECT_GT(s.estimate.time, time);
      // Each layer frees memory; the embedding's segment, counted last, frees none.
      if (k < 5) EXPECT_LT(s.estimate.max_memory(), memory);
      else EXPECT_DOUBLE_EQ(s.estimate.max_memory(), memory);
      // Exactly the forward of the segment this count adds.
      const RecomputePlan plan = plan_recompute(g, layouts, Recompute::kFull, k);
      const RecomputePlan fewer = plan_recompute(g, layouts, Recompute::kFull, k - 1);
      double again = 0;
      for (const Node& n : g.nodes())
        if (plan.recomputed[static_cast<size_t>(n.id)] && !fewer.recomputed[static_cast<size_t>(n.id)] && n.op->op_class == OpClass::kCompute)
          again += cm.task_time(g, n).forward;
      EXPECT_GT(again, 0);
      EXPECT_NEAR(s.estimate.time - time, again, 1e-9 * s.estimate.time);
    }
    EXPECT_NEAR(Simulator(g, s.views, cm).time(), s.estimate.time, 1e-9 * s.estimate.time);
    const Placement p(s.graph, s.views, 1);
    EXPECT_DOUBLE_EQ(memory_breakdown(p, recipe)[0].total(), s.estimate.max_memory());
    time = s.estimate.time, memory = s.estimate.max_memory();
  }
}

// A plan over capacity without recomputation fits with it, and the mapper
// counts what it refused and the closest miss.
TEST(Recompute, MemoryRefusalsAreCounted) {
  const Graph g = tiny_gpt();
  const double none = one_device(g, Recompute::kNone).estimate.max_memory();
  const double full = one_device(g, Recompute::kFull).estimate.max_memory();
  ASSERT_LT(full, none);
  Machine m = toy_machine().with_devices(1);
  m.device.memory_capacity = (none + full) / 2;
  const CostModel over(m, toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kNone});
  const MachineMapper tight(over);
  EXPECT_FALSE(tight.map(g).estimate.feasible);
  EXPECT_EQ(tight.memory_refusals().count, 1);
  EXPECT_DOUBLE_EQ(tight.memory_refusals().smallest_need, none);
  const CostModel fits(m, toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kFull});
  const MachineMapper roomy(fits);
  EXPECT_TRUE(roomy.map(g).estimate.feasible);
  EXPECT_EQ(roomy.memory_refusals().count, 0);
}

// The strategy file records the policy; a file without one keeps every
// activation; a wrong one is an error naming the field.
TEST(Recompute, TheStrategyFileRecordsIt) {
  const CostModel cm(toy_machine(), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kSelective});
  const Graph g = linear_graph(64, 32, 16);
  StrategyFile f{g.name(), cm.machine(), 8, "data-parallel", {}, MachineMapper(cm).map(data_parallel(g, 8))};
  f.recipe = cm.recipe();
  const std::string text = strategy_to_json(f);
  EXPECT_EQ(strategy_from_json(text, "s.json").recipe, cm.recipe());
  EXPECT_EQ(strategy_from_json(without_field(text, "recompute", "\"selective\""), "s.json").recipe.recompute, Recompute::kNone);
  // Full of the first layers only: the count is recorded; a count that is
  // no positive integer, or beside another policy, names the field.
  const CostModel block(toy_machine(), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kFull, ZeroStage::k0, 2});
  f.recipe = block.recipe();
  const std::string counted = strategy_to_json(f);
  EXPECT_EQ(strategy_from_json(counted, "s.json").recipe, block.recipe());
  for (const auto& [from, to, why] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"\"recompute_layers\": 2", "\"recompute_layers\": 0", "expected a positive integer, got 0"},
           {"\"recompute_layers\": 2", "\"recompute_layers\": \"2\"", "expected a positive integer, got \"2\""},
           {"\"recompute\": \"full\"", "\"recompute\": \"selective\"", "applies to full recomputation, not selective"}}) {
    std::string wrong = counted;
    ASSERT_NE(wrong.find(from), std::string::npos) << from;
    wrong.replace(wrong.find(from), from.size(), to);
    try {
      strategy_from_json(wrong, "s.json");
      ADD_FAILURE() << to << " was accepted";
    } catch (const FileError& e) {
      EXPECT_EQ(std::string(e.what()), "s.json: recompute_layers: " + why);
    }
  }
  EXPECT_EQ(strategy_error(with_field(text, "recompute", "\"selective\"", "\"some\"")),
            "s.json: recompute: expected one of none, gathers, selective, full, full+selective, full+gathers, operators, got \"some\"");
  // full+selective with its count, recorded and read back.
  const CostModel mixed(toy_machine(), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kFullSelective, ZeroStage::k0, 1});
  f.recipe = mixed.recipe();
  const std::string mixed_text = strategy_to_json(f);
  EXPECT_EQ(strategy_from_json(mixed_text, "s.json").recipe, mixed.recipe());
  // Without its count it is refused: with every layer whole it is full.
  std::string uncounted = mixed_text;
  const std::string count = "\"recompute_layers\": 1";
  ASSERT_NE(uncounted.find(count), std::string::npos);
  uncounted.replace(uncounted.find(count), count.size(), "\"recompute_layers_unused\": 1");
  try {
    strategy_from_json(uncounted, "s.json");
    ADD_FAILURE() << "full+selective without a count was accepted";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("s.json: recompute_layers: required with full+selective"), std::string::npos) << e.what();
  }
}

// full+selective: the first layers re-run whole, as full's count says, and
// in every other layer what selective re-runs, each node in one segment;
// the DP and the simulator price it alike, between full's count and full
// of every layer in memory, above full's count in time by the selective
// re-runs' forward.
TEST(Recompute, FullOfSomeLayersSelectiveInTheOthers) {
  const Graph g = build_model("gpt-tiny", {{"layers", 4}});
  const SourceLayouts layouts = source_layouts(g);
  const RecomputePlan sel = plan_recompute(g, layouts, Recompute::kSelective);
  for (int32_t k = 1; k <= 4; ++k) {
    SCOPED_TRACE(k);
    const RecomputePlan full = plan_recompute(g, layouts, Recompute::kFull, k);
    const RecomputePlan mixed = plan_recompute(g, layouts, Recompute::kFullSelective, k);
    size_t selective_only = 0;
    for (const Node& n : g.nodes()) {
      const auto i = static_cast<size_t>(n.id);
      if (full.recomputed[i]) {
        // A node of the full layers: in its segment, numbered as full numbers it.
        EXPECT_TRUE(mixed.recomputed[i]) << n.name;
        EXPECT_EQ(mixed.segment[i], full.segment[i]) << n.name;
      } else {
        // Elsewhere: exactly what selective re-runs there, in segments after full's.
        EXPECT_EQ(mixed.recomputed[i] != 0, sel.recomputed[i] != 0) << n.name;
        if (mixed.recomputed[i]) {
          EXPECT_GE(mixed.segment[i], full.segments) << n.name;
        }
        selective_only += mixed.recomputed[i] != 0;
      }
    }
    if (k < 4) {
      EXPECT_GT(selective_only, 0u);
    } else {
      EXPECT_EQ(selective_only, 0u);  // every layer whole: selective has nothing left
    }
    const TrainingRecipe recipe{Precision::kFp32, Recompute::kFullSelective, ZeroStage::k0, k};
    const CostModel cm(toy_machine().with_devices(1), toy_efficiency(), {}, {}, recipe);
    const Strategy s = MachineMapper(cm).map(g);
    ASSERT_TRUE(s.estimate.feasible);
    EXPECT_NEAR(Simulator(g, s.views, cm).time(), s.estimate.time, 1e-9 * s.estimate.time);
    const Placement p(s.graph, s.views, 1);
    EXPECT_DOUBLE_EQ(memory_breakdown(p, recipe)[0].total(), s.estimate.max_memory());
    const CostModel full_cm(toy_machine().with_devices(1), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kFull, ZeroStage::k0, k});
    const Strategy f = MachineMapper(full_cm).map(g);
    double again = 0;
    for (const Node& n : g.nodes())
      if (mixed.recomputed[static_cast<size_t>(n.id)] && !full.recomputed[static_cast<size_t>(n.id)] && n.op->op_class == OpClass::kCompute)
        again += cm.task_time(g, n).forward;
    EXPECT_NEAR(s.estimate.time - f.estimate.time, again, 1e-9 * s.estimate.time);
    if (k < 4) {
      EXPECT_LT(s.estimate.max_memory(), f.estimate.max_memory());
    }
  }
}

// full+gathers (Megatron-LM's sequence parallelism with
// --recompute-num-layers N): the first layers re-run whole, numbered as
// full's count numbers them, and outside them exactly the gathers that
// gathers re-runs, each its own segment after full's. Priced alike by the
// DP and the simulator, it keeps less than full of the same count by the
// gathered copies it drops: those of the layers left whole, and the head's
// gathered input, outside every layer. Full's count recorded and read
// back.
TEST(Recompute, FullOfSomeLayersGathersAgainInTheOthers) {
  const Graph g = build_model("gpt-tiny", {{"batch", 4}, {"layers", 3}});
  const Graph sp = *expert(g, toy_machine().with_devices(2), 2, 2, true);
  const SourceLayouts layouts = source_layouts(sp);
  const RecomputePlan gathers = plan_recompute(sp, layouts, Recompute::kGathers);
  for (int32_t k = 1; k <= 3; ++k) {
    SCOPED_TRACE(k);
    const RecomputePlan full = plan_recompute(sp, layouts, Recompute::kFull, k);
    const RecomputePlan mixed = plan_recompute(sp, layouts, Recompute::kFullGathers, k);
    int again = 0;
    for (const Node& n : sp.nodes()) {
      const auto i = static_cast<size_t>(n.id);
      if (full.recomputed[i]) {
        EXPECT_TRUE(mixed.recomputed[i]) << describe(n);
        EXPECT_EQ(mixed.segment[i], full.segment[i]) << describe(n);
      } else {
        EXPECT_EQ(mixed.recomputed[i] != 0, gathers.recomputed[i] != 0) << describe(n);
        if (mixed.recomputed[i]) {
          EXPECT_GE(mixed.segment[i], full.segments) << describe(n);
          EXPECT_EQ(n.op->op_class, OpClass::kParallel) << describe(n);
        }
        again += mixed.recomputed[i] && n.op->name == "Combine";
      }
    }
    // Two gathers in each layer left whole, and the head's.
    EXPECT_EQ(again, 2 * (3 - k) + 1);
    EXPECT_EQ(mixed.segments, full.segments + again);

    const TrainingRecipe recipe{Precision::kFp32, Recompute::kFullGathers, ZeroStage::k0, k};
    const CostModel cm(toy_machine().with_devices(2), toy_efficiency(), {}, {}, recipe);
    const Strategy s = MachineMapper(cm).map(sp);
    ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
    // The gathers again cost the estimate what they cost the simulator (the
    // two part by 0.25 us on this tiny plan under full alone too).
    const CostModel full_cm(toy_machine().with_devices(2), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kFull, ZeroStage::k0, k});
    const Strategy f = MachineMapper(full_cm).map(sp);
    ASSERT_EQ(f.views, s.views);
    const double sim_again = Simulator(s.graph, s.views, cm).time(), sim_full = Simulator(f.graph, f.views, full_cm).time();
    EXPECT_GT(sim_again, sim_full);
    EXPECT_NEAR(s.estimate.time - f.estimate.time, sim_again - sim_full, 1e-9 * s.estimate.time);
    const Placement place(s.graph, s.views, 2);
    EXPECT_DOUBLE_EQ(memory_breakdown(place, recipe)[0].total(), s.estimate.max_memory());
    const double kept = memory_breakdown(place, {Precision::kFp32, Recompute::kFull, ZeroStage::k0, k})[0].activations;
    const double gathered = 4 * 16 * 32 * 4.0, split = gathered / 2;
    EXPECT_DOUBLE_EQ(kept - memory_breakdown(place, recipe)[0].activations, again * (gathered - split));
  }
  // Recorded with its count, and read back; without a count, every layer.
  for (const int32_t layers : {2, kAllLayers}) {
    const CostModel cm(toy_machine().with_devices(2), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kFullGathers, ZeroStage::k0, layers});
    StrategyFile f{sp.name(), cm.machine(), 2, "expert", {}, MachineMapper(cm).map(sp)};
    f.recipe = cm.recipe();
    EXPECT_EQ(strategy_from_json(strategy_to_json(f), "s.json").recipe, cm.recipe());
  }
  EXPECT_EQ(recompute_named("full+gathers"), Recompute::kFullGathers);
  EXPECT_EQ(describe_recompute(Recompute::kFullGathers, 2), "full, first 2 layers, gathers again in the others");
}

}  // namespace
}  // namespace pcgx::search
