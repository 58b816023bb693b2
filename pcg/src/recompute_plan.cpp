// Recomputation plans (see recompute_plan.h and training_recipe.h).
#include "pcgx/pcg/recompute_plan.h"

#include <algorithm>
#include <set>

#include "pcgx/pcg/graph_cuts.h"

namespace pcgx {
namespace {

bool active(const Graph& g, const SourceLayouts& layouts, NodeId n) {
  return g.node(n).op->op_class != OpClass::kSource && !layouts.is_layout(g, n);
}

// Full: the nodes strictly after the first single-tensor cut and up to the
// last one, less those producing a kept cut tensor; a segment per gap
// between two cuts. The cuts are graph_cuts.h's over the
// nodes that compute: sources and layouts left out, since a weight laid out
// once and read by the first and the last layer (a tied embedding) would
// otherwise leave no cut at all.
void plan_full(const Graph& g, const SourceLayouts& layouts, RecomputePlan& plan) {
  std::vector<NodeId> order;
  for (const Node& n : g.nodes())
    if (active(g, layouts, n.id)) order.push_back(n.id);
  if (order.size() < 3) return;
  std::vector<size_t> cuts;
  std::set<TensorRef> checkpoints;
  for (const auto& [i, t] : valid_cuts(g, order)) cuts.push_back(i), checkpoints.insert(t);
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    bool any = false;
    for (size_t i = cuts[c] + 1; i <= cuts[c + 1]; ++i) {
      const Node& n = g.node(order[i]);
      bool kept = false;
      for (int32_t o = 0; o < static_cast<int32_t>(n.outputs.size()); ++o) kept |= checkpoints.count({n.id, o}) > 0;
      if (kept) continue;
      plan.recomputed[static_cast<size_t>(n.id)] = 1;
      plan.segment[static_cast<size_t>(n.id)] = plan.segments;
      any = true;
    }
    plan.segments += any;
  }
}

int64_t elements(const ParallelTensorShape& s) { return s.shard_elements(); }

// Selective: a compute operator reading two or more activations and no
// weight, with FLOPs, whose output is larger than each input (q k^T) starts
// a segment; an operator whose one activation input is recomputed and whose
// output is the same size (scale, softmax, dropout) joins it.
void plan_selective(const Graph& g, const SourceLayouts& layouts, RecomputePlan& plan) {
  for (const Node& n : g.nodes()) {
    if (!active(g, layouts, n.id) || n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs) || n.outputs.size() != 1)
      continue;
    std::vector<TensorRef> acts;
    bool weights = false;
    for (const TensorRef& t : n.inputs) {
      if (layouts.weight(t)) weights = true;
      else acts.push_back(t);
    }
    if (weights) continue;
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
      if (plan.recomputed[static_cast<size_t>(t.node)] && elements(g.shape(t)) == out) seg = plan.segment[static_cast<size_t>(t.node)];
    }
    if (seg < 0) continue;
    plan.recomputed[static_cast<size_t>(n.id)] = 1;
    plan.segment[static_cast<size_t>(n.id)] = seg;
  }
}

}  // namespace

RecomputePlan plan_recompute(const Graph& g, const SourceLayouts& layouts, Recompute policy) {
  RecomputePlan plan;
  plan.recomputed.assign(g.size(), 0);
  plan.segment.assign(g.size(), -1);
  if (policy == Recompute::kFull) plan_full(g, layouts, plan);
  else if (policy == Recompute::kSelective) plan_selective(g, layouts, plan);
  return plan;
}

}  // namespace pcgx
