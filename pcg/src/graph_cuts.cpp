// Single-tensor cuts (see graph_cuts.h).
#include "pcgx/pcg/graph_cuts.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

namespace pcgx {

std::vector<std::pair<size_t, TensorRef>> valid_cuts(const Graph& g, const std::vector<NodeId>& order) {
  auto is_source = [&](NodeId n) { return g.node(n).op->op_class == OpClass::kSource; };
  std::vector<size_t> pos(g.size(), SIZE_MAX);
  for (size_t i = 0; i < order.size(); ++i) pos[static_cast<size_t>(order[i])] = i;
  // last_use[t]: the last position reading tensor t (graph outputs: the end).
  std::map<TensorRef, size_t> last_use;
  for (NodeId n : order)
    for (const TensorRef& t : g.node(n).inputs)
      if (!is_source(t.node)) last_use[t] = std::max(last_use[t], pos[static_cast<size_t>(n)]);
  for (const TensorRef& t : g.outputs()) last_use[t] = order.size();
  // Sweep: open tensors are those produced at or before i and read after i.
  std::vector<std::vector<TensorRef>> closes(order.size() + 1);
  for (const auto& [t, last] : last_use) closes[last].push_back(t);
  std::vector<std::pair<size_t, TensorRef>> cuts;
  std::set<TensorRef> open;
  for (size_t i = 0; i + 1 < order.size(); ++i) {
    const Node& n = g.node(order[i]);
    for (int32_t o = 0; o < static_cast<int32_t>(n.outputs.size()); ++o)
      if (last_use.count({n.id, o})) open.insert({n.id, o});
    for (const TensorRef& t : closes[i]) open.erase(t);
    if (open.size() == 1) cuts.push_back({i, *open.begin()});
  }
  return cuts;
}

}  // namespace pcgx
