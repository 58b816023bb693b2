// Common-subexpression merging (see common_subexpressions.h).
#include "pcgx/search/common_subexpressions.h"

#include <map>
#include <tuple>

namespace pcgx::search {
namespace {

// Whether `second` undoes `first`: a Repartition and a Combine of one
// dimension by one degree, either way round.
bool undoes(const Node& second, const Node& first) {
  const DataMove a = second.op->data_move, b = first.op->data_move;
  const bool inverse = (a == DataMove::kRepartition && b == DataMove::kCombine) || (a == DataMove::kCombine && b == DataMove::kRepartition);
  return inverse && second.attrs.get_int("dim") == first.attrs.get_int("dim") && second.attrs.get_int("degree") == first.attrs.get_int("degree");
}

}  // namespace

std::optional<Graph> merge_common_subexpressions(const Graph& g) {
  using Key = std::tuple<const OpDef*, const Attributes*, std::vector<TensorRef>>;
  struct Less {
    bool operator()(const Key& a, const Key& b) const {
      if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) < std::get<0>(b);
      if (std::get<2>(a) != std::get<2>(b)) return std::get<2>(a) < std::get<2>(b);
      return *std::get<1>(a) < *std::get<1>(b);
    }
  };
  // First pass: the tensor standing for every tensor (id order is
  // topological): a duplicate's outputs are the first copy's, and a round
  // trip's output is where it started.
  std::vector<NodeId> rep(g.size());
  std::vector<TensorRef> trip(g.size(), TensorRef{-1, 0});  // a round trip's start
  auto stand_in = [&](TensorRef t) {
    const TensorRef s = trip[static_cast<size_t>(t.node)];
    return s.node >= 0 ? s : TensorRef{rep[static_cast<size_t>(t.node)], t.output};
  };
  std::map<Key, NodeId, Less> first;
  bool merged = false;
  for (const Node& n : g.nodes()) {
    rep[static_cast<size_t>(n.id)] = n.id;
    if (n.op->op_class == OpClass::kSource) continue;
    std::vector<TensorRef> ins = n.inputs;
    for (TensorRef& t : ins) t = stand_in(t);
    // Combine(Repartition(x)) and Repartition(Combine(x)) are x, in x's
    // layout (axioms combine_repartition, repartition_combine), whoever
    // else reads the first: a reader of a gathered activation that wants
    // it split again reads the split one it was gathered from.
    if (ins.size() == 1 && g.node(ins[0].node).inputs.size() == 1 && undoes(n, g.node(ins[0].node))) {
      const Node& m = g.node(ins[0].node);
      const TensorRef x = stand_in(m.inputs[0]);
      if (g.shape(x) == n.outputs[0]) {
        trip[static_cast<size_t>(n.id)] = x, merged = true;
        continue;
      }
    }
    auto [it, fresh] = first.emplace(Key{n.op, &n.attrs, std::move(ins)}, n.id);
    if (!fresh) rep[static_cast<size_t>(n.id)] = it->second, merged = true;
  }
  if (!merged) return std::nullopt;
  // Second pass: rebuild from the outputs' stand-ins, keeping the sources
  // and the nodes the outputs reach.
  std::vector<char> live(g.size(), 0);
  for (const Node& n : g.nodes()) live[static_cast<size_t>(n.id)] = n.op->op_class == OpClass::kSource;
  for (const TensorRef& t : g.outputs()) live[static_cast<size_t>(stand_in(t).node)] = 1;
  for (size_t i = g.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (const TensorRef& t : g.node(static_cast<NodeId>(i)).inputs) live[static_cast<size_t>(stand_in(t).node)] = 1;
  }
  Graph out(g.name());
  std::vector<NodeId> id(g.size(), -1);
  auto moved = [&](TensorRef t) {
    const TensorRef s = stand_in(t);
    return TensorRef{id[static_cast<size_t>(s.node)], s.output};
  };
  for (const Node& n : g.nodes()) {
    if (!live[static_cast<size_t>(n.id)] || rep[static_cast<size_t>(n.id)] != n.id || trip[static_cast<size_t>(n.id)].node >= 0) continue;
    std::vector<TensorRef> ins;
    ins.reserve(n.inputs.size());
    for (const TensorRef& t : n.inputs) ins.push_back(moved(t));
    // The stand-ins have the shapes of what they replace, so the node's
    // output shapes are reused, not inferred again (add_like checks).
    id[static_cast<size_t>(n.id)] = out.add_like(g, n.id, std::move(ins));
  }
  for (const TensorRef& t : g.outputs()) out.add_output(moved(t));
  return out;
}

}  // namespace pcgx::search
