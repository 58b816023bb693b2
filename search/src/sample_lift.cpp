// Rules lifted over a samples split (see sample_lift.h).
#include "sample_lift.h"

#include <algorithm>

#include "degree_map.h"

namespace pcgx::search {

bool lifted_state_is(const ParallelTensorShape& want, const ParallelTensorShape& have, int64_t k, int64_t lift, Lifted how) {
  if (want.rank() != have.rank() || want.dtype != have.dtype) return false;
  if (how == Lifted::kSamples && want.rank() == 0) return false;
  for (int d = 0; d < want.rank(); ++d) {
    const auto &w = want.dims[static_cast<size_t>(d)], &h = have.dims[static_cast<size_t>(d)];
    if (h.pipeline != 1) return false;
    const int64_t extra = how == Lifted::kSamples && d == 0 ? lift : 1;
    if (h.degree != map_degree(w.degree, k) * extra) return false;
  }
  return have.replica == map_degree(want.replica, k) * (how == Lifted::kCopies ? lift : 1);
}

std::optional<Lifted> lifted_as(const ParallelTensorShape& want, const ParallelTensorShape& have, int64_t k, int64_t lift) {
  for (const Lifted how : {Lifted::kSamples, Lifted::kCopies})
    if (lifted_state_is(want, have, k, lift, how)) return how;
  return std::nullopt;
}

namespace {

// Copies of one slot, as the producers show it: Replicate of such a tensor,
// or Repartition/Combine of one (they move blocks within each slot). A
// compute operator's replica slots may be partial sums even where its
// inputs have as many slots (a reduction split beside replicated inputs),
// so none is taken for copies.
bool copies_at(const Graph& g, TensorRef t, int depth) {
  const ParallelTensorShape& s = g.shape(t);
  if (s.replica == 1) return true;
  if (depth > 16) return false;
  const Node& n = g.node(t.node);
  switch (n.op->data_move) {
    case DataMove::kReplicate:
    case DataMove::kRepartition:
    case DataMove::kCombine: return copies_at(g, n.inputs[0], depth + 1);
    default: return false;
  }
}

}  // namespace

bool all_copies(const Graph& g, TensorRef t) { return copies_at(g, t, 0); }

std::optional<Lifted> lift_node(const Node& rule_node, const Graph& g, NodeId at, const std::vector<Lifted>& inputs, int64_t k,
                                int64_t lift) {
  const Node& n = g.node(at);
  const bool samples = std::find(inputs.begin(), inputs.end(), Lifted::kSamples) != inputs.end();
  const Lifted out = samples ? Lifted::kSamples : Lifted::kCopies;
  if (n.op->op_class == OpClass::kParallel) {
    switch (n.op->data_move) {
      case DataMove::kRepartition:
      case DataMove::kCombine:
      case DataMove::kReplicate:
      case DataMove::kReduce:
      case DataMove::kAllReduce: break;
      default: return std::nullopt;
    }
  } else if (n.op->op_class == OpClass::kCompute) {
    if (n.op->shard_level && n.op->shard_level(n.attrs)) return std::nullopt;
    // An attribute fixing a whole shape (Reshape's) names the extent of
    // dimension 0, which the blocks of samples do not have.
    for (const AttrSpec& spec : n.op->attrs)
      if (spec.role == AttrRole::kShape) return std::nullopt;
    // On copies alone, every copy must compute the same value: the rule's
    // output is one slot (no reduction split leaving partial sums), so the
    // L copies are L equal slots.
    if (!samples)
      for (const ParallelTensorShape& o : rule_node.outputs)
        if (o.replica != 1) return std::nullopt;
    if (samples) {
      if (!n.op->kinds) return std::nullopt;
      bool separable = false;
      for (const ParallelKind& kind : n.op->kinds(n.attrs, g.input_types(n))) {
        if (kind.inputs.size() < inputs.size() || kind.outputs.size() < n.outputs.size()) continue;
        bool ok = true;
        for (size_t i = 0; ok && i < inputs.size(); ++i)
          ok = kind.inputs[i] == (inputs[i] == Lifted::kSamples ? 0 : ParallelKind::kCopy);
        for (size_t o = 0; ok && o < n.outputs.size(); ++o) ok = kind.outputs[o] == 0;
        if ((separable = ok)) break;
      }
      if (!separable) return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  if (rule_node.outputs.size() != n.outputs.size()) return std::nullopt;
  for (size_t o = 0; o < n.outputs.size(); ++o)
    if (!lifted_state_is(rule_node.outputs[o], n.outputs[o], k, lift, out)) return std::nullopt;
  return out;
}

}  // namespace pcgx::search
