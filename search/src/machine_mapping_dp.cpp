// Machine-mapping DP over the series-parallel decomposition (see
// machine_mapping.h).
#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <shared_mutex>
#include <unordered_map>

#include "pcgx/pcg/stable_hash.h"
#include "pcgx/search/graph_hash.h"
#include "pcgx/search/machine_mapping.h"
#include "sp_decomposition.h"

namespace pcgx::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Result {
  double time = kInf;
  double compute = 0;
  double comm = 0;
  double once = 0;  // of time: the optimizer update and weight-gradient synchronization
};

Result series(Result a, const Result& b) {
  a.time += b.time, a.compute += b.compute, a.comm += b.comm, a.once += b.once;
  return a;
}

struct Key {
  uint64_t hash;
  int64_t lo, size;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return static_cast<size_t>(hash_mix(hash_mix(k.hash, static_cast<uint64_t>(k.lo)), static_cast<uint64_t>(k.size)));
  }
};

int64_t task_count(const Graph& g, const Node& n) {
  if (n.op->op_class == OpClass::kParallel) {
    int64_t t = n.outputs[0].num_shards();
    for (const TensorRef& i : n.inputs) t = std::max(t, g.shape(i).num_shards());
    return t;
  }
  return n.outputs.empty() ? 1 : n.outputs[0].num_shards();
}

}  // namespace

struct MachineMapper::Impl {
  mutable std::shared_mutex mu;
  std::unordered_map<Key, Result, KeyHash> cache;
};

namespace {

// Everything about one graph the DP needs.
struct Problem {
  const Graph& g;
  const CostModel& cost;
  std::unordered_map<Key, Result, KeyHash>& cache;
  std::shared_mutex& mu;

  std::vector<char> layout;                // source_layout_nodes
  std::vector<char> active;
  std::vector<std::vector<NodeId>> feeders;  // per active node: layout nodes it pays for
  std::vector<uint64_t> local;             // local hashes
  SPTree tree;
  std::vector<uint64_t> tree_hash;
  std::vector<std::vector<std::pair<NodeId, int>>> consumers;

  Problem(const Graph& graph, const CostModel& cm, std::unordered_map<Key, Result, KeyHash>& ca, std::shared_mutex& m)
      : g(graph), cost(cm), cache(ca), mu(m) {
    layout = source_layout_nodes(g);
    active.assign(g.size(), 0);
    for (const Node& n : g.nodes()) active[static_cast<size_t>(n.id)] = n.op->op_class != OpClass::kSource && !layout[static_cast<size_t>(n.id)];
    consumers = g.consumers();
    // A layout node is paid for by its first active reader.
    std::vector<NodeId> owner(g.size(), -1);
    for (size_t i = g.size(); i-- > 0;) {
      if (!layout[i]) continue;
      NodeId best = -1;
      for (const auto& [c, idx] : consumers[i]) {
        const NodeId o = active[static_cast<size_t>(c)] ? c : owner[static_cast<size_t>(c)];
        if (o >= 0 && (best < 0 || o < best)) best = o;
      }
      owner[i] = best;
    }
    feeders.resize(g.size());
    for (size_t i = 0; i < g.size(); ++i)
      if (layout[i] && owner[i] >= 0) feeders[static_cast<size_t>(owner[i])].push_back(static_cast<NodeId>(i));
    local.resize(g.size());
    for (const Node& n : g.nodes()) {
      uint64_t h = local_hash(n, g);
      // Which inputs are weights decides the update time (leaf()).
      for (const TensorRef& i : n.inputs) h = hash_mix(h, weight_behind(g, i) >= 0 ? 0x3E16 : 0xAC7);
      for (NodeId f : feeders[static_cast<size_t>(n.id)]) h = hash_mix(h, local_hash(g.node(f), g) ^ (weight_behind(g, g.node(f).inputs[0]) >= 0));
      local[static_cast<size_t>(n.id)] = h;
    }
    std::vector<std::vector<NodeId>> readers(g.size());
    tree = decompose(g, active, readers);
    tree_hash.resize(tree.nodes.size());
    for (size_t i = 0; i < tree.nodes.size(); ++i) tree_hash[i] = hash_tree(static_cast<int>(i));
  }

  uint64_t hash_tree(int t) const {
    const SPNode& s = tree.nodes[static_cast<size_t>(t)];
    if (s.kind == SPNode::kLeaf) return local[static_cast<size_t>(s.node)];
    uint64_t h = s.kind == SPNode::kSeries ? 0x5E41E5 : 0x9A7A11E1;
    if (s.kind == SPNode::kSeries) {
      for (int c : s.children) h = hash_mix(h, hash_tree(c));
    } else {
      std::vector<uint64_t> hs;
      for (int c : s.children) hs.push_back(hash_mix(hash_tree(c), boundary_hash(c)));
      std::sort(hs.begin(), hs.end());
      for (uint64_t x : hs) h = hash_mix(h, x);
    }
    return h;
  }

  // The tensors crossing the boundary of sub-tree t (produced outside by an
  // active node and read inside, or produced inside and read outside).
  std::vector<TensorRef> boundary(int t) const {
    const auto& m = tree.nodes[static_cast<size_t>(t)].members;
    auto inside = [&](NodeId n) { return std::binary_search(m.begin(), m.end(), n); };
    std::set<TensorRef> out;
    for (NodeId n : m) {
      for (const TensorRef& i : g.node(n).inputs)
        if (active[static_cast<size_t>(i.node)] && !inside(i.node)) out.insert(i);
      for (const auto& [c, idx] : consumers[static_cast<size_t>(n)])
        if (!inside(c)) out.insert(g.node(c).inputs[static_cast<size_t>(idx)]);
    }
    for (const TensorRef& o : g.outputs())
      if (inside(o.node)) out.insert(o);
    return {out.begin(), out.end()};
  }
  uint64_t boundary_hash(int t) const {
    uint64_t h = 0xB0;
    for (const TensorRef& r : boundary(t)) h = hash_mix(h, local[static_cast<size_t>(r.node)] + static_cast<uint64_t>(r.output));
    return h;
  }
  // Forward and backward of moving sub-tree t's boundary from `from` to `to`.
  double move(int t, int64_t from, int64_t to) const {
    if (from == to) return 0;
    double s = 0;
    for (const TensorRef& r : boundary(t)) s += cost.move_time(g.shape(r), from, to);
    return 2 * s;
  }

  Result leaf(NodeId id, int64_t lo, int64_t size) const {
    const Node& n = g.node(id);
    if (task_count(g, n) > size) return {};
    Result r{0, 0, 0, 0};
    if (n.op->op_class == OpClass::kParallel) {
      r.comm = cost.parallel_time(g, n, lo, false).total();
    } else {
      r.compute = cost.task_time(g, n).total();
      r.comm = cost.input_transfer_time(g, n, lo).total();
      double weight_bytes = 0;
      for (const TensorRef& i : n.inputs)
        if (weight_behind(g, i) >= 0) weight_bytes += shard_bytes(g.shape(i));
      r.once = cost.update_time(weight_bytes);
      r.compute += r.once;
    }
    for (NodeId f : feeders[static_cast<size_t>(id)])
      if (weight_behind(g, g.node(f).inputs[0]) >= 0) {
        const double sync = cost.parallel_time(g, g.node(f), lo, true).total();
        r.comm += sync, r.once += sync;
      }
    r.time = r.compute + r.comm;
    return r;
  }

  std::vector<int64_t> splits(int64_t size) const {
    std::vector<int64_t> s;
    if (size % 2 == 0) s.push_back(size / 2);
    if (size % 3 == 0) s.push_back(size / 3), s.push_back(2 * size / 3);
    if (size % 4 == 0) s.push_back(size / 4), s.push_back(3 * size / 4);
    return s;
  }

  // The best way to run children[a..b) (sorted) of a parallel node on [lo, lo+size);
  // `choice` receives (j, s): split before j with s devices for the first group, or (0, 0) sequential.
  Result group(const std::vector<int>& kids, size_t a, size_t b, int64_t lo, int64_t size,
               std::map<std::tuple<size_t, size_t, int64_t, int64_t>, std::pair<Result, std::pair<size_t, int64_t>>>& memo) const {
    auto key = std::make_tuple(a, b, lo, size);
    if (auto it = memo.find(key); it != memo.end()) return it->second.first;
    Result best{0, 0, 0, 0};
    for (size_t i = a; i < b; ++i) best = series(best, solve(kids[i], lo, size));
    std::pair<size_t, int64_t> choice{0, 0};
    if (b - a > 1 && size > 1) {
      const bool few = b - a <= 12;
      for (size_t j = a + 1; j < b; ++j) {
        if (!few && j != a + (b - a) / 2) continue;
        for (int64_t s : splits(size)) {
          Result x = group(kids, a, j, lo, s, memo);
          Result y = group(kids, j, b, lo + s, size - s, memo);
          double ymove = 0;
          for (size_t i = j; i < b; ++i) ymove += move(kids[i], lo, lo + s);
          y.time += ymove, y.comm += ymove;
          Result m = x.time >= y.time ? x : y;
          if (m.time < best.time) best = m, choice = {j, s};
        }
      }
    }
    memo[key] = {best, choice};
    return best;
  }

  std::vector<int> sorted_children(int t, int64_t lo, int64_t size) const {
    std::vector<int> kids = tree.nodes[static_cast<size_t>(t)].children;
    std::vector<std::pair<double, uint64_t>> key(tree.nodes.size());
    for (int c : kids) key[static_cast<size_t>(c)] = {solve(c, lo, size).time, tree_hash[static_cast<size_t>(c)]};
    std::stable_sort(kids.begin(), kids.end(), [&](int x, int y) { return key[static_cast<size_t>(x)] > key[static_cast<size_t>(y)]; });
    return kids;
  }

  Result solve(int t, int64_t lo, int64_t size) const {
    const Key key{tree_hash[static_cast<size_t>(t)], lo, size};
    {
      std::shared_lock lock(mu);
      if (auto it = cache.find(key); it != cache.end()) return it->second;
    }
    const SPNode& s = tree.nodes[static_cast<size_t>(t)];
    Result r;
    if (s.kind == SPNode::kLeaf) {
      r = leaf(s.node, lo, size);
    } else if (s.kind == SPNode::kSeries) {
      r = {0, 0, 0, 0};
      for (int c : s.children) r = series(r, solve(c, lo, size));
    } else {
      const auto kids = sorted_children(t, lo, size);
      std::map<std::tuple<size_t, size_t, int64_t, int64_t>, std::pair<Result, std::pair<size_t, int64_t>>> memo;
      r = group(kids, 0, kids.size(), lo, size, memo);
    }
    std::unique_lock lock(mu);
    cache.emplace(key, r);
    return r;
  }

  // Places the nodes of sub-tree t as the solution of solve(t, lo, size) does.
  void assign(int t, int64_t lo, int64_t size, std::vector<MachineView>& views) const {
    const SPNode& s = tree.nodes[static_cast<size_t>(t)];
    if (s.kind == SPNode::kLeaf) {
      views[static_cast<size_t>(s.node)] = {lo, 1};
      for (NodeId f : feeders[static_cast<size_t>(s.node)]) views[static_cast<size_t>(f)] = {lo, 1};
    } else if (s.kind == SPNode::kSeries) {
      for (int c : s.children) assign(c, lo, size, views);
    } else {
      const auto kids = sorted_children(t, lo, size);
      std::map<std::tuple<size_t, size_t, int64_t, int64_t>, std::pair<Result, std::pair<size_t, int64_t>>> memo;
      group(kids, 0, kids.size(), lo, size, memo);
      assign_group(kids, 0, kids.size(), lo, size, memo, views);
    }
  }
  void assign_group(const std::vector<int>& kids, size_t a, size_t b, int64_t lo, int64_t size,
                    std::map<std::tuple<size_t, size_t, int64_t, int64_t>, std::pair<Result, std::pair<size_t, int64_t>>>& memo,
                    std::vector<MachineView>& views) const {
    const auto [j, s] = memo.at(std::make_tuple(a, b, lo, size)).second;
    if (s == 0) {
      for (size_t i = a; i < b; ++i) assign(kids[i], lo, size, views);
      return;
    }
    assign_group(kids, a, j, lo, s, memo, views);
    assign_group(kids, j, b, lo + s, size - s, memo, views);
  }

  // Busy seconds per device under `views`.
  std::vector<double> busy(const std::vector<MachineView>& views) const {
    std::vector<double> out(static_cast<size_t>(cost.devices()), 0.0);
    for (const Node& n : g.nodes()) {
      if (!active[static_cast<size_t>(n.id)]) continue;
      const MachineView v = views[static_cast<size_t>(n.id)];
      const Result r = leaf(n.id, v.start, cost.devices() - v.start);
      const int64_t t = task_count(g, n);
      for (int64_t i = 0; i < t && v.start + i < cost.devices(); ++i) out[static_cast<size_t>(v.start + i)] += r.time;
    }
    return out;
  }
};

}  // namespace

MachineMapper::MachineMapper(const CostModel& cost) : cost_(cost), impl_(std::make_unique<Impl>()) {}
MachineMapper::~MachineMapper() = default;

size_t MachineMapper::cache_size() const {
  std::shared_lock lock(impl_->mu);
  return impl_->cache.size();
}

double MachineMapper::time(const Graph& g) const {
  Problem p(g, cost_, impl_->cache, impl_->mu);
  if (p.tree.root < 0) return 0;
  const Result r = p.solve(p.tree.root, 0, cost_.devices());
  if (r.time == kInf) return kInf;
  std::vector<MachineView> views(g.size());
  p.assign(p.tree.root, 0, cost_.devices(), views);
  const auto mem = memory_per_device(g, views, cost_.devices());
  for (double m : mem)
    if (m > cost_.machine().device.memory_capacity) return kInf;
  return r.time;
}

Strategy MachineMapper::map(const Graph& g) const {
  Strategy s{g, std::vector<MachineView>(g.size()), {}};
  Problem p(g, cost_, impl_->cache, impl_->mu);
  Estimate& e = s.estimate;
  if (p.tree.root < 0) {
    e.feasible = true, e.time = 0;
    return s;
  }
  const Result r = p.solve(p.tree.root, 0, cost_.devices());
  if (r.time == kInf) {
    int64_t most = 0;
    for (const Node& n : g.nodes())
      if (p.active[static_cast<size_t>(n.id)]) most = std::max(most, task_count(g, n));
    e.infeasible = "an operator runs " + std::to_string(most) + " tasks but the machine has " + std::to_string(cost_.devices()) + " devices";
    return s;
  }
  p.assign(p.tree.root, 0, cost_.devices(), s.views);
  e.time = r.time, e.compute = r.compute, e.communication = r.comm, e.once = r.once;
  e.memory = memory_per_device(g, s.views, cost_.devices());
  const auto b = p.busy(s.views);
  e.idle = std::max(0.0, r.time - std::accumulate(b.begin(), b.end(), 0.0) / static_cast<double>(b.size()));
  const double cap = cost_.machine().device.memory_capacity;
  if (e.max_memory() > cap) {
    e.infeasible = "a device needs " + std::to_string(e.max_memory() / 1073741824.0) + " GiB of " + std::to_string(cap / 1073741824.0) + " GiB";
    e.time = kInf;
    return s;
  }
  e.feasible = true;
  return s;
}

double Estimate::max_memory() const { return memory.empty() ? 0.0 : *std::max_element(memory.begin(), memory.end()); }

std::vector<char> source_layout_nodes(const Graph& g) {
  std::vector<char> out(g.size(), 0);
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kParallel || n.inputs.size() != 1) continue;
    const Node& in = g.node(n.inputs[0].node);
    const bool source = in.op->op_class == OpClass::kSource && !in.name.starts_with(kPieceInputPrefix);
    out[static_cast<size_t>(n.id)] = source || out[static_cast<size_t>(in.id)];
  }
  return out;
}

NodeId weight_behind(const Graph& g, TensorRef t) {
  for (;;) {
    const Node& n = g.node(t.node);
    if (n.op->op_class == OpClass::kSource) return n.op->is_weight ? n.id : -1;
    if (n.op->op_class != OpClass::kParallel || n.inputs.size() != 1) return -1;
    t = n.inputs[0];
  }
}

std::vector<double> memory_per_device(const Graph& g, const std::vector<MachineView>& views, int64_t devices, double activations) {
  std::vector<double> mem(static_cast<size_t>(devices), 0.0);
  std::set<std::pair<NodeId, int64_t>> weights_held;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute) continue;
    const MachineView v = views[static_cast<size_t>(n.id)];
    if (v.start < 0) continue;
    const int64_t tasks = task_count(g, n);
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t d = v.start + t * v.stride;
      if (d >= devices) break;
      for (const auto& o : n.outputs) mem[static_cast<size_t>(d)] += activations * shard_bytes(o);
      for (const TensorRef& i : n.inputs) {
        const NodeId w = weight_behind(g, i);
        if (w >= 0 && weights_held.insert({w, d}).second) mem[static_cast<size_t>(d)] += 4 * shard_bytes(g.shape(i));
      }
    }
  }
  return mem;
}

}  // namespace pcgx::search
