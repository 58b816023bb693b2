#include "pcgx/pcg/source_layout.h"

#include <algorithm>
#include <array>
#include <set>

namespace pcgx {

SourceLayouts source_layouts(const Graph& g) {
  SourceLayouts s;
  s.of.assign(g.size(), Layout::kNone);
  s.stored.assign(g.size(), 0);
  s.loaded.assign(g.size(), 0);
  s.root.assign(g.size(), -1);
  for (const Node& n : g.nodes()) {
    Layout& l = s.of[static_cast<size_t>(n.id)];
    if (n.op->op_class == OpClass::kSource) {
      if (n.op->is_weight) l = Layout::kWeight;
      else if (!n.name.starts_with(kPieceInputPrefix)) l = Layout::kInput;
      continue;
    }
    const bool parallel = n.op->is_shard_level(n.attrs);
    if (!parallel && !n.op->weight_layout) continue;
    if (n.inputs.empty()) continue;
    bool weights = true, inputs = parallel;
    for (const TensorRef& t : n.inputs) {
      weights = weights && s.of[static_cast<size_t>(t.node)] == Layout::kWeight;
      inputs = inputs && s.of[static_cast<size_t>(t.node)] == Layout::kInput;
    }
    l = weights ? Layout::kWeight : inputs ? Layout::kInput : Layout::kNone;
    if (l != Layout::kNone && n.inputs.size() == 1 && keeps_value(n.op->data_move)) {
      const Node& in = g.node(n.inputs[0].node);
      if (in.op->op_class == OpClass::kSource) s.root[static_cast<size_t>(n.id)] = in.id;
      else s.root[static_cast<size_t>(n.id)] = s.root[static_cast<size_t>(in.id)];
    }
  }
  // Inputs: every sliced layout is loaded. Weights: one chain from the
  // weight, each link read only by the next, or nothing is stored.
  const auto consumers = g.consumers();
  for (const Node& n : g.nodes()) {
    const NodeId r = s.root[static_cast<size_t>(n.id)];
    if (r < 0) continue;
    if (s.of[static_cast<size_t>(n.id)] == Layout::kInput) s.loaded[static_cast<size_t>(n.id)] = 1;
  }
  for (const Node& w : g.nodes()) {
    if (!w.op->is_weight) continue;
    std::vector<NodeId> chain;
    NodeId at = w.id;
    bool single = true;
    for (;;) {
      const auto& cs = consumers[static_cast<size_t>(at)];
      const bool next_sliced = cs.size() == 1 && s.root[static_cast<size_t>(cs[0].first)] == w.id;
      if (!next_sliced) {
        // The end of the chain: no reader of it may be sliced from this weight.
        for (const auto& [c, idx] : cs) single = single && s.root[static_cast<size_t>(c)] != w.id;
        break;
      }
      at = cs[0].first;
      chain.push_back(at);
    }
    if (single)
      for (NodeId c : chain) s.stored[static_cast<size_t>(c)] = 1;
  }
  return s;
}

std::optional<WeightCopy> weight_copy(const Graph& g, TensorRef t) {
  const ParallelTensorShape& s = g.shape(t);
  WeightCopy c;
  c.weight_dim.resize(s.dims.size());
  for (size_t k = 0; k < s.dims.size(); ++k) c.weight_dim[k] = static_cast<int64_t>(k);
  // Walk back to the Weight, carrying each layout dimension to the
  // dimension of the tensor reached.
  NodeId at = t.node;
  for (;;) {
    const Node& n = g.node(at);
    if (n.op->is_weight) break;
    if (n.inputs.size() != 1 || n.outputs.size() != 1) return std::nullopt;
    if (n.op->permutes) {
      const std::vector<int64_t> perm = n.op->permutes(n.attrs);
      if (perm.size() != s.dims.size()) return std::nullopt;
      for (int64_t& d : c.weight_dim) d = perm[static_cast<size_t>(d)];
    } else if (!n.op->is_shard_level(n.attrs) || !keeps_value(n.op->data_move)) {
      return std::nullopt;
    }
    at = n.inputs[0].node;
  }
  if (g.node(at).outputs[0].dims.size() != s.dims.size() || s.dims.size() > 8) return std::nullopt;
  c.weight = at;
  c.replica = s.replica;
  c.degrees.assign(s.dims.size(), 1);
  for (size_t k = 0; k < s.dims.size(); ++k) c.degrees[static_cast<size_t>(c.weight_dim[k])] = s.dims[k].degree;
  return c;
}

std::map<TensorRef, TensorRef> parameter_copies(const Graph& g, const SourceLayouts& layouts) {
  std::map<TensorRef, TensorRef> out;
  std::set<TensorRef> seen;
  std::map<NodeId, std::vector<std::pair<TensorRef, WeightCopy>>> first;  // per Weight
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || layouts.is_layout(g, n.id)) continue;
    for (const TensorRef& t : n.inputs) {
      if (!layouts.weight(t) || !seen.insert(t).second) continue;
      std::optional<WeightCopy> c = weight_copy(g, t);
      if (!c) continue;
      auto& earlier = first[c->weight];
      const auto same = std::find_if(earlier.begin(), earlier.end(), [&](const auto& f) { return f.second.same_parameter(*c); });
      if (same != earlier.end()) out.emplace(t, same->first);
      else earlier.emplace_back(t, std::move(*c));
    }
  }
  return out;
}

int64_t WeightCopy::weight_block(const ParallelTensorShape& s, int64_t shard) const {
  const int64_t blocks = s.num_blocks();
  int64_t b = shard % blocks, out = 0;
  // The layout's block coordinates (the last dimension fastest), each put
  // at its Weight dimension; then the Weight's index over `degrees`.
  std::array<int64_t, 8> at{};
  for (size_t k = s.dims.size(); k-- > 0;) {
    at[static_cast<size_t>(weight_dim[k])] = b % s.dims[k].degree;
    b /= s.dims[k].degree;
  }
  for (size_t j = 0; j < degrees.size(); ++j) out = out * degrees[j] + at[j];
  return out;
}

namespace {
// The lowest stage of the Weights node n is computed from (a weight
// layout's inputs are weights or their layouts: a small DAG, walked
// without allocating, as the cost model asks in its inner loops).
ZeroStage lowest_zero(const Graph& g, const TrainingRecipe& r, NodeId n) {
  const Node& node = g.node(n);
  if (node.op->is_weight) return zero_of(r, node.name);
  ZeroStage lowest = ZeroStage::k3;
  bool any = false;
  for (const TensorRef& i : node.inputs) lowest = std::min(lowest, lowest_zero(g, r, i.node)), any = true;
  return any ? lowest : r.zero;
}
}  // namespace

ZeroStage zero_of(const Graph& g, const TrainingRecipe& r, TensorRef t) {
  if (r.zero_weights.empty()) return r.zero;
  return lowest_zero(g, r, t.node);
}

std::vector<ZeroStage> weight_zero_stages(const Graph& g, const SourceLayouts& layouts, const TrainingRecipe& r) {
  std::vector<ZeroStage> out(g.size(), r.zero);
  if (r.zero_weights.empty()) return out;
  for (const Node& n : g.nodes())
    if (n.op->is_weight) out[static_cast<size_t>(n.id)] = zero_of(r, n.name);
  // Each weight layout a compute operator reads lowers the Weights it is
  // computed from to its own stage (the lowest of theirs).
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || layouts.is_layout(g, n.id)) continue;
    for (const TensorRef& t : n.inputs) {
      if (!layouts.weight(t)) continue;
      const ZeroStage z = zero_of(g, r, t);
      std::vector<NodeId> todo{t.node};
      while (!todo.empty()) {
        const Node& m = g.node(todo.back());
        todo.pop_back();
        if (m.op->is_weight) out[static_cast<size_t>(m.id)] = std::min(out[static_cast<size_t>(m.id)], z);
        else for (const TensorRef& i : m.inputs) todo.push_back(i.node);
      }
    }
  }
  return out;
}

}  // namespace pcgx
