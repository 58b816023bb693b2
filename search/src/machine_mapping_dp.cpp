// Machine-mapping DP over the series-parallel decomposition (see
// machine_mapping.h).
#include <algorithm>
#include <mutex>
#include <numeric>

#include "mapping_problem.h"
#include "pcgx/pcg/step_communication.h"

namespace pcgx::search {

struct MachineMapper::Impl {
  Cache cache;
  ChoiceCache choices;
  std::mutex refused_mu;
  MemoryRefusals refused;
  // Records a graph refused for needing `need` bytes on its fullest
  // device; `plan`: mapped whole (map), not a candidate or a piece of one
  // the search's inner loop timed.
  void refuse(double need, bool plan) {
    std::lock_guard lock(refused_mu);
    ++refused.count;
    if (plan) refused.smallest_need = refused.smallest_need == 0 ? need : std::min(refused.smallest_need, need);
  }
};

std::vector<int64_t> Problem::splits(int64_t size) const {
  std::vector<int64_t> s;
  if (size % 2 == 0) s.push_back(size / 2);
  if (size % 3 == 0) s.push_back(size / 3), s.push_back(2 * size / 3);
  if (size % 4 == 0) s.push_back(size / 4), s.push_back(3 * size / 4);
  return s;
}

// The best way to run children[a..b) (sorted) of a parallel node on [lo, lo+size);
// `memo.best` receives (j, s): split before j with s devices for the first group, or (0, 0) sequential.
Result Problem::group(const std::vector<int>& kids, size_t a, size_t b, int64_t lo, int64_t size, Memo& memo) const {
  auto key = std::make_tuple(a, b, lo, size);
  if (auto it = memo.best.find(key); it != memo.best.end()) return it->second.first;
  Result best = zero();
  for (size_t i = a; i < b; ++i) best = series(best, solve(kids[i], lo, size));
  std::pair<size_t, int64_t> choice{0, 0};
  if (b - a > 1 && size > 1) {
    const bool few = b - a <= 12;
    const std::vector<int64_t> sizes = splits(size);
    // The later part's boundary tensors move from [lo, ...) to [lo + s, ...):
    // each child's move priced once per (lo, s).
    std::vector<const std::vector<double>*> moved;
    for (int64_t s : sizes) {
      std::vector<double>& per = memo.moves[{lo, lo + s}];
      if (per.empty())
        for (int kid : kids) per.push_back(move(kid, lo, lo + s));
      moved.push_back(&per);
    }
    for (size_t j = a + 1; j < b; ++j) {
      if (!few && j != a + (b - a) / 2) continue;
      for (size_t k = 0; k < sizes.size(); ++k) {
        const int64_t s = sizes[k];
        Result x = group(kids, a, j, lo, s, memo);
        Result y = group(kids, j, b, lo + s, size - s, memo);
        double ymove = 0;
        for (size_t i = j; i < b; ++i) ymove += (*moved[k])[i];
        y.time += ymove, y.comm += ymove, y.backward += ymove / 2;
        Result m = x.time >= y.time ? x : y;
        if (m.time < best.time) best = m, choice = {j, s};
      }
    }
  }
  memo.best[key] = {best, choice};
  return best;
}

std::vector<int> Problem::sorted_children(int t, int64_t lo, int64_t size) const {
  std::vector<int> kids = tree.nodes[static_cast<size_t>(t)].children;
  std::vector<std::pair<double, uint64_t>> key(tree.nodes.size());
  for (int c : kids) key[static_cast<size_t>(c)] = {solve(c, lo, size).time, tree_hash[static_cast<size_t>(c)]};
  std::stable_sort(kids.begin(), kids.end(), [&](int x, int y) { return key[static_cast<size_t>(x)] > key[static_cast<size_t>(y)]; });
  return kids;
}

std::vector<uint64_t> Problem::children_signature(const std::vector<int>& kids) const {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < kids.size(); ++i) {
    const uint64_t h = tree_hash[static_cast<size_t>(kids[i])];
    const bool tied = (i > 0 && tree_hash[static_cast<size_t>(kids[i - 1])] == h) ||
                      (i + 1 < kids.size() && tree_hash[static_cast<size_t>(kids[i + 1])] == h);
    out.push_back(tied ? hash_mix(h, boundary_hash(kids[i])) : h);
  }
  return out;
}

Result Problem::solve(int t, int64_t lo, int64_t size) const {
  const Key key{tree_hash[static_cast<size_t>(t)], lo, size};
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const SPNode& s = tree.nodes[static_cast<size_t>(t)];
  Result r;
  if (s.kind == SPNode::kLeaf) {
    r = leaf(s.node, lo, size);
  } else if (s.kind == SPNode::kSeries) {
    r = zero();
    for (int c : s.children) r = series(r, solve(c, lo, size));
  } else {
    const auto kids = sorted_children(t, lo, size);
    auto memo = std::make_shared<Memo>();
    r = group(kids, 0, kids.size(), lo, size, *memo);
    memo->moves.clear();
    if (choices) {
      memo->children = children_signature(kids);
      choices->emplace(key, std::move(memo));
    }
  }
  cache.emplace(key, r);
  return r;
}

// Places the nodes of sub-tree t as the solution of solve(t, lo, size)
// does; `at` receives each active node's resource.
void Problem::assign(int t, int64_t lo, int64_t size, std::vector<MachineView>& views, Resources& at) const {
  const SPNode& s = tree.nodes[static_cast<size_t>(t)];
  if (s.kind == SPNode::kLeaf) {
    views[static_cast<size_t>(s.node)] = {lo, 1, {}};
    at[static_cast<size_t>(s.node)] = {lo, size};
    for (NodeId f : feeders[static_cast<size_t>(s.node)]) views[static_cast<size_t>(f)] = {lo, 1, {}};
  } else if (s.kind == SPNode::kSeries) {
    for (int c : s.children) assign(c, lo, size, views, at);
  } else {
    const auto kids = sorted_children(t, lo, size);
    // The choices solving it made, where kept (the same children, sorted
    // alike); else its DP again.
    if (choices)
      if (const auto it = choices->find(Key{tree_hash[static_cast<size_t>(t)], lo, size});
          it != choices->end() && it->second->children == children_signature(kids)) {
        assign_group(kids, 0, kids.size(), lo, size, *it->second, views, at);
        return;
      }
    Memo memo;
    group(kids, 0, kids.size(), lo, size, memo);
    assign_group(kids, 0, kids.size(), lo, size, memo, views, at);
  }
}
void Problem::assign_group(const std::vector<int>& kids, size_t a, size_t b, int64_t lo, int64_t size, const Memo& memo,
                  std::vector<MachineView>& views, Resources& at) const {
  const auto [j, s] = memo.best.at(std::make_tuple(a, b, lo, size)).second;
  if (s == 0) {
    for (size_t i = a; i < b; ++i) assign(kids[i], lo, size, views, at);
    return;
  }
  assign_group(kids, a, j, lo, s, memo, views, at);
  assign_group(kids, j, b, lo + s, size - s, memo, views, at);
}

namespace {

// The gradient synchronization replayed against the backward pass: each
// gradient is ready when the backward pass has gone through its reader
// (reverse topological order), scaled to the critical path's backward. In
// a graph processed in M micro-batches (pipeline.h) the buckets start in
// the last micro-batch's backward, the last 1/M of it; under ZeRO 2 in
// every micro-batch's.
SyncTimeline replay(const Problem& p, const Placement& w, const Mapped& m) {
  // ZeRO 3: the gathers beside both passes. With every block under the
  // persistence threshold none is gathered for use: stage 2's buckets.
  bool gathers = false;
  if (shards_weights(highest_zero(p.cost.recipe())))
    for (size_t i = 0; i < p.g.size() && !gathers; ++i) gathers = p.active[i] && p.gathers_for_use(static_cast<NodeId>(i));
  if (gathers) {
    std::vector<ShardedStep> ops;
    int64_t micro = 1;
    for (size_t i = 0; i < p.g.size(); ++i) {
      if (!p.active[i]) continue;
      const Result& r = m.leaves[i];
      ShardedStep& op = ops.emplace_back();
      op.forward = r.time - r.sync - r.update - r.backward, op.backward = r.backward;
      const Result c = p.comm(w, static_cast<NodeId>(i), 0);
      op.messages_forward = c.comm - c.backward, op.messages_backward = c.backward;
      op.levels = p.comm_levels(w, static_cast<NodeId>(i));
      op.gathers = p.gathers_for_use(static_cast<NodeId>(i));
      op.grads = p.sync_groups(w, static_cast<NodeId>(i), 0);
      op.rounds = node_slices(p.g, p.g.node(static_cast<NodeId>(i)));
      // A weight gathered once per step (SyncGroup::rounds 1): 1/M of it per visit.
      for (const SyncGroup& s : op.grads) op.gather += p.cost.use_gather_time(s) * (s.rounds > 1 ? 1.0 : 1.0 / static_cast<double>(op.rounds));
      micro = std::max(micro, op.rounds);
    }
    const double forward = m.dp.time - m.dp.sync - m.dp.update - m.dp.backward;
    return replay_sharded(p.cost, ops, forward, m.dp.backward, micro);
  }
  std::vector<ReadyGradient> grads;
  std::vector<LinkBusy> busy;  // each node's own messages, at the end of its backward
  double done = 0;
  int64_t micro = 1;
  // Products whose weight products run beside the collective carrying
  // their input gradient (overlap_grad_input): their gradients are ready
  // at that collective's backward, after its re-run, in the group's
  // order (each when those after it remain, `after` seconds).
  std::vector<NodeId> ready_with(p.g.size(), -1);
  std::vector<double> after(p.g.size(), 0.0);
  struct Pending {
    double after;
    SyncGroup sync;
    double needed;
  };
  std::vector<std::vector<Pending>> pending(p.g.size());
  // When each node's first forward starts (overlap_param_gather): its
  // share of the forward pass before it, in the first micro-batch's.
  std::vector<double> needed(p.g.size(), 0.0);
  {
    double before = 0;
    for (size_t i = 0; i < p.g.size(); ++i) {
      if (!p.active[i]) continue;
      needed[i] = before;
      const Result& r = m.leaves[i];
      before += std::max(0.0, r.time - r.sync - r.update - r.backward);
      for (const ParallelTensorShape& o : p.g.node(static_cast<NodeId>(i)).outputs) micro = std::max(micro, o.slices());
    }
    const double first = std::max(0.0, m.dp.time - m.dp.sync - m.dp.update - m.dp.backward) / static_cast<double>(micro);
    for (double& x : needed) x = before > 0 ? x * first / before : 0.0;
  }
  for (size_t i = 0; i < p.g.size(); ++i)
    if (p.active[i] && p.g.node(static_cast<NodeId>(i)).op->op_class == OpClass::kParallel)
      if (const std::vector<NodeId> beside = p.products_beside(static_cast<NodeId>(i)); !beside.empty())
        for (size_t k = beside.size(); k-- > 0;) {
          ready_with[static_cast<size_t>(beside[k])] = static_cast<NodeId>(i);
          if (k + 1 < beside.size()) after[static_cast<size_t>(beside[k])] = after[static_cast<size_t>(beside[k + 1])] + p.weight_gradient_seconds(beside[k + 1]);
        }
  for (size_t i = p.g.size(); i-- > 0;) {
    if (!p.active[i]) continue;
    const auto id = static_cast<NodeId>(i);
    done += m.leaves[i].backward;
    // (A collective hidden behind its readers' weight products holds its
    // links for the whole of it all the same.)
    const bool collective = p.g.node(id).op->op_class == OpClass::kParallel && !p.is_tail[i];
    // (Priced only where products run beside it: beside_products reads it
    // nowhere else, and at thousands of devices the pricing is not free.)
    const Seconds own = collective && !p.beside[i].empty() ? p.parallel_seconds(w, id, 0) : Seconds{};
    const Problem::Beside beside = collective ? p.beside_products(w, id, own) : Problem::Beside{};
    const double hidden = beside.hidden;
    if (const double c = std::min(p.comm(w, id, 0).backward + hidden, m.leaves[i].backward + hidden); c > 0)
      if (const uint32_t levels = p.comm_levels(w, id)) busy.push_back({done - c, done, levels});
    for (const ParallelTensorShape& o : p.g.node(id).outputs) micro = std::max(micro, o.slices());
    if (const NodeId with = ready_with[i]; with >= 0) {
      for (SyncGroup& s : p.sync_groups(w, id, 0)) pending[static_cast<size_t>(with)].push_back({after[i], std::move(s), needed[i]});
    } else {
      for (SyncGroup& s : p.sync_groups(w, id, 0)) grads.push_back({done, std::move(s), 0, needed[i]});
    }
    // The collective: its group's weight products end before what of its
    // backward outlasts them.
    for (Pending& x : pending[i]) grads.push_back({done - beside.left - x.after, std::move(x.sync), 0, x.needed});
  }
  if (micro > 1 && syncs_every_micro_batch(highest_zero(p.cost.recipe())) && done > 0) {
    // ZeRO 2: every micro-batch's buckets in its own backward. One stage
    // runs each micro-batch's forward then its backward (1F1B with one
    // stage), so micro-batch k's backward is [k (f + b) + f, (k + 1)(f + b)]
    // from the step's start, and a bucket not done by then runs beside
    // the next micro-batch's forward.
    const double M = static_cast<double>(micro);
    const double b = m.dp.backward / M, f = (m.dp.time - m.dp.sync - m.dp.update - m.dp.backward) / M;
    std::vector<ReadyGradient> every;
    std::vector<LinkBusy> every_busy;
    for (int64_t k = 0; k < micro; ++k) {
      const double start = static_cast<double>(k) * (f + b) + f;
      auto at = [&](double x) { return start + x * b / done; };
      for (const ReadyGradient& x : grads)  // (a weight synchronized once: with the last micro-batch's)
        if (x.sync.rounds > 1 || k + 1 == micro) every.push_back({at(x.ready), x.sync, static_cast<int32_t>(k), x.needed});
      for (const LinkBusy& x : busy) every_busy.push_back({at(x.start), at(x.end), x.levels});
    }
    return replay_buckets(p.cost, std::move(every), M * (f + b), p.cost.comm().bucket_bytes, every_busy);
  }
  // Into the last micro-batch's backward, the last 1/M of the pass.
  const double last = m.dp.backward / static_cast<double>(micro);
  auto scale = [&](double at) { return m.dp.backward - last + at * last / done; };
  if (done > 0) {
    for (ReadyGradient& x : grads) x.ready = scale(x.ready);
    for (LinkBusy& b : busy) b.start = scale(b.start), b.end = scale(b.end);
  }
  return replay_buckets(p.cost, std::move(grads), m.dp.backward, p.cost.comm().bucket_bytes, busy);
}

// Busy seconds per device: each active node's time on the devices it runs on.
std::vector<double> busy(const Problem& p, const Placement& w, const Mapped& m) {
  std::vector<double> out(static_cast<size_t>(p.cost.devices()), 0.0);
  auto add = [&](int64_t d, double t) {
    if (d >= 0 && d < p.cost.devices()) out[static_cast<size_t>(d)] += t;
  };
  for (const Node& n : p.g.nodes()) {
    if (!p.active[static_cast<size_t>(n.id)]) continue;
    const Result& r = m.leaves[static_cast<size_t>(n.id)];
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs)) {
      for (int64_t d : w.task_devices(n.id)) add(d, r.time - r.sync);
    } else {
      std::vector<int64_t> devices;
      for (size_t o = 0; o < n.outputs.size(); ++o)
        for (int64_t d : w.owners({n.id, static_cast<int32_t>(o)}))
          if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
      for (int64_t d : devices) add(d, r.time - r.sync);
    }
  }
  return out;
}

struct Solved {
  Mapped m;
  std::unique_ptr<Placement> where;
};

Solved solve_and_place(const Problem& p, int64_t devices) {
  Solved s;
  Mapped& m = s.m;
  m.dp = p.solve(p.tree.root, 0, devices);
  if (m.dp.time == kInf) return s;
  m.views.assign(p.g.size(), MachineView{});
  m.at.assign(p.g.size(), {0, devices});
  p.assign(p.tree.root, 0, devices, m.views, m.at);
  m.leaves.assign(p.g.size(), zero());
  for (const Node& n : p.g.nodes())
    if (p.active[static_cast<size_t>(n.id)]) {
      const auto [lo, size] = m.at[static_cast<size_t>(n.id)];
      m.leaves[static_cast<size_t>(n.id)] = p.solve_leaf(n.id, lo, size);
    }
  s.where = std::make_unique<Placement>(p.g, m.views, devices);
  refine_views(p, *s.where, m);
  settle_copies(p, *s.where, m);
  m.sync = replay(p, *s.where, m);
  m.overhead = p.cost.step_overhead(*s.where);
  return s;
}

}  // namespace

Mapped solve_all(const Problem& p, int64_t devices) { return std::move(solve_and_place(p, devices).m); }

MachineMapper::MachineMapper(const CostModel& cost) : cost_(cost), impl_(std::make_unique<Impl>()) {}
MachineMapper::MachineMapper(const CostModel& cost, int64_t stage_devices)
    : cost_(cost), stage_devices_(stage_devices), impl_(std::make_unique<Impl>()) {}

std::optional<NodeId> one_stage_operator(const Placement& where, const SourceLayouts& layouts, int64_t stage_devices) {
  if (stage_devices <= 0) return std::nullopt;
  const Graph& g = where.graph();
  const std::vector<NodeRun> runs = node_runs(where, layouts, RunDetail::kKinds);
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || runs[static_cast<size_t>(n.id)].kind != NodeRun::Kind::kTasks || layouts.is_layout(g, n.id))
      continue;
    const std::vector<int64_t> tasks = where.task_devices(n.id);
    if (tasks.empty()) continue;
    const auto [lo, hi] = std::minmax_element(tasks.begin(), tasks.end());
    if (*lo / stage_devices == *hi / stage_devices) return n.id;
  }
  return std::nullopt;
}

std::string one_stage_reason(const Placement& where, NodeId id, int64_t stage_devices) {
  const std::vector<int64_t> tasks = where.task_devices(id);
  const int64_t stage = *std::min_element(tasks.begin(), tasks.end()) / stage_devices;
  return describe(where.graph().node(id)) + " runs on stage " + std::to_string(stage + 1) + "'s devices (" + std::to_string(stage * stage_devices) +
         ".." + std::to_string((stage + 1) * stage_devices - 1) +
         ") only: an interlaced chunk's operators run on several stages' (more tasks than a stage has devices)";
}
MachineMapper::~MachineMapper() = default;

MachineMapper::MemoryRefusals MachineMapper::memory_refusals() const {
  std::lock_guard lock(impl_->refused_mu);
  return impl_->refused;
}

size_t MachineMapper::cache_size() const {
  return impl_->cache.size();
}

double MachineMapper::time(const Graph& g) const {
  Problem p(g, cost_, impl_->cache, &impl_->choices);
  if (p.tree.root < 0) return 0;
  const Solved solved = solve_and_place(p, cost_.devices());
  const Mapped& m = solved.m;
  if (m.dp.time == kInf || one_stage_operator(*solved.where, p.layouts, stage_devices_)) return kInf;
  const auto mem = memory_per_device(*solved.where, cost_.recipe(), cost_.micro_batches_in_flight());
  const double need = *std::max_element(mem.begin(), mem.end());
  if (need > cost_.machine().device.memory_capacity) {
    impl_->refuse(need, false);
    return kInf;
  }
  return m.time();
}

Strategy MachineMapper::map(const Graph& g) const {
  Strategy s{g, std::vector<MachineView>(g.size()), {}};
  Problem p(g, cost_, impl_->cache, &impl_->choices);
  Estimate& e = s.estimate;
  if (p.tree.root < 0) {
    e.feasible = true, e.time = 0;
    return s;
  }
  const Solved solved = solve_and_place(p, cost_.devices());
  const Mapped& m = solved.m;
  if (m.dp.time == kInf) {
    int64_t most = 0;
    for (const Node& n : g.nodes())
      if (p.active[static_cast<size_t>(n.id)]) most = std::max(most, task_count(g, n, p.consumers));
    e.infeasible = "an operator runs " + std::to_string(most) + " tasks but the machine has " + std::to_string(cost_.devices()) + " devices";
    return s;
  }
  s.views = m.views;
  if (const auto one = one_stage_operator(*solved.where, p.layouts, stage_devices_)) {
    e.infeasible = one_stage_reason(*solved.where, *one, stage_devices_);
    return s;
  }
  e.time = m.time();
  e.compute = m.dp.compute + m.overhead, e.overhead = m.overhead, e.update = m.dp.update;
  e.communication = m.dp.comm + m.sync.exposed + m.sync.gather;
  e.sync = m.sync.total, e.sync_hidden = m.sync.hidden(), e.buckets = m.sync.buckets, e.gather = m.sync.gather;
  e.param_gathers = m.sync.param_gathers;
  // Operators whose weights are gathered before use: a block at the
  // persistence threshold with copies on several devices (a sync group).
  if (shards_weights(highest_zero(cost_.recipe())))
    for (size_t i = 0; i < g.size(); ++i) {
      if (!p.active[i] || !p.gathers_for_use(static_cast<NodeId>(i))) continue;
      const std::vector<SyncGroup> groups = p.sync_groups(*solved.where, static_cast<NodeId>(i), 0);
      e.gathered_for_use += std::any_of(groups.begin(), groups.end(), [](const SyncGroup& x) { return x.gathered_for_use; });
    }
  e.once = m.dp.update + m.sync.exposed + m.sync.gather;
  e.backward = m.dp.backward;
  e.memory = memory_per_device(*solved.where, cost_.recipe(), cost_.micro_batches_in_flight());
  std::vector<char> computes(static_cast<size_t>(cost_.devices()), 0);
  for (const Node& n : g.nodes())
    if (p.active[static_cast<size_t>(n.id)] && n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs))
      for (int64_t d : solved.where->task_devices(n.id))
        if (d >= 0 && d < cost_.devices()) computes[static_cast<size_t>(d)] = 1;
  e.devices_used = std::count(computes.begin(), computes.end(), 1);
  e.bytes = p.step_bytes(*solved.where, false);
  const auto b = busy(p, *solved.where, m);
  e.idle = std::max(0.0, e.time - std::accumulate(b.begin(), b.end(), 0.0) / static_cast<double>(b.size()));
  const double cap = cost_.machine().device.memory_capacity;
  if (e.max_memory() > cap) {
    impl_->refuse(e.max_memory(), true);
    e.infeasible = "a device needs " + std::to_string(e.max_memory() / 1073741824.0) + " GiB of " + std::to_string(cap / 1073741824.0) + " GiB";
    e.time = kInf;
    return s;
  }
  e.feasible = true;
  return s;
}

double Estimate::max_memory() const { return memory.empty() ? 0.0 : *std::max_element(memory.begin(), memory.end()); }

}  // namespace pcgx::search
