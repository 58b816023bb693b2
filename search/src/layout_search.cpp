// The cheapest sequence of parallel operators between two layouts (see
// layout_search.h).
#include "pcgx/search/layout_search.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/relayout.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/search/collectives.h"

namespace pcgx::search {
namespace {

const char* step_name(DataMove m) {
  switch (m) {
    case DataMove::kReduce: return "Reduce";
    case DataMove::kReplicate: return "Replicate";
    case DataMove::kCombine: return "Combine";
    case DataMove::kRepartition: return "Repartition";
    case DataMove::kAllReduce: return "AllReduce";
    default: return "?";
  }
}

// The steps a conversion may be made of (a chain holding anything else
// is left alone: Pipeline and Batch change when a slice is computed, and
// an AllReduce's copies would be summed by any Reduce after it).
bool is_layout_step(const Node& n) {
  if (n.op->op_class != OpClass::kParallel || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  switch (n.op->data_move) {
    case DataMove::kReduce:
    case DataMove::kReplicate:
    case DataMove::kCombine:
    case DataMove::kRepartition: return true;
    default: return false;
  }
}

bool is_compute(const Node& n) { return n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs); }

// The most shards the split-first sequence may hold (it is priced piece
// by piece: 192 devices' blocks split both ways would be 36,864).
constexpr int64_t kMaxSplitFirstShards = 4096;

struct Enumerator {
  const ParallelTensorShape& to;
  std::vector<int64_t> floor;  // per dimension: gcd of the two degrees
  int64_t copy;
  int64_t max_shards;
  size_t limit;
  std::vector<std::vector<LayoutStep>> out;
  std::vector<LayoutStep> path;

  void walk(ParallelTensorShape& cur, int64_t copied) {
    if (out.size() >= limit) return;
    if (copied == copy && cur == to) {
      out.push_back(path);
      return;
    }
    auto step = [&](LayoutStep s, auto&& change) {
      ParallelTensorShape next = cur;
      change(next);
      if (next.num_shards() > max_shards || next.invalid_reason()) return;
      path.push_back(s);
      walk(next, s.move == DataMove::kReplicate ? copied * s.degree : copied);
      path.pop_back();
    };
    // Whole steps before parts, so that a limit cuts the finest sequences.
    for (int64_t k = copy / copied; k >= 2; --k)
      if ((copy / copied) % k == 0) step({DataMove::kReplicate, -1, k}, [&](ParallelTensorShape& s) { s.replica *= k; });
    for (int j = 0; j < cur.rank(); ++j) {
      const int64_t d = cur.dims[static_cast<size_t>(j)].degree, want = to.dims[static_cast<size_t>(j)].degree;
      const int64_t g = floor[static_cast<size_t>(j)];
      if (want % d != 0) {  // still above the common divisor: combine down
        for (int64_t k = d; k >= 2; --k)
          if (d % k == 0 && (d / k) % g == 0)
            step({DataMove::kCombine, j, k}, [&](ParallelTensorShape& s) { s.dims[static_cast<size_t>(j)].degree /= k; });
      } else {  // repartition up to the target
        for (int64_t k = want / d; k >= 2; --k)
          if ((want / d) % k == 0)
            step({DataMove::kRepartition, j, k}, [&](ParallelTensorShape& s) { s.dims[static_cast<size_t>(j)].degree *= k; });
      }
    }
  }
};

// Appends `steps` to `out` reading `in`; returns the last tensor.
TensorRef append(Graph& out, TensorRef in, std::span<const LayoutStep> steps) {
  for (const LayoutStep& s : steps) {
    Attributes a{{"degree", s.degree}};
    if (s.dim >= 0) a.set("dim", int64_t{s.dim});
    in = {out.add(step_name(s.move), std::move(a), {in}), 0};
  }
  return in;
}

// A conversion found in a graph: its operators in order, the tensor they
// read and the compute readers of the last.
struct Chain {
  std::vector<NodeId> nodes;
  TensorRef source;
  std::vector<NodeId> readers;  // ascending
  int64_t sum = 1, copy = 1;
};

// The conversions of g the search may rewrite (layout_search.h).
std::vector<Chain> find_chains(const Graph& g, const std::vector<std::vector<std::pair<NodeId, int>>>& consumers) {
  // What is computed from sources alone is their stored or loaded layout
  // (source_layout.h), priced as such: not a conversion between operators.
  const SourceLayouts layouts = source_layouts(g);
  std::vector<char> is_output(g.size(), 0);
  for (const TensorRef& o : g.outputs()) is_output[static_cast<size_t>(o.node)] = 1;
  std::vector<Chain> chains;
  for (const Node& n : g.nodes()) {
    if (!is_layout_step(n) || !is_compute(g.node(n.inputs[0].node)) || layouts.of[static_cast<size_t>(n.inputs[0].node)] != Layout::kNone) continue;
    Chain c;
    c.source = n.inputs[0];
    NodeId cur = n.id;
    bool ok = true;
    for (;;) {
      c.nodes.push_back(cur);
      const auto& rd = consumers[static_cast<size_t>(cur)];
      if (rd.size() == 1 && is_layout_step(g.node(rd[0].first)) && !is_output[static_cast<size_t>(cur)]) {
        cur = rd[0].first;
        continue;
      }
      if (rd.empty() || is_output[static_cast<size_t>(cur)]) ok = false;
      for (const auto& [r, i] : rd) {
        if (!is_compute(g.node(r))) ok = false;
        c.readers.push_back(r);
      }
      break;
    }
    if (!ok || c.nodes.size() < 2) continue;
    // Partial sums are summed before any copy is made; slices are left alone.
    bool copied = false;
    for (NodeId x : c.nodes) {
      const Node& s = g.node(x);
      if (s.outputs[0].slices() > 1 || g.shape(s.inputs[0]).slices() > 1) ok = false;
      const int64_t k = s.attrs.get_int("degree");
      if (s.op->data_move == DataMove::kReduce) {
        if (copied) ok = false;
        c.sum *= k;
      }
      if (s.op->data_move == DataMove::kReplicate) copied = true, c.copy *= k;
    }
    // The certificate's claims need every partial sum summed at once, first.
    if (c.sum > 1 && (g.node(c.nodes[0]).op->data_move != DataMove::kReduce || g.node(c.nodes[0]).attrs.get_int("degree") != c.sum)) ok = false;
    if (!ok) continue;
    std::sort(c.readers.begin(), c.readers.end());
    c.readers.erase(std::unique(c.readers.begin(), c.readers.end()), c.readers.end());
    chains.push_back(std::move(c));
  }
  return chains;
}

// A small graph pricing one chain's candidates where g places them: the
// producer (its inputs as sources of their layouts) and the readers
// (their other inputs likewise), with their views.
struct Bench {
  const Graph& g;
  std::span<const MachineView> views;
  const CostModel& cost;
  const Chain& chain;

  Seconds price(std::span<const LayoutStep> steps) const {
    Graph mini(g.name());
    std::vector<MachineView> mv;
    auto source_like = [&](TensorRef t) {
      const ParallelTensorShape& s = g.shape(t);
      std::vector<int64_t> shape, degrees;
      for (const ParallelDim& d : s.dims) shape.push_back(d.size), degrees.push_back(d.degree);
      return TensorRef{mini.add("Input", {{"shape", shape}, {"degrees", degrees}, {"replica", s.replica},
                                          {"dtype", std::string(to_string(s.dtype))}}, {}), 0};
    };
    const Node& prod = g.node(chain.source.node);
    std::vector<TensorRef> ins;
    for (const TensorRef& i : prod.inputs) ins.push_back(source_like(i));
    const NodeId p = mini.add_like(g, prod.id, ins);
    const TensorRef src{p, chain.source.output};
    const size_t first_step = mini.size();
    const TensorRef end = append(mini, src, steps);
    const size_t last_step = mini.size();
    std::vector<std::pair<NodeId, NodeId>> placed{{p, prod.id}};
    std::vector<NodeId> readers;
    const TensorRef old_end{chain.nodes.back(), 0};
    for (NodeId r : chain.readers) {
      const Node& rn = g.node(r);
      std::vector<TensorRef> rin;
      for (const TensorRef& i : rn.inputs) rin.push_back(i == old_end ? end : source_like(i));
      readers.push_back(mini.add_like(g, r, rin));
      placed.push_back({readers.back(), r});
    }
    mv.assign(mini.size(), MachineView{});
    for (const auto& [mine, theirs] : placed) mv[static_cast<size_t>(mine)] = views[static_cast<size_t>(theirs)];
    const Placement pl(mini, mv, cost.devices());
    std::vector<NodeId> ids(last_step - first_step);
    std::iota(ids.begin(), ids.end(), static_cast<NodeId>(first_step));
    Seconds t = chain_time(pl, ids, cost);
    // What a reader then receives itself (all of it, with no sequence; the
    // other inputs, sources here, live with it).
    for (NodeId r : readers) {
      const Seconds in = cost.input_transfer_time(pl, r, 0);
      t.forward += in.forward, t.backward += in.backward;
    }
    return t;
  }
  std::optional<Seconds> try_price(std::span<const LayoutStep> steps) const {
    try {
      return price(steps);
    } catch (const Error&) {
      return std::nullopt;
    }
  }
};

std::vector<LayoutStep> steps_of(const Graph& g, std::span<const NodeId> nodes) {
  std::vector<LayoutStep> s;
  for (NodeId x : nodes) s.push_back(layout_step(g.node(x)));
  return s;
}

// The naive plan: every block a reader's shard needs sent from every
// shard holding part of it, all at once (relayout.h's pieces, from the
// producer's devices to the readers'), forward and the gradients back.
Seconds naive_time(const Placement& p, const Chain& ch, const CostModel& cost) {
  return cost.relayout_time(p, ch.source, {ch.nodes.back(), 0}, ch.sum, ch.copy, 0);
}

// A lone Repartition's or Combine's moves between devices all posted at
// once, as an exchange prices them: where several shards' groups send to
// one device, it receives them through its own links (the cost model's
// per-group price of a scatter or a gather counts only the slowest group
// alone; NCCL has neither, they are sends and receives). The backward
// pass sends the other way.
Seconds posted(const Placement& p, NodeId id, const CostModel& cost) {
  const Graph& g = p.graph();
  const Node& n = g.node(id);
  const bool per_output = n.op->data_move == DataMove::kRepartition;
  const double bytes = cost.activation_bytes(per_output ? n.outputs[0] : g.shape(n.inputs[0]));
  std::vector<Transfer> fwd, bwd;
  for (const Move& m : p.moves(id)) {
    const int64_t src = p.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard), dst = p.owner({id, m.output}, m.out_shard);
    if (src == dst) continue;
    fwd.push_back({src, dst, bytes}), bwd.push_back({dst, src, bytes});
  }
  return {exchange_time(cost.machine(), fwd), exchange_time(cost.machine(), bwd)};
}

}  // namespace

LayoutStep layout_step(const Node& n) {
  return {n.op->data_move, n.attrs.has("dim") ? static_cast<int>(n.attrs.get_int("dim")) : -1, n.attrs.get_int("degree")};
}

std::string describe(std::span<const LayoutStep> steps) {
  std::string out;
  for (const LayoutStep& s : steps) {
    if (!out.empty()) out += ' ';
    out += step_name(s.move);
    if (s.dim >= 0) out += std::to_string(s.dim);
    out += "(" + std::to_string(s.degree) + ")";
  }
  return out;
}

std::vector<std::vector<LayoutStep>> layout_sequences(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum,
                                                      int64_t copy, size_t limit) {
  if (from.rank() != to.rank() || sum < 1 || copy < 1 || from.replica % sum != 0 || from.replica / sum * copy != to.replica) return {};
  for (int j = 0; j < from.rank(); ++j)
    if (from.dims[static_cast<size_t>(j)].size != to.dims[static_cast<size_t>(j)].size) return {};
  Enumerator e{to, {}, copy, std::max(from.num_shards(), to.num_shards()), limit, {}, {}};
  for (int j = 0; j < from.rank(); ++j) e.floor.push_back(std::gcd(from.dims[static_cast<size_t>(j)].degree, to.dims[static_cast<size_t>(j)].degree));
  ParallelTensorShape cur = from;
  if (sum > 1) {
    cur.replica /= sum;
    e.path.push_back({DataMove::kReduce, -1, sum});
  }
  e.walk(cur, 1);
  // The sum, then splitting first: each dimension that grows split up to
  // the least common multiple of its two degrees, then every dimension
  // merged down to its target. Reduce and the Repartitions are one step
  // (relayout.h) that sends each partial block straight to the device of
  // the reader's shard that needs it, however many dimensions grow; the
  // merges' inputs then live with their outputs (placement.h) and move
  // nothing: the whole change as one exchange of pieces. Not with copies: a lone Replicate is priced group by group (a
  // broadcast from each shard, no device receiving from several at once),
  // which would undercut the exchange it stands for (chain_time prices a
  // lone Repartition or Combine no lower than its moves posted at once).
  int grows = 0;
  for (int j = 0; j < from.rank(); ++j)
    grows += std::lcm(from.dims[static_cast<size_t>(j)].degree, to.dims[static_cast<size_t>(j)].degree) > from.dims[static_cast<size_t>(j)].degree;
  if (sum > 1 && copy == 1 && grows >= 1) {
    ParallelTensorShape wide = cur;
    std::vector<LayoutStep> first = e.path;
    for (int j = 0; j < from.rank(); ++j) {
      const int64_t d = from.dims[static_cast<size_t>(j)].degree, l = std::lcm(d, to.dims[static_cast<size_t>(j)].degree);
      if (l > d) first.push_back({DataMove::kRepartition, j, l / d}), wide.dims[static_cast<size_t>(j)].degree = l;
    }
    for (int j = 0; j < from.rank(); ++j) {
      const int64_t l = wide.dims[static_cast<size_t>(j)].degree, want = to.dims[static_cast<size_t>(j)].degree;
      if (l > want) first.push_back({DataMove::kCombine, j, l / want});
    }
    if (!wide.invalid_reason() && wide.num_shards() <= kMaxSplitFirstShards && std::find(e.out.begin(), e.out.end(), first) == e.out.end())
      e.out.push_back(std::move(first));
  }
  return std::move(e.out);
}

Seconds chain_time(const Placement& p, std::span<const NodeId> chain, const CostModel& cost) {
  const Graph& g = p.graph();
  const auto consumers = g.consumers();
  Seconds total;
  for (size_t i = 0; i < chain.size(); ++i) {
    Seconds s;
    // A step with its partner (relayout.h): the next operator, or the last
    // of the splits after a sum.
    std::optional<Seconds> pair;
    size_t end = i;
    if (const auto partner = layout_change_partner(g, chain[i], consumers))
      if (const auto it = std::find(chain.begin() + static_cast<std::ptrdiff_t>(i) + 1, chain.end(), *partner); it != chain.end()) {
        end = static_cast<size_t>(it - chain.begin());
        pair = cost.layout_change_time(p, chain[i], *partner, 0);
      }
    if (pair) {
      s = *pair, i = end;
    } else {
      s = cost.parallel_time(p, chain[i], 0);
      const DataMove m = g.node(chain[i]).op->data_move;
      if (m == DataMove::kRepartition || m == DataMove::kCombine) {
        const Seconds all = posted(p, chain[i], cost);
        s.forward = std::max(s.forward, all.forward), s.backward = std::max(s.backward, all.backward);
      }
    }
    total.forward += s.forward, total.backward += s.backward;
  }
  return total;
}

Relaid cheapest_layout_changes(const Graph& g, std::span<const MachineView> views, const CostModel& cost) {
  const auto consumers = g.consumers();
  const std::vector<Chain> chains = find_chains(g, consumers);
  // Per chain end: the sequence replacing its chain.
  std::vector<const Chain*> ends(g.size(), nullptr);
  std::vector<std::vector<LayoutStep>> chosen(chains.size());  // may be empty: the conversion was an identity
  std::vector<char> rewritten(chains.size(), 0);
  Relaid r;
  std::optional<Placement> placed;
  for (size_t c = 0; c < chains.size(); ++c) {
    const Chain& ch = chains[c];
    // One merge and one split of the same degree is one collective (an
    // all-reduce of the partial sums, an all-gather, a reduce-scatter, an
    // all-to-all) and stays: a posted exchange pays one latency however
    // many messages a device sends (collectives.h), so for small tensors
    // (BatchNorm's statistics) the cost model would price a rewrite below
    // NCCL's collective without the messages being any cheaper to send.
    if (ch.nodes.size() == 2) {
      const Node& a = g.node(ch.nodes[0]);
      const Node& b = g.node(ch.nodes[1]);
      if (layout_change(a.op->data_move, b.op->data_move) && a.attrs.get_int("degree") == b.attrs.get_int("degree")) continue;
    }
    const ParallelTensorShape& from = g.shape(ch.source);
    const ParallelTensorShape& to = g.node(ch.nodes.back()).outputs[0];
    const auto candidates = layout_sequences(from, to, ch.sum, ch.copy);
    if (candidates.empty()) continue;
    const Bench bench{g, views, cost, ch};
    const std::vector<LayoutStep> now = steps_of(g, ch.nodes);
    // A chain the small graph cannot rebuild (a producer reading slices)
    // is left as it is.
    const auto before = bench.try_price(now);
    if (!before) continue;
    Seconds best = *before;
    const std::vector<LayoutStep>* pick = nullptr;
    for (const auto& cand : candidates) {
      if (cand == now) continue;
      const auto t = bench.try_price(cand);
      if (t && t->total() < best.total() * (1 - 1e-9)) best = *t, pick = &cand;
    }
    if (!pick) continue;
    chosen[c] = *pick, rewritten[c] = 1;
    ends[static_cast<size_t>(ch.nodes.back())] = &ch;
    if (!placed) placed.emplace(g, views, cost.devices());
    r.choices.push_back({g.node(ch.source.node).name, g.node(ch.readers.front()).name, describe(now), describe(*pick), *before, best,
                         naive_time(*placed, ch, cost)});
  }
  // Copy g, each rewritten chain emitted where its last operator was.
  std::vector<char> dropped(g.size(), 0);
  for (size_t c = 0; c < chains.size(); ++c)
    if (rewritten[c])
      for (NodeId x : chains[c].nodes) dropped[static_cast<size_t>(x)] = 1;
  r.graph = Graph(g.name());
  r.image.assign(g.size(), -1);
  std::vector<std::vector<TensorRef>> map(g.size());
  for (const Node& n : g.nodes()) {
    if (const Chain* ch = ends[static_cast<size_t>(n.id)]) {
      const size_t c = static_cast<size_t>(ch - chains.data());
      const TensorRef s = map[static_cast<size_t>(ch->source.node)][static_cast<size_t>(ch->source.output)];
      map[static_cast<size_t>(n.id)] = {append(r.graph, s, chosen[c])};
      continue;
    }
    if (dropped[static_cast<size_t>(n.id)]) continue;
    std::vector<TensorRef> ins;
    for (const TensorRef& i : n.inputs) ins.push_back(map[static_cast<size_t>(i.node)][static_cast<size_t>(i.output)]);
    const NodeId id = r.graph.add_like(g, n.id, std::move(ins));
    r.image[static_cast<size_t>(n.id)] = id;
    for (size_t o = 0; o < n.outputs.size(); ++o) map[static_cast<size_t>(n.id)].push_back({id, static_cast<int32_t>(o)});
  }
  for (const TensorRef& o : g.outputs()) r.graph.add_output(map[static_cast<size_t>(o.node)][static_cast<size_t>(o.output)]);
  r.views.assign(r.graph.size(), MachineView{});
  for (size_t i = 0; i < g.size(); ++i)
    if (r.image[i] >= 0) r.views[static_cast<size_t>(r.image[i])] = views[i];
  return r;
}

}  // namespace pcgx::search
