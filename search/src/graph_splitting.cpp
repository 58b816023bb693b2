// Graph splitting: cuts, pieces and their joining (see graph_splitting.h).
#include "graph_splitting.h"

#include <algorithm>
#include <set>

#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/substitution.h"

namespace pcgx::search {
namespace {

constexpr const char* kSeedAttr = "seed";

// A boundary layout: the samples, the second and the last dimension split
// as `b` states (1: unpartitioned).
ParallelTensorShape layout(const ParallelTensorShape& logical, BoundaryLayout b) {
  ParallelTensorShape s = ParallelTensorShape::unpartitioned(logical.logical_shape(), logical.dtype);
  if (b.samples > 1 && s.rank() > 0) s.dims[0].degree = b.samples;
  if (b.second > 1 && s.rank() > 2) s.dims[1].degree = b.second;
  if (b.last > 1 && s.rank() > 1) s.dims.back().degree = b.last;
  return s;
}


}  // namespace

std::string real_name(const std::map<std::string, std::string>& names, const std::string& canonical) {
  if (const auto it = names.find(canonical); it != names.end()) return it->second;
  // The longest prefix ending before a dot that names one (a piece keeping
  // the model's names has dots in them).
  for (size_t dot = canonical.rfind('.'); dot != std::string::npos && dot > 0; dot = canonical.rfind('.', dot - 1))
    if (const auto it = names.find(canonical.substr(0, dot)); it != names.end())
      return it->second.empty() ? "" : it->second + canonical.substr(dot);
  return "";
}

std::vector<NodeId> compute_order(const Graph& g) {
  std::vector<NodeId> order;
  for (const Node& n : g.nodes())
    if (!is_source(n)) order.push_back(n.id);
  return order;
}

std::vector<Piece> split(const Graph& g, const RuleLibrary& rules, int64_t k) {
  const std::vector<NodeId> order = compute_order(g);
  std::vector<Piece> pieces;
  const auto cuts = valid_cuts(g, order);
  if (static_cast<int64_t>(order.size()) < 2 * k || cuts.empty()) {
    pieces.push_back({order, {-1, 0}, {-1, 0}});
    return pieces;
  }
  // Matches that a cut would block: their nodes on both sides of it.
  std::vector<size_t> pos(g.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) pos[static_cast<size_t>(order[i])] = i;
  std::vector<int64_t> blocked(order.size() + 1, 0);  // difference array
  {
    const auto by_op = nodes_by_op(g);
    const auto consumers = g.consumers();
    MatchOptions o;
    o.limit = 8;
    o.by_op = &by_op;
    for (const auto& [op, nodes] : by_op)
      for (const RuleRoot& r : rules.roots_at(op))
        for (const Match& m : find_matches(g, *r.rule, consumers, o)) {
          size_t lo = SIZE_MAX, hi = 0;
          for (NodeId n : m.nodes)
            if (n >= 0) lo = std::min(lo, pos[static_cast<size_t>(n)]), hi = std::max(hi, pos[static_cast<size_t>(n)]);
          if (lo < hi) ++blocked[lo], --blocked[hi];
        }
  }
  for (size_t i = 1; i < blocked.size(); ++i) blocked[i] += blocked[i - 1];
  size_t start = 0;
  size_t c = 0;
  Piece cur;
  while (c < cuts.size()) {
    // Among the cuts leaving at least k operators on each side, within a
    // window of k past the first, take the one blocking the fewest matches.
    size_t best = SIZE_MAX;
    for (size_t j = c; j < cuts.size(); ++j) {
      const size_t at = cuts[j].first;
      if (at + 1 - start < static_cast<size_t>(k)) continue;
      if (order.size() - at - 1 < static_cast<size_t>(k)) break;
      if (best != SIZE_MAX && at + 1 - start >= 2 * static_cast<size_t>(k)) break;
      if (best == SIZE_MAX || blocked[at] < blocked[cuts[best].first]) best = j;
    }
    if (best == SIZE_MAX) break;
    const size_t at = cuts[best].first;
    cur.nodes.assign(order.begin() + static_cast<std::ptrdiff_t>(start), order.begin() + static_cast<std::ptrdiff_t>(at + 1));
    cur.out = cuts[best].second;
    pieces.push_back(cur);
    cur = Piece{};
    cur.in = cuts[best].second;
    start = at + 1;
    c = best + 1;
  }
  cur.nodes.assign(order.begin() + static_cast<std::ptrdiff_t>(start), order.end());
  pieces.push_back(cur);
  return pieces;
}


PieceGraph piece_graph(const Graph& g, const Piece& p, BoundaryLayout in, BoundaryLayout out_layout) {
  PieceGraph pg{Graph(g.name()), {}};
  Graph& out = pg.graph;
  std::map<TensorRef, TensorRef> map;
  std::map<NodeId, NodeId> sources;
  if (p.in.node >= 0) {
    const ParallelTensorShape s = layout(g.shape(p.in), in);
    Attributes a{{"shape", IntList(s.logical_shape())}, {"dtype", std::string(to_string(s.dtype))}};
    if (!s.is_unpartitioned()) {
      IntList degrees;
      for (const auto& d : s.dims) degrees.push_back(d.degree);
      a.set("degrees", degrees);
    }
    TensorRef t{out.add("Input", a, {}, std::string(kPieceInputPrefix) + "in"), 0};
    // A pipelined boundary (a stage searched in micro-batches) is read in
    // its micro-slices; joining drops this Pipeline again, the carried
    // tensor being pipelined already.
    const ParallelTensorShape& carried = g.shape(p.in);
    for (int64_t d = 0; d < carried.rank(); ++d)
      if (const int64_t k = carried.dims[static_cast<size_t>(d)].pipeline; k > 1)
        t = {out.add("Pipeline", {{"dim", d}, {"degree", k}}, {t}), 0};
    // The samples first: the scattered dimension's Combine (the second's
    // or the last's), next, meets the stage's own layout change as one
    // step (relayout.h), holding no copy.
    if (s.rank() > 0 && s.dims[0].degree > 1) t = {out.add("Combine", {{"dim", int64_t{0}}, {"degree", s.dims[0].degree}}, {t}), 0};
    if (s.rank() > 2 && s.dims[1].degree > 1) t = {out.add("Combine", {{"dim", int64_t{1}}, {"degree", s.dims[1].degree}}, {t}), 0};
    if (s.rank() > 1 && s.dims.back().degree > 1)
      t = {out.add("Combine", {{"dim", int64_t{s.rank() - 1}}, {"degree", s.dims.back().degree}}, {t}), 0};
    map[p.in] = t;
  }
  for (NodeId id : p.nodes) {
    const Node& n = g.node(id);
    std::vector<TensorRef> ins;
    for (const TensorRef& i : n.inputs) {
      const Node& src = g.node(i.node);
      if (is_source(src)) {
        auto it = sources.find(src.id);
        if (it == sources.end()) {
          const std::string canon = "s" + std::to_string(sources.size());
          pg.names[canon] = src.name;
          it = sources.emplace(src.id, out.add(*src.op, src.attrs, {}, canon)).first;
        }
        ins.push_back({it->second, i.output});
      } else {
        ins.push_back(map.at(i));
      }
    }
    Attributes attrs = n.attrs;
    if (attrs.has(kSeedAttr)) {
      const int64_t canon = static_cast<int64_t>(pg.seeds.size());
      pg.seeds[canon] = attrs.get_int(kSeedAttr);
      attrs.set(kSeedAttr, canon);
    }
    const std::string canon = "c" + std::to_string(pg.names.size());
    pg.names[canon] = n.name;
    const NodeId nid = out.add(*n.op, attrs, ins, canon);
    for (int32_t o = 0; o < static_cast<int32_t>(n.outputs.size()); ++o) map[{id, o}] = {nid, o};
  }
  if (p.out.node >= 0) {
    TensorRef t = map.at(p.out);
    const ParallelTensorShape s = layout(g.shape(p.out), out_layout);
    for (int64_t d = 0; d < s.rank(); ++d)
      if (const int64_t k = s.dims[static_cast<size_t>(d)].degree; k > 1) t = {out.add("Repartition", {{"dim", d}, {"degree", k}}, {t}), 0};
    out.add_output(t);
  } else {
    for (const TensorRef& o : g.outputs()) out.add_output(map.at(o));
  }
  return pg;
}

PieceGraph with_model_names(const PieceGraph& pg, bool sources) {
  PieceGraph out{Graph(pg.graph.name()), {}, pg.seeds};
  for (const Node& n : pg.graph.nodes()) {
    const auto it = sources || n.op->op_class != OpClass::kSource ? pg.names.find(n.name) : pg.names.end();
    const std::string name = it == pg.names.end() ? n.name : it->second;
    std::vector<TensorRef> ins(n.inputs.begin(), n.inputs.end());
    out.graph.add(*n.op, n.attrs, ins, name);
    if (it != pg.names.end()) out.names[name] = name;
    else if (const auto kept = pg.names.find(n.name); kept != pg.names.end()) out.names[name] = kept->second;
  }
  for (const TensorRef& o : pg.graph.outputs()) out.graph.add_output(o);
  return out;
}

std::vector<Piece> pieces_at(const std::vector<NodeId>& order, const std::vector<std::pair<size_t, TensorRef>>& cuts) {
  std::vector<Piece> pieces;
  Piece cur;
  size_t start = 0;
  for (const auto& [at, t] : cuts) {
    cur.nodes.assign(order.begin() + static_cast<std::ptrdiff_t>(start), order.begin() + static_cast<std::ptrdiff_t>(at + 1));
    cur.out = t;
    pieces.push_back(cur);
    cur = Piece{};
    cur.in = t;
    start = at + 1;
  }
  cur.nodes.assign(order.begin() + static_cast<std::ptrdiff_t>(start), order.end());
  pieces.push_back(cur);
  return pieces;
}

Graph join_pieces(const std::string& name, std::span<const JoinPart> parts, std::vector<JoinOrigin>* origin) {
  Graph joined(name);
  std::map<std::string, NodeId> sources;
  TensorRef carry{-1, 0};
  // Nodes added since the last mark came from `node` of part p (the
  // layout changes before it, too: they run with their reader).
  auto mark = [&](int p, NodeId node) {
    if (origin) origin->resize(joined.size(), {p, node});
  };
  for (size_t p = 0; p < parts.size(); ++p) {
    const Graph& c = *parts[p].graph;
    const auto& names = parts[p].piece->names;
    const auto& seeds = parts[p].piece->seeds;
    std::map<NodeId, std::vector<TensorRef>> map;
    for (const Node& n : c.nodes()) {
      std::vector<TensorRef> outs;
      if (is_source(n) && n.name.starts_with(kPieceInputPrefix)) {
        // The carried tensor from the layout the previous piece gives to the
        // one this piece reads, dimension by dimension (the samples, and
        // the second or the last under scatter-gather).
        TensorRef t = carry;
        const ParallelTensorShape& wanted = n.outputs[0];
        for (int64_t d = 0; d < wanted.rank(); ++d) {
          const int64_t want = wanted.dims[static_cast<size_t>(d)].degree, had = joined.shape(t).dims[static_cast<size_t>(d)].degree;
          if (had == want) continue;
          if (had > 1) t = {joined.add("Combine", {{"dim", d}, {"degree", had}}, {t}), 0};
          if (want > 1) t = {joined.add("Repartition", {{"dim", d}, {"degree", want}}, {t}), 0};
        }
        outs.push_back(t);
      } else if (is_source(n)) {
        const std::string& real = names.at(n.name);
        auto it = sources.find(real);
        if (it == sources.end()) it = sources.emplace(real, joined.add(*n.op, n.attrs, {}, real)).first;
        outs.push_back({it->second, 0});
      } else {
        std::vector<TensorRef> ins;
        for (const TensorRef& i : n.inputs) ins.push_back(map.at(i.node).at(static_cast<size_t>(i.output)));
        if (n.op->data_move == DataMove::kPipeline && joined.shape(ins[0]) == n.outputs[0]) {
          map[n.id] = {ins[0]};
          continue;
        }
        Attributes attrs = n.attrs;
        if (attrs.has(kSeedAttr)) attrs.set(kSeedAttr, seeds.at(attrs.get_int(kSeedAttr)));
        const NodeId id = joined.add(*n.op, attrs, ins, real_name(names, n.name));
        for (int32_t o = 0; o < static_cast<int32_t>(n.outputs.size()); ++o) outs.push_back({id, o});
      }
      mark(static_cast<int>(p), n.id);
      map[n.id] = outs;
    }
    if (p + 1 < parts.size()) {
      const TensorRef o = c.outputs().at(0);
      carry = map.at(o.node).at(static_cast<size_t>(o.output));
    } else {
      for (const TensorRef& o : c.outputs()) joined.add_output(map.at(o.node).at(static_cast<size_t>(o.output)));
    }
  }
  return joined;
}

}  // namespace pcgx::search
