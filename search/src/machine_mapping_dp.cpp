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
#include "pcgx/search/gradient_sync.h"
#include "pcgx/search/graph_hash.h"
#include "pcgx/search/machine_mapping.h"
#include "sp_decomposition.h"

namespace pcgx::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Result {
  double time = kInf;
  double compute = 0;   // the optimizer update included
  double comm = 0;
  double sync = 0;      // gradient synchronization, as bucket shares
  double update = 0;
  double backward = 0;  // of compute + comm: the backward pass
};

Result zero() { return {0, 0, 0, 0, 0, 0}; }

Result series(Result a, const Result& b) {
  a.time += b.time, a.compute += b.compute, a.comm += b.comm, a.sync += b.sync, a.update += b.update, a.backward += b.backward;
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

bool layout_change_pair(const std::string& a, const std::string& b) {
  return (a == "Combine" || a == "Reduce") && (b == "Repartition" || b == "Replicate");
}

// Every compute operator at start 0, stride 1: the DP shifts whole
// sub-graphs to the start of their resource.
std::vector<MachineView> canonical_views(const Graph& g) {
  std::vector<MachineView> v(g.size());
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs)) v[static_cast<size_t>(n.id)] = {0, 1, {}};
  return v;
}

}  // namespace

struct MachineMapper::Impl {
  mutable std::shared_mutex mu;
  std::unordered_map<Key, Result, KeyHash> cache;
};

namespace {

using Memo = std::map<std::tuple<size_t, size_t, int64_t, int64_t>, std::pair<Result, std::pair<size_t, int64_t>>>;

// Everything about one graph the DP needs.
struct Problem {
  const Graph& g;
  const CostModel& cost;
  std::unordered_map<Key, Result, KeyHash>& cache;
  std::shared_mutex& mu;

  SourceLayouts layouts;
  Placement place;
  std::vector<char> active;
  std::vector<std::vector<NodeId>> feeders;  // per active node: layout nodes it pays for
  std::vector<std::vector<std::pair<NodeId, int>>> consumers;
  std::vector<NodeId> fused_tail;            // per node: the parallel node it forms one collective with, or -1
  std::vector<char> is_tail;
  std::vector<std::vector<size_t>> syncs;    // per active node: the weight-layout inputs it synchronizes
  std::vector<uint64_t> local;               // local hashes
  SPTree tree;
  std::vector<uint64_t> tree_hash;

  Problem(const Graph& graph, const CostModel& cm, std::unordered_map<Key, Result, KeyHash>& ca, std::shared_mutex& m)
      : g(graph), cost(cm), cache(ca), mu(m), layouts(source_layouts(graph)), place(graph, canonical_views(graph), cm.devices()) {
    active.assign(g.size(), 0);
    for (const Node& n : g.nodes())
      active[static_cast<size_t>(n.id)] = n.op->op_class != OpClass::kSource && !layouts.is_layout(g, n.id);
    consumers = g.consumers();
    for (auto& c : consumers) std::stable_sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    // A layout node is paid for by its first active reader.
    std::vector<NodeId> owner(g.size(), -1);
    for (size_t i = g.size(); i-- > 0;) {
      if (!layouts.is_layout(g, static_cast<NodeId>(i))) continue;
      NodeId best = -1;
      for (const auto& [c, idx] : consumers[i]) {
        const NodeId o = active[static_cast<size_t>(c)] ? c : owner[static_cast<size_t>(c)];
        if (o >= 0 && (best < 0 || o < best)) best = o;
      }
      owner[i] = best;
    }
    feeders.resize(g.size());
    for (size_t i = 0; i < g.size(); ++i)
      if (owner[i] >= 0) feeders[static_cast<size_t>(owner[i])].push_back(static_cast<NodeId>(i));
    // Layout changes priced as one collective: a parallel node whose only
    // reader is the parallel node completing the pattern.
    fused_tail.assign(g.size(), -1);
    is_tail.assign(g.size(), 0);
    for (const Node& n : g.nodes()) {
      const auto& cs = consumers[static_cast<size_t>(n.id)];
      if (!active[static_cast<size_t>(n.id)] || n.op->op_class != OpClass::kParallel || cs.size() != 1) continue;
      const Node& r = g.node(cs[0].first);
      if (!active[static_cast<size_t>(r.id)] || is_tail[static_cast<size_t>(n.id)] || !layout_change_pair(n.op->name, r.op->name)) continue;
      fused_tail[static_cast<size_t>(n.id)] = r.id;
      is_tail[static_cast<size_t>(r.id)] = 1;
    }
    // A weight layout's gradient is synchronized by its first compute reader.
    syncs.resize(g.size());
    for (const Node& n : g.nodes()) {
      if (!active[static_cast<size_t>(n.id)] || n.op->op_class != OpClass::kCompute) continue;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const TensorRef t = n.inputs[i];
        if (!layouts.weight(t)) continue;
        NodeId first = -1;
        for (const auto& [c, idx] : consumers[static_cast<size_t>(t.node)])
          if (g.node(c).inputs[static_cast<size_t>(idx)] == t && g.node(c).op->op_class == OpClass::kCompute) {
            first = c;
            break;
          }
        if (first == n.id && std::find_if(syncs[static_cast<size_t>(n.id)].begin(), syncs[static_cast<size_t>(n.id)].end(),
                                          [&](size_t j) { return n.inputs[j] == t; }) == syncs[static_cast<size_t>(n.id)].end())
          syncs[static_cast<size_t>(n.id)].push_back(i);
      }
    }
    hash_nodes();
    std::vector<std::vector<NodeId>> readers(g.size());
    tree = decompose(g, active, readers);
    tree_hash.resize(tree.nodes.size());
    for (size_t i = 0; i < tree.nodes.size(); ++i) tree_hash[i] = hash_tree(static_cast<int>(i));
  }

  // What a leaf's cost depends on: its own shapes and attributes, where its
  // inputs' and outputs' shards live (decided by their producers and first
  // readers, placement.h), the layouts it pays for and the collective it
  // forms with a neighbour.
  void hash_nodes() {
    std::vector<uint64_t> own(g.size()), where(g.size(), 0);
    for (const Node& n : g.nodes()) own[static_cast<size_t>(n.id)] = local_hash(n, g);
    // where[n]: the placement of n's outputs, from their producer (compute)
    // or their first reader (everything else); readers come later in id order.
    for (size_t i = g.size(); i-- > 0;) {
      const Node& n = g.node(static_cast<NodeId>(i));
      uint64_t h = own[i];
      if (n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs))
        for (const auto& [c, idx] : consumers[i]) h = hash_mix(hash_mix(h, static_cast<uint64_t>(idx)), hash_mix(own[static_cast<size_t>(c)], where[static_cast<size_t>(c)]));
      where[i] = h;
    }
    local.resize(g.size());
    for (const Node& n : g.nodes()) {
      const auto id = static_cast<size_t>(n.id);
      uint64_t h = hash_mix(own[id], where[id]);
      for (const TensorRef& t : n.inputs)
        h = hash_mix(hash_mix(h, where[static_cast<size_t>(t.node)]), layouts.weight(t) ? 0x3E16 : 0xAC7);
      for (size_t i : syncs[id]) h = hash_mix(h, 0x5C + i);
      for (NodeId f : feeders[id]) h = hash_mix(h, own[static_cast<size_t>(f)] ^ (layouts.weight({f, 0}) ? 1 : 0));
      if (fused_tail[id] >= 0) h = hash_mix(h, hash_mix(own[static_cast<size_t>(fused_tail[id])], where[static_cast<size_t>(fused_tail[id])]));
      if (is_tail[id]) h = hash_mix(h, 0x7A11);
      local[id] = h;
    }
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

  // The synchronizations node `id` pays at `lo`.
  std::vector<SyncGroup> sync_groups(NodeId id, int64_t lo) const {
    std::vector<SyncGroup> out;
    for (size_t i : syncs[static_cast<size_t>(id)])
      if (auto s = cost.sync_group(place, g.node(id).inputs[i], lo)) out.push_back(*s);
    return out;
  }

  Result leaf(NodeId id, int64_t lo, int64_t size) const {
    const Node& n = g.node(id);
    if (task_count(g, n) > size) return {};
    Result r = zero();
    if (n.op->op_class == OpClass::kParallel) {
      Seconds s;
      if (is_tail[static_cast<size_t>(id)]) {
        s = {};
      } else if (const NodeId tail = fused_tail[static_cast<size_t>(id)]; tail >= 0) {
        if (auto one = cost.layout_change_time(place, id, tail, lo)) {
          s = *one;
        } else {
          const Seconds a = cost.parallel_time(place, id, lo), b = cost.parallel_time(place, tail, lo);
          s = {a.forward + b.forward, a.backward + b.backward};
        }
      } else {
        s = cost.parallel_time(place, id, lo);
      }
      r.comm = s.total(), r.backward = s.backward;
    } else {
      const Seconds c = cost.task_time(g, n);
      const Seconds t = cost.input_transfer_time(place, id, lo);
      r.compute = c.total(), r.comm = t.total(), r.backward = c.backward + t.backward;
      double weight_bytes = 0;
      for (const TensorRef& i : n.inputs)
        if (layouts.weight(i)) weight_bytes += shard_bytes(g.shape(i));
      r.update = cost.update_time(weight_bytes);
      r.compute += r.update;
      for (const SyncGroup& s : sync_groups(id, lo)) r.sync += cost.sync_share(s.group, s.bytes);
    }
    r.time = r.compute + r.comm + r.sync;
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
  Result group(const std::vector<int>& kids, size_t a, size_t b, int64_t lo, int64_t size, Memo& memo) const {
    auto key = std::make_tuple(a, b, lo, size);
    if (auto it = memo.find(key); it != memo.end()) return it->second.first;
    Result best = zero();
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
          y.time += ymove, y.comm += ymove, y.backward += ymove / 2;
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
      r = zero();
      for (int c : s.children) r = series(r, solve(c, lo, size));
    } else {
      const auto kids = sorted_children(t, lo, size);
      Memo memo;
      r = group(kids, 0, kids.size(), lo, size, memo);
    }
    std::unique_lock lock(mu);
    cache.emplace(key, r);
    return r;
  }

  // Places the nodes of sub-tree t as the solution of solve(t, lo, size)
  // does; `at` receives each active node's resource.
  void assign(int t, int64_t lo, int64_t size, std::vector<MachineView>& views, std::vector<std::pair<int64_t, int64_t>>& at) const {
    const SPNode& s = tree.nodes[static_cast<size_t>(t)];
    if (s.kind == SPNode::kLeaf) {
      views[static_cast<size_t>(s.node)] = {lo, 1, {}};
      at[static_cast<size_t>(s.node)] = {lo, size};
      for (NodeId f : feeders[static_cast<size_t>(s.node)]) views[static_cast<size_t>(f)] = {lo, 1, {}};
    } else if (s.kind == SPNode::kSeries) {
      for (int c : s.children) assign(c, lo, size, views, at);
    } else {
      const auto kids = sorted_children(t, lo, size);
      Memo memo;
      group(kids, 0, kids.size(), lo, size, memo);
      assign_group(kids, 0, kids.size(), lo, size, memo, views, at);
    }
  }
  void assign_group(const std::vector<int>& kids, size_t a, size_t b, int64_t lo, int64_t size, Memo& memo,
                    std::vector<MachineView>& views, std::vector<std::pair<int64_t, int64_t>>& at) const {
    const auto [j, s] = memo.at(std::make_tuple(a, b, lo, size)).second;
    if (s == 0) {
      for (size_t i = a; i < b; ++i) assign(kids[i], lo, size, views, at);
      return;
    }
    assign_group(kids, a, j, lo, s, memo, views, at);
    assign_group(kids, j, b, lo + s, size - s, memo, views, at);
  }

  // The gradient synchronization replayed against the backward pass: each
  // gradient is ready when the backward pass has gone through its reader,
  // in reverse topological order, scaled to the critical path's backward.
  SyncTimeline replay(const Result& r, const std::vector<std::pair<int64_t, int64_t>>& at) const {
    std::vector<ReadyGradient> grads;
    double done = 0;
    for (size_t i = g.size(); i-- > 0;) {
      if (!active[i]) continue;
      const auto [lo, size] = at[i];
      done += solve_leaf(static_cast<NodeId>(i), lo, size).backward;
      for (SyncGroup& s : sync_groups(static_cast<NodeId>(i), lo)) grads.push_back({done, std::move(s)});
    }
    if (done > 0)
      for (ReadyGradient& x : grads) x.ready *= r.backward / done;
    return replay_buckets(cost.machine(), std::move(grads), r.backward, cost.comm().bucket_bytes);
  }
  Result solve_leaf(NodeId id, int64_t lo, int64_t size) const {
    const Key key{local[static_cast<size_t>(id)], lo, size};
    {
      std::shared_lock lock(mu);
      if (auto it = cache.find(key); it != cache.end()) return it->second;
    }
    return leaf(id, lo, size);
  }

  // Busy seconds per device.
  std::vector<double> busy(const std::vector<std::pair<int64_t, int64_t>>& at) const {
    std::vector<double> out(static_cast<size_t>(cost.devices()), 0.0);
    for (const Node& n : g.nodes()) {
      if (!active[static_cast<size_t>(n.id)]) continue;
      const auto [lo, size] = at[static_cast<size_t>(n.id)];
      const Result r = solve_leaf(n.id, lo, size);
      const int64_t t = task_count(g, n);
      for (int64_t i = 0; i < t && lo + i < cost.devices(); ++i) out[static_cast<size_t>(lo + i)] += r.time - r.sync;
    }
    return out;
  }
};

struct Mapped {
  Result dp;
  SyncTimeline sync;
  std::vector<MachineView> views;
  std::vector<std::pair<int64_t, int64_t>> at;
  double time() const { return dp.time - dp.sync + sync.exposed; }
};

Mapped solve_all(const Problem& p, int64_t devices) {
  Mapped m;
  m.dp = p.solve(p.tree.root, 0, devices);
  if (m.dp.time == kInf) return m;
  m.views.assign(p.g.size(), MachineView{});
  m.at.assign(p.g.size(), {0, devices});
  p.assign(p.tree.root, 0, devices, m.views, m.at);
  m.sync = p.replay(m.dp, m.at);
  return m;
}

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
  const Mapped m = solve_all(p, cost_.devices());
  if (m.dp.time == kInf) return kInf;
  const auto mem = memory_per_device(g, m.views, cost_.devices());
  for (double x : mem)
    if (x > cost_.machine().device.memory_capacity) return kInf;
  return m.time();
}

Strategy MachineMapper::map(const Graph& g) const {
  Strategy s{g, std::vector<MachineView>(g.size()), {}};
  Problem p(g, cost_, impl_->cache, impl_->mu);
  Estimate& e = s.estimate;
  if (p.tree.root < 0) {
    e.feasible = true, e.time = 0;
    return s;
  }
  const Mapped m = solve_all(p, cost_.devices());
  if (m.dp.time == kInf) {
    int64_t most = 0;
    for (const Node& n : g.nodes())
      if (p.active[static_cast<size_t>(n.id)]) most = std::max(most, task_count(g, n));
    e.infeasible = "an operator runs " + std::to_string(most) + " tasks but the machine has " + std::to_string(cost_.devices()) + " devices";
    return s;
  }
  s.views = m.views;
  e.time = m.time();
  e.compute = m.dp.compute;
  e.communication = m.dp.comm + m.sync.exposed;
  e.sync = m.sync.total, e.sync_hidden = m.sync.hidden(), e.buckets = m.sync.buckets;
  e.once = m.dp.update + m.sync.exposed;
  e.memory = memory_per_device(g, s.views, cost_.devices());
  const auto b = p.busy(m.at);
  e.idle = std::max(0.0, e.time - std::accumulate(b.begin(), b.end(), 0.0) / static_cast<double>(b.size()));
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

}  // namespace pcgx::search
