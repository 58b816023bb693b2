// Common-subexpression merging (see common_subexpressions.h).
#include "pcgx/search/common_subexpressions.h"

#include <map>
#include <tuple>

namespace pcgx::search {

std::optional<Graph> merge_common_subexpressions(const Graph& g) {
  using Key = std::tuple<const OpDef*, const Attributes*, std::vector<TensorRef>>;
  struct Less {
    bool operator()(const Key& a, const Key& b) const {
      if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) < std::get<0>(b);
      if (std::get<2>(a) != std::get<2>(b)) return std::get<2>(a) < std::get<2>(b);
      return *std::get<1>(a) < *std::get<1>(b);
    }
  };
  // First pass: the representative of every node (id order is topological).
  std::vector<NodeId> rep(g.size());
  std::map<Key, NodeId, Less> first;
  bool merged = false;
  for (const Node& n : g.nodes()) {
    rep[static_cast<size_t>(n.id)] = n.id;
    if (n.op->op_class == OpClass::kSource) continue;
    std::vector<TensorRef> ins = n.inputs;
    for (TensorRef& t : ins) t.node = rep[static_cast<size_t>(t.node)];
    auto [it, fresh] = first.emplace(Key{n.op, &n.attrs, std::move(ins)}, n.id);
    if (!fresh) rep[static_cast<size_t>(n.id)] = it->second, merged = true;
  }
  if (!merged) return std::nullopt;
  // Second pass: rebuild from the outputs' representatives, keeping the
  // sources and the nodes the outputs reach.
  std::vector<char> live(g.size(), 0);
  for (const Node& n : g.nodes()) live[static_cast<size_t>(n.id)] = n.op->op_class == OpClass::kSource;
  for (const TensorRef& t : g.outputs()) live[static_cast<size_t>(rep[static_cast<size_t>(t.node)])] = 1;
  for (size_t i = g.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (const TensorRef& t : g.node(static_cast<NodeId>(i)).inputs) live[static_cast<size_t>(rep[static_cast<size_t>(t.node)])] = 1;
  }
  Graph out(g.name());
  std::vector<NodeId> id(g.size(), -1);
  for (const Node& n : g.nodes()) {
    if (!live[static_cast<size_t>(n.id)] || rep[static_cast<size_t>(n.id)] != n.id) continue;
    std::vector<TensorRef> ins;
    ins.reserve(n.inputs.size());
    for (const TensorRef& t : n.inputs) ins.push_back({id[static_cast<size_t>(rep[static_cast<size_t>(t.node)])], t.output});
    id[static_cast<size_t>(n.id)] = out.add(*n.op, n.attrs, std::move(ins), n.name);
  }
  for (const TensorRef& t : g.outputs()) out.add_output({id[static_cast<size_t>(rep[static_cast<size_t>(t.node)])], t.output});
  return out;
}

}  // namespace pcgx::search
