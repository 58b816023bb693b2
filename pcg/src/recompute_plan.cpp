// Recomputation plans (see recompute_plan.h and training_recipe.h).
#include "pcgx/pcg/recompute_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "pcgx/pcg/attention_kernels.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_cuts.h"
#include "pcgx/pcg/relayout.h"
#include "pcgx/pcg/saved_tensors.h"

namespace pcgx {
namespace {

bool active(const Graph& g, const SourceLayouts& layouts, NodeId n) {
  return g.node(n).op->op_class != OpClass::kSource && !layouts.is_layout(g, n);
}

// Which of the cuts a layer starts at: within the gaps' repeating stretch
// (a transformer's layers) every period-th cut; elsewhere (embeddings, the
// head, a chain of one-gap layers) every cut.
std::vector<char> layer_boundaries(const std::vector<uint64_t>& gaps) {
  std::vector<char> boundary(gaps.size() + 1, 1);  // boundary[j]: the cut before gap j (j = k: the last)
  const RepeatingGaps r = repeating_gaps(gaps);
  if (r.period < 2) return boundary;
  for (size_t j = r.start + 1; j < r.start + r.length; ++j) boundary[j] = (j - r.start) % r.period == 0;
  return boundary;
}

// Full: Megatron-LM's, each layer's input kept and the layer re-run in
// backward. The cuts are graph_cuts.h's over the nodes that compute
// (sources and layouts left out, since a weight laid out once and read by
// the first and the last layer, a tied embedding, would otherwise leave no
// cut at all), and an activation the graph outputs (a pipeline stage's
// boundary) ends the last gap; a layer is the repeating unit of the gaps
// between cuts (layer_boundaries). Every node after the first cut and up
// to the last, less those producing a kept boundary tensor, is recomputed,
// a segment per layer.
void plan_full(const Graph& g, const SourceLayouts& layouts, std::span<const int64_t> chunk, RecomputePlan& plan) {
  std::vector<NodeId> order;
  for (const Node& n : g.nodes())
    if (active(g, layouts, n.id)) order.push_back(n.id);
  if (order.size() < 3) return;
  std::vector<std::pair<size_t, TensorRef>> cuts = valid_cuts(g, order);
  // A stage's output: the tensors that end the graph and are not a loss
  // (a scalar) are kept like a cut's, and what leads to them recomputed.
  const Node& last = g.node(order.back());
  for (const TensorRef& out : g.outputs())
    if (out.node == last.id && g.shape(out).rank() > 0 && (cuts.empty() || cuts.back().first + 1 < order.size()))
      cuts.push_back({order.size() - 1, out});
  if (cuts.size() < 2) return;
  std::vector<uint64_t> gaps;
  for (size_t c = 0; c + 1 < cuts.size(); ++c)
    gaps.push_back(gap_signature(g, std::span(order).subspan(cuts[c].first + 1, cuts[c + 1].first - cuts[c].first)));
  // A joined pipeline's chunks may run their layers differently (each
  // stage searched alone): each chunk's layers repeat within it, as its own
  // plan finds them, and a chunk starts a layer.
  std::vector<char> boundary;
  if (chunk.empty()) {
    boundary = layer_boundaries(gaps);
  } else {
    boundary.assign(gaps.size() + 1, 1);
    auto chunk_of_gap = [&](size_t c) { return chunk[static_cast<size_t>(order[cuts[c].first + 1])]; };
    for (size_t a = 0, b = 0; a < gaps.size(); a = b) {
      while (b < gaps.size() && chunk_of_gap(b) == chunk_of_gap(a)) ++b;
      const std::vector<char> own = layer_boundaries(std::vector<uint64_t>(gaps.begin() + static_cast<std::ptrdiff_t>(a),
                                                                           gaps.begin() + static_cast<std::ptrdiff_t>(b)));
      for (size_t j = 1; j + 1 < own.size(); ++j) boundary[a + j] = own[j];
    }
  }
  std::set<TensorRef> checkpoints;
  for (size_t c = 0; c < cuts.size(); ++c)
    if (boundary[c]) checkpoints.insert(cuts[c].second);
  bool any = false;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    if (c > 0 && boundary[c]) plan.segments += any, any = false;
    for (size_t i = cuts[c].first + 1; i <= cuts[c + 1].first; ++i) {
      const Node& n = g.node(order[i]);
      bool kept = false;
      for (int32_t o = 0; o < static_cast<int32_t>(n.outputs.size()); ++o) kept |= checkpoints.count({n.id, o}) > 0;
      if (kept) continue;
      plan.recomputed[static_cast<size_t>(n.id)] = 1;
      plan.segment[static_cast<size_t>(n.id)] = plan.segments;
      any = true;
    }
  }
  plan.segments += any;
  // A parallel operator reading another chunk's tensor is kept (its re-run
  // would move data between the chunks' devices, which a chunk's own step
  // cannot: an interlaced chunk beside a staged one; a compute operator
  // re-runs on the inputs its tasks received). A layout change run in one step
  // (its operators, relayout.h: the first writes the partner's output)
  // is re-run whole or not at all: where a kept tensor falls between them,
  // all are kept.
  const auto consumers = g.consumers();
  bool dropped = false;
  auto keep = [&](size_t a) { plan.recomputed[a] = 0, plan.segment[a] = -1, dropped = true; };
  if (!chunk.empty())
    for (const NodeId n : order)
      if (plan.recomputed[static_cast<size_t>(n)] && g.node(n).op->op_class == OpClass::kParallel &&
          std::any_of(g.node(n).inputs.begin(), g.node(n).inputs.end(), [&](const TensorRef& t) { return chunk[static_cast<size_t>(t.node)] != chunk[static_cast<size_t>(n)]; }))
        keep(static_cast<size_t>(n));
  for (const NodeId n : order)
    if (const auto partner = layout_change_partner(g, n, consumers)) {
      std::vector<NodeId> members = layout_change_inside(g, n, *partner);
      members.push_back(n), members.push_back(*partner);
      const auto a = static_cast<size_t>(n);
      if (std::all_of(members.begin(), members.end(), [&](NodeId x) {
            return plan.recomputed[static_cast<size_t>(x)] == plan.recomputed[a] && plan.segment[static_cast<size_t>(x)] == plan.segment[a];
          }))
        continue;
      for (NodeId x : members) keep(static_cast<size_t>(x));
    }
  if (!dropped) return;
  std::map<int32_t, int32_t> renumbered;  // segments left, in order
  for (const NodeId n : order)
    if (int32_t& s = plan.segment[static_cast<size_t>(n)]; s >= 0) s = renumbered.try_emplace(s, static_cast<int32_t>(renumbered.size())).first->second;
  plan.segments = static_cast<int32_t>(renumbered.size());
}

int64_t elements(const ParallelTensorShape& s) { return s.shard_elements(); }

// An activation gathered for compute operators (a layout change whose
// output shard is larger than its input's: sequence parallelism's
// all-gather before a tensor-parallel Linear) is gathered again in
// backward rather than kept, as Megatron-LM does under sequence
// parallelism (Korthikanti et al. 2022, Section 4.2.2: the sequence-split
// input is stored and the all-gather repeated in the backward pass): its
// input is kept, 1/k of it. A layout change run as one step (relayout.h)
// is one segment. Not a gather for a loss (a vocabulary-split head's
// logits): the loss starts the backward pass right after its forward, so
// the gathered copy would be live at the peak either way. With `chunk`,
// not one that reads or feeds another chunk (its re-run would move data
// between the chunks' devices, as plan_full keeps such a layout change).
void plan_regathers(const Graph& g, const SourceLayouts& layouts, std::span<const int64_t> chunk, RecomputePlan& plan) {
  const auto consumers = g.consumers();
  std::vector<char> tail(g.size(), 0);
  std::vector<std::pair<NodeId, NodeId>> changes;  // (first, last)
  for (const Node& n : g.nodes()) {
    if (!active(g, layouts, n.id) || n.op->op_class != OpClass::kParallel) continue;
    const auto partner = layout_change_partner(g, n.id, consumers);
    changes.emplace_back(n.id, partner ? *partner : n.id);
    if (partner) {
      tail[static_cast<size_t>(*partner)] = 1;
      for (NodeId x : layout_change_inside(g, n.id, *partner)) tail[static_cast<size_t>(x)] = 1;
    }
  }
  for (const auto& [first, last] : changes) {
    if (tail[static_cast<size_t>(first)] || plan.recomputed[static_cast<size_t>(first)] || plan.recomputed[static_cast<size_t>(last)]) continue;
    const Node& head = g.node(first);
    const Node& end = g.node(last);
    if (head.inputs.size() != 1 || end.outputs.size() != 1 || layouts.weight(head.inputs[0])) continue;
    if (elements(end.outputs[0]) <= elements(g.shape(head.inputs[0]))) continue;  // not a gather
    const auto& readers = consumers[static_cast<size_t>(last)];
    auto other_chunk = [&](NodeId n) { return !chunk.empty() && chunk[static_cast<size_t>(n)] != chunk[static_cast<size_t>(first)]; };
    if (other_chunk(head.inputs[0].node) || other_chunk(last) ||
        std::any_of(readers.begin(), readers.end(), [&](const auto& r) { return other_chunk(r.first); }))
      continue;
    const bool compute = !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](const auto& r) {
      const Node& c = g.node(r.first);
      return c.op->op_class == OpClass::kCompute && !c.op->is_shard_level(c.attrs) && c.op->loss == LossKind::kNone &&
             !plan.recomputed[static_cast<size_t>(r.first)];  // a reader in a segment would read another segment's output
    });
    if (!compute || plan.recomputed[static_cast<size_t>(head.inputs[0].node)]) continue;
    const bool output = std::any_of(g.outputs().begin(), g.outputs().end(), [&](const TensorRef& t) { return t.node == last; });
    if (output) continue;
    for (const NodeId id : {first, last}) {
      plan.recomputed[static_cast<size_t>(id)] = 1;
      plan.segment[static_cast<size_t>(id)] = plan.segments;
    }
    ++plan.segments;
  }
}

// Selective: a compute operator reading two or more activations and no
// weight, with FLOPs, whose output is larger than each input (q k^T) starts
// a segment; an operator whose one activation input is recomputed and whose
// output is the same size (scale, softmax, dropout) joins it.
//
// After full recomputation of some layers (full+selective), in the layers
// left whole only: a node already re-run whole stays in its segment, and a
// segment starts or grows only from the selective ones numbered after the
// full ones.
void plan_selective(const Graph& g, const SourceLayouts& layouts, std::span<const int64_t> chunk, RecomputePlan& plan) {
  const int32_t first = plan.segments;  // the selective segments' first number
  for (const Node& n : g.nodes()) {
    if (!active(g, layouts, n.id) || n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs) || n.outputs.size() != 1 ||
        plan.recomputed[static_cast<size_t>(n.id)])
      continue;
    std::vector<TensorRef> acts;
    bool weights = false;
    for (const TensorRef& t : n.inputs) {
      if (layouts.weight(t)) weights = true;
      else acts.push_back(t);
    }
    if (weights) continue;
    // Under full+selective, a node reading what a full layer re-runs (at
    // most its kept boundary, which is not recomputed) starts nothing: a
    // segment must not read another's output.
    if (std::any_of(acts.begin(), acts.end(), [&](const TensorRef& t) {
          const int32_t s = plan.segment[static_cast<size_t>(t.node)];
          return plan.recomputed[static_cast<size_t>(t.node)] && s < first;
        }))
      continue;
    const int64_t out = elements(n.outputs[0]);
    int32_t seg = -1;
    if (acts.size() >= 2) {
      int64_t largest = 0;
      for (const TensorRef& t : acts) largest = std::max(largest, elements(g.shape(t)));
      std::vector<TensorType> in;
      for (const TensorRef& t : n.inputs) in.push_back({g.shape(t).logical_shape(), g.shape(t).dtype});
      const std::vector<TensorType> outs{{n.outputs[0].logical_shape(), n.outputs[0].dtype}};
      const double flops = n.op->flops ? n.op->flops(n.attrs, in, outs) : 0.0;
      if (flops > 0 && out > largest) seg = plan.segments++;
    } else if (acts.size() == 1) {
      const TensorRef t = acts[0];
      if (plan.recomputed[static_cast<size_t>(t.node)] && plan.segment[static_cast<size_t>(t.node)] >= first && elements(g.shape(t)) == out)
        seg = plan.segment[static_cast<size_t>(t.node)];
    }
    if (seg < 0) continue;
    plan.recomputed[static_cast<size_t>(n.id)] = 1;
    plan.segment[static_cast<size_t>(n.id)] = seg;
  }
  plan_regathers(g, layouts, chunk, plan);
}

// Block recomputation: `layers` segments stay recomputed, the others keep
// what they compute. Every segment's input is a checkpoint either way, so
// a kept segment reads a recomputed one's kept output. The segments whose
// re-run frees memory (one of their outputs would be kept without
// recomputation) go first, in forward order: a transformer's layers. A
// segment that frees nothing (GPT's position embedding before the first
// layer: nothing its backward reads) would only add compute, so it comes
// after them. The chosen keep their forward order, renumbered from 0.
void keep_only(const Graph& g, const SourceLayouts& layouts, int32_t layers, std::span<const int64_t> chunk, RecomputePlan& plan) {
  if (layers < 0 || (chunk.empty() && layers >= plan.segments)) return;
  RecomputePlan none;
  none.recomputed.assign(g.size(), 0);
  none.segment.assign(g.size(), -1);
  const OutputLives without = output_lives(g, layouts, none);
  std::vector<char> frees(static_cast<size_t>(plan.segments), 0);
  for (const Node& n : g.nodes()) {
    const int32_t s = plan.segment[static_cast<size_t>(n.id)];
    for (int32_t o = 0; s >= 0 && o < static_cast<int32_t>(n.outputs.size()); ++o)
      if (without.at({n.id, o}) == OutputLife::kKept) frees[static_cast<size_t>(s)] = 1;
  }
  // Each segment's chunk: its first node's (one chunk without `chunk`).
  std::vector<int64_t> chunk_of(static_cast<size_t>(plan.segments), -1);
  for (const Node& n : g.nodes())
    if (const int32_t s = plan.segment[static_cast<size_t>(n.id)]; s >= 0 && chunk_of[static_cast<size_t>(s)] < 0)
      chunk_of[static_cast<size_t>(s)] = chunk.empty() ? 0 : chunk[static_cast<size_t>(n.id)];
  std::vector<char> chosen(static_cast<size_t>(plan.segments), 0);
  std::map<int64_t, int32_t> left;  // per chunk
  for (const int64_t c : chunk_of) left.emplace(c, layers);
  for (const char pass : {1, 0})
    for (size_t s = 0; s < frees.size(); ++s)
      if (int32_t& l = left[chunk_of[s]]; frees[s] == pass && l > 0) chosen[s] = 1, --l;
  std::vector<int32_t> number(static_cast<size_t>(plan.segments), -1);
  int32_t next = 0;
  for (size_t s = 0; s < chosen.size(); ++s)
    if (chosen[s]) number[s] = next++;
  for (size_t i = 0; i < plan.segment.size(); ++i) {
    if (plan.segment[i] < 0) continue;
    plan.segment[i] = number[static_cast<size_t>(plan.segment[i])];
    if (plan.segment[i] < 0) plan.recomputed[i] = 0;
  }
  plan.segments = next;
}

// Operators: the named nodes, the parallel operators carrying data only
// between recomputed nodes, and a segment per group reading one another.
void plan_operators(const Graph& g, const SourceLayouts& layouts, std::span<const std::string> operators, std::span<const int64_t> chunk,
                    RecomputePlan& plan) {
  const std::set<std::string_view> named(operators.begin(), operators.end());
  const auto consumers = g.consumers();
  std::vector<char> output(g.size(), 0);
  for (const TensorRef& t : g.outputs()) output[static_cast<size_t>(t.node)] = 1;
  int64_t micro = 1;  // the graph's micro-batches (the slices of its pipelined tensors)
  for (const Node& n : g.nodes())
    for (const ParallelTensorShape& s : n.outputs) micro = std::max(micro, s.slices());
  auto sliced = [&](const Node& n) {
    for (const ParallelTensorShape& s : n.outputs)
      if (s.slices() > 1) return true;
    return std::any_of(n.inputs.begin(), n.inputs.end(), [&](const TensorRef& t) { return g.shape(t).slices() > 1; });
  };
  auto other_chunk = [&](NodeId n) {
    return !chunk.empty() && std::any_of(consumers[static_cast<size_t>(n)].begin(), consumers[static_cast<size_t>(n)].end(),
                                         [&](const auto& c) { return chunk[static_cast<size_t>(c.first)] != chunk[static_cast<size_t>(n)]; });
  };
  // Never what the step reads after its backward pass (a loss, an output:
  // a pipeline stage's boundary), what runs once per step among
  // micro-batches, or what another chunk reads.
  for (const Node& n : g.nodes())
    if (active(g, layouts, n.id) && n.op->op_class != OpClass::kParallel && named.count(n.name) && n.op->loss == LossKind::kNone &&
        !output[static_cast<size_t>(n.id)] && (micro == 1 || sliced(n)) && !other_chunk(n.id))
      plan.recomputed[static_cast<size_t>(n.id)] = 1;
  // A parallel operator fed by a recomputed node (through parallel
  // operators), forward; whose readers are all recomputed (or such
  // parallel operators), backward.
  auto parallel = [&](const Node& n) { return active(g, layouts, n.id) && n.op->op_class == OpClass::kParallel; };
  std::vector<char> fed(g.size(), 0), only(g.size(), 0);
  for (const Node& n : g.nodes())
    if (parallel(n) && !n.inputs.empty()) {
      const auto in = static_cast<size_t>(n.inputs[0].node);
      fed[static_cast<size_t>(n.id)] = plan.recomputed[in] || fed[in];
    }
  for (size_t i = g.size(); i-- > 0;) {
    const Node& n = g.node(static_cast<NodeId>(i));
    if (!parallel(n) || consumers[i].empty()) continue;
    only[i] = std::all_of(consumers[i].begin(), consumers[i].end(), [&](const auto& c) {
      const auto r = static_cast<size_t>(c.first);
      return plan.recomputed[r] || only[r];
    });
  }
  for (size_t i = 0; i < g.size(); ++i)
    if (fed[i] && only[i] && !output[i] && !other_chunk(static_cast<NodeId>(i))) plan.recomputed[i] = 1;
  // Segments: the groups of recomputed nodes joined by reading one another
  // (union-find), numbered by their first node.
  std::vector<NodeId> parent(g.size());
  for (size_t i = 0; i < g.size(); ++i) parent[i] = static_cast<NodeId>(i);
  auto root = [&](NodeId x) {
    while (parent[static_cast<size_t>(x)] != x) x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  };
  for (const Node& n : g.nodes())
    if (plan.recomputed[static_cast<size_t>(n.id)])
      for (const TensorRef& t : n.inputs)
        if (plan.recomputed[static_cast<size_t>(t.node)]) {
          const NodeId a = root(n.id), b = root(t.node);
          parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
        }
  std::map<NodeId, int32_t> number;
  for (const Node& n : g.nodes())
    if (plan.recomputed[static_cast<size_t>(n.id)]) {
      const auto [it, fresh] = number.emplace(root(n.id), plan.segments);
      plan.segments += fresh;
      plan.segment[static_cast<size_t>(n.id)] = it->second;
    }
}

// Flash: each kernel that nothing recomputes yet, and whose inputs nothing
// recomputes (a segment must not read another's output, nor be read by
// one), has its inner operators recomputed in its own backward, a segment
// per kernel.
void plan_flash(const Graph& g, const SourceLayouts& layouts, RecomputePlan& plan) {
  const AttentionKernels kernels = find_attention_kernels(g, layouts);
  if (kernels.members.empty()) return;
  plan.in_kernel.assign(g.size(), 0);
  plan.unwritten.assign(g.size(), 0);
  auto recomputed = [&](NodeId n) { return plan.recomputed[static_cast<size_t>(n)] != 0; };
  for (const std::vector<NodeId>& k : kernels.members) {
    const auto inner = std::span(k).first(k.size() - 1);
    for (const NodeId n : inner) plan.unwritten[static_cast<size_t>(n)] = 1;
    const bool taken = std::any_of(k.begin(), k.end(), [&](NodeId n) {
      return recomputed(n) || std::any_of(g.node(n).inputs.begin(), g.node(n).inputs.end(), [&](const TensorRef& t) { return recomputed(t.node); });
    });
    if (taken) continue;
    for (const NodeId n : inner) {
      plan.recomputed[static_cast<size_t>(n)] = 1, plan.in_kernel[static_cast<size_t>(n)] = 1;
      plan.segment[static_cast<size_t>(n)] = plan.segments;
    }
    ++plan.segments;
  }
}

}  // namespace

bool plans_per_chunk(Recompute policy, int32_t layers, const PipelineShape& p) {
  return (recomputes_layers(policy) && (layers != kAllLayers || !p.interlaced.empty())) || policy == Recompute::kOperators;
}

RecomputePlan plan_recompute(const Graph& g, const SourceLayouts& layouts, const TrainingRecipe& recipe, std::span<const int64_t> chunk) {
  return plan_recompute(g, layouts, recipe.recompute, recipe.recompute_layers, chunk, recipe.recompute_operators, recipe.attention);
}

RecomputePlan plan_recompute(const Graph& g, const SourceLayouts& layouts, Recompute policy, int32_t layers, std::span<const int64_t> chunk,
                             std::span<const std::string> operators, AttentionKernel attention) {
  if (!chunk.empty() && chunk.size() != g.size()) throw Error("plan_recompute: " + std::to_string(chunk.size()) + " chunks for " + std::to_string(g.size()) + " nodes");
  RecomputePlan plan;
  plan.recomputed.assign(g.size(), 0);
  plan.segment.assign(g.size(), -1);
  const bool flash = attention == AttentionKernel::kFlash;
  if (recomputes_layers(policy)) plan_full(g, layouts, chunk, plan), keep_only(g, layouts, layers, chunk, plan);
  if (flash && policy != Recompute::kOperators) plan_flash(g, layouts, plan);
  if (policy == Recompute::kSelective || policy == Recompute::kFullSelective) plan_selective(g, layouts, chunk, plan);
  if (regathers(policy)) plan_regathers(g, layouts, chunk, plan);
  if (policy == Recompute::kOperators) {
    plan_operators(g, layouts, operators, chunk, plan);  // (numbers its segments from the recomputed nodes: before the kernels')
    if (flash) plan_flash(g, layouts, plan);
  }
  return plan;
}

}  // namespace pcgx
