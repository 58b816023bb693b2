// Single-tensor cuts (see graph_cuts.h).
#include "pcgx/pcg/graph_cuts.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string_view>
#include <variant>

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

// A gap's shape: its operators, their output layouts and their text
// attributes (an activation's kind) in order, so that two layers of a
// model compare equal: not the names, nor the numbers, which a layer's
// own dropout seed makes differ (dimensions and degrees show in the
// layouts).
uint64_t gap_signature(const Graph& g, std::span<const NodeId> nodes) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  for (NodeId n : nodes) {
    const Node& node = g.node(n);
    mix(node.op->name);
    for (const auto& [k, v] : node.attrs.values())
      if (std::holds_alternative<std::string>(v)) mix(k), mix(std::get<std::string>(v));
    for (const ParallelTensorShape& o : node.outputs) mix(o.to_string());
  }
  return h;
}

RepeatingGaps repeating_gaps(const std::vector<uint64_t>& gaps) {
  const size_t k = gaps.size();
  RepeatingGaps best;
  for (size_t period = 2; 2 * period <= k; ++period) {
    // Maximal runs of gaps j with gaps[j] == gaps[j + period].
    for (size_t j = 0; j + period < k;) {
      size_t end = j;
      while (end + period < k && gaps[end] == gaps[end + period]) ++end;
      const size_t len = end - j + period;  // the gaps covered: j .. end + period - 1
      if (end > j && len >= 2 * period && len > best.length) best = {j, len, period};
      j = end > j ? end : j + 1;
    }
    if (best.length > 0) break;  // the smallest period that repeats at all
  }
  return best;
}

}  // namespace pcgx
