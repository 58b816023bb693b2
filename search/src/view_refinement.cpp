// Multi-dimensional machine views (Unity, Section 3.2): after the DP has
// given every sub-graph its devices, each compute operator that runs on the
// whole machine may lay its task grid over the devices in another order
// (any permutation of its grid dimensions, innermost first) and, when it
// has fewer tasks than devices, spread its outer dimensions so that its
// tasks land on different nodes. A tensor-parallel group then sits inside
// a node (stride 1) while data parallelism spans nodes.
//
// The choice is coordinate descent (as AutoDDL searches its SBP states):
// each operator in turn takes the view that makes the communication it
// takes part in cheapest (its inputs' collectives, which follow it as their
// first reader, its outputs' readers and its weights' synchronization),
// the others' views fixed, until a pass changes nothing. Only the sums of
// series compositions change, so the DP's total moves by exactly the
// change of the nodes touched.
#include <algorithm>
#include <map>
#include <set>

#include "mapping_problem.h"

namespace pcgx::search {
namespace {

constexpr int kSweeps = 3;

// Device strides for a grid with `extents`: dimension `outer` outermost
// (spread by `spread`), the others inside it in canonical order.
std::vector<int64_t> outer_strides(const std::vector<int64_t>& extents, size_t outer, int64_t spread) {
  std::vector<int64_t> strides(extents.size(), 0);
  int64_t s = 1;
  for (size_t j = extents.size(); j-- > 0;)
    if (j != outer && extents[j] > 1) strides[j] = s, s *= extents[j];
  strides[outer] = s * spread;
  return strides;
}

bool is_canonical(const std::vector<int64_t>& extents, const std::vector<int64_t>& strides) {
  int64_t row = 1;
  for (size_t j = extents.size(); j-- > 0;) {
    if (extents[j] > 1 && strides[j] != row) return false;
    row *= extents[j];
  }
  return true;
}

MachineView view_of(const std::vector<int64_t>& extents, std::vector<int64_t> strides) {
  if (is_canonical(extents, strides)) return {0, 1, {}};
  return {0, 1, std::move(strides)};
}

// Views of a task grid on devices [0, devices): the canonical one, and for
// each non-trivial dimension, that dimension outermost (the one that spans
// nodes), packed or, with fewer tasks than devices, spread over them.
std::vector<MachineView> candidate_views(const std::vector<int64_t>& extents, int64_t devices) {
  int64_t tasks = 1;
  for (int64_t e : extents) tasks *= e;
  const int64_t spread = tasks > 0 && devices % tasks == 0 ? devices / tasks : 1;
  std::vector<MachineView> out{{0, 1, {}}};
  for (size_t d = 0; d < extents.size(); ++d) {
    if (extents[d] <= 1) continue;
    for (int64_t f : {int64_t{1}, spread}) {
      MachineView v = view_of(extents, outer_strides(extents, d, f));
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(std::move(v));
    }
  }
  return out;
}

// Megatron's layout: the grid dimension that splits the samples (output 0's
// first dimension, or for a loss input 0's) outermost and spread over the
// devices, the others inside a node.
MachineView samples_outside(const TaskGrid& grid, int64_t devices) {
  int s = -1;
  if (!grid.outputs.empty() && !grid.outputs[0].dim_task.empty()) s = grid.outputs[0].dim_task[0];
  if (s < 0 && !grid.inputs.empty() && !grid.inputs[0].dim_task.empty()) s = grid.inputs[0].dim_task[0];
  if (s < 0 || grid.extents[static_cast<size_t>(s)] <= 1) return {0, 1, {}};
  const int64_t tasks = grid.num_tasks();
  return view_of(grid.extents, outer_strides(grid.extents, static_cast<size_t>(s), devices % tasks == 0 ? devices / tasks : 1));
}

// The active nodes whose communication depends on node n's view: n itself,
// the parallel operators upstream whose outputs live with n (their first
// reader) and the other readers of those outputs, n's readers, and the
// partners of any of them in a fused layout change.
std::vector<NodeId> touched_by(const Problem& p, NodeId n) {
  std::set<NodeId> s{n};
  std::vector<NodeId> stack{n};
  auto compute = [&](NodeId x) {
    const Node& node = p.g.node(x);
    return node.op->op_class == OpClass::kCompute && !node.op->is_shard_level(node.attrs);
  };
  while (!stack.empty()) {
    const NodeId x = stack.back();
    stack.pop_back();
    for (const TensorRef& t : p.g.node(x).inputs) {
      if (compute(t.node) || p.g.node(t.node).op->op_class == OpClass::kSource) continue;
      if (p.active[static_cast<size_t>(t.node)] && s.insert(t.node).second) stack.push_back(t.node);
      for (const auto& [c, idx] : p.consumers[static_cast<size_t>(t.node)])
        if (p.active[static_cast<size_t>(c)]) s.insert(c);
    }
  }
  for (const auto& [c, idx] : p.consumers[static_cast<size_t>(n)])
    if (p.active[static_cast<size_t>(c)]) s.insert(c);
  // The readers of a tied parameter's copies of a layout n reads: whether
  // the copy is held with it (synchronized once) follows n's view.
  for (const auto& [copy, c] : p.copies)
    if (std::find(p.g.node(n).inputs.begin(), p.g.node(n).inputs.end(), c.of) != p.g.node(n).inputs.end())
      for (const auto& [r, idx] : p.consumers[static_cast<size_t>(copy.node)])
        if (p.active[static_cast<size_t>(r)]) s.insert(r);
  std::vector<NodeId> out(s.begin(), s.end());
  for (NodeId x : std::vector<NodeId>(out)) {
    if (const NodeId tail = p.fused_tail[static_cast<size_t>(x)]; tail >= 0) out.push_back(tail);
    if (p.is_tail[static_cast<size_t>(x)]) out.push_back(p.fused_head[static_cast<size_t>(x)]);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

void refine_views(const Problem& p, Placement& w, Mapped& m) {
  const int64_t devices = p.cost.devices();
  // The compute operators on the whole machine with a choice of views.
  std::vector<NodeId> free;
  std::vector<std::vector<MachineView>> choices;
  std::vector<std::vector<NodeId>> touches;  // per free operator, touched_by
  std::set<NodeId> touched;
  for (const Node& n : p.g.nodes()) {
    const auto id = static_cast<size_t>(n.id);
    if (!p.active[id] || n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs)) continue;
    if (m.at[id] != std::make_pair(int64_t{0}, devices)) continue;  // inside a split: the DP's view
    auto views = candidate_views(w.tasks(n.id).grid.extents, devices);
    if (views.size() <= 1) continue;
    free.push_back(n.id);
    choices.push_back(std::move(views));
    touches.push_back(touched_by(p, n.id));
    for (NodeId x : touches.back()) touched.insert(x);
  }
  if (free.empty()) return;
  // A touched node's communication depends only on the views of the free
  // operators that touch it (touched_by's contract), so it is computed
  // once per combination of their views: the descent revisits the same
  // combinations (the current view beside each candidate, later sweeps).
  // A free operator's view is held as its index in `choices`, -1 for one
  // outside them (the DP's, before the descent starts).
  std::vector<int> chosen(free.size(), -1);
  std::map<NodeId, std::vector<size_t>> deps;  // touched node -> the free operators touching it
  for (size_t i = 0; i < free.size(); ++i)
    for (NodeId x : touches[i]) deps[x].push_back(i);
  std::map<NodeId, std::map<std::vector<int>, Result>> memo;
  std::vector<int> key;
  auto comm = [&](NodeId x) {
    const auto& d = deps[x];
    key.clear();
    for (size_t i : d) key.push_back(chosen[i]);
    const bool known = std::find(key.begin(), key.end(), -1) == key.end();
    if (!known) return p.comm(w, x, 0);
    auto& table = memo[x];
    if (auto it = table.find(key); it != table.end()) return it->second;
    const Result r = p.comm(w, x, 0);
    table.emplace(key, r);
    return r;
  };
  auto index_of = [&](size_t i, const MachineView& v) {
    const auto& c = choices[i];
    const auto it = std::find(c.begin(), c.end(), v);
    return it == c.end() ? -1 : static_cast<int>(it - c.begin());
  };
  auto set = [&](size_t i, const MachineView& v) { w.set_view(free[i], v), chosen[i] = index_of(i, v); };
  std::map<NodeId, Result> before;  // each touched node's communication under the DP's views
  double canonical = 0;
  for (NodeId x : touched) {
    const Result r = p.comm(w, x, 0);
    before.emplace(x, r), canonical += r.time;
  }
  auto cost_of = [&](const auto& nodes) {
    double s = 0;
    for (NodeId x : nodes) s += comm(x).time;
    return s;
  };
  // Two starting points: the DP's views, or samples across nodes everywhere.
  for (size_t i = 0; i < free.size(); ++i) set(i, samples_outside(w.tasks(free[i]).grid, devices));
  if (cost_of(touched) < canonical) {
    for (NodeId n : free) m.views[static_cast<size_t>(n)] = w.view(n);
  } else {
    for (size_t i = 0; i < free.size(); ++i) set(i, m.views[static_cast<size_t>(free[i])]);
  }
  // Then each operator in turn takes its cheapest view.
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    bool changed = false;
    for (size_t i = 0; i < free.size(); ++i) {
      const NodeId n = free[i];
      const auto& nodes = touches[i];
      const MachineView current = w.view(n);
      MachineView best = current;
      double best_cost = cost_of(nodes);
      for (const MachineView& v : choices[i]) {
        if (v == current) continue;
        set(i, v);
        const double c = cost_of(nodes);
        if (c < best_cost * (1 - 1e-12)) best_cost = c, best = v;
      }
      set(i, best);
      if (best != current) m.views[static_cast<size_t>(n)] = best, changed = true;
    }
    if (!changed) break;
  }
  // The change of every touched node's communication.
  for (const auto& [x, old] : before) {
    const Result now = p.comm(w, x, 0);
    Result& leaf = m.leaves[static_cast<size_t>(x)];
    const double dcomm = now.comm - old.comm, dsync = now.sync - old.sync, dback = now.backward - old.backward;
    leaf.comm += dcomm, leaf.sync += dsync, leaf.backward += dback, leaf.time += dcomm + dsync;
    m.dp.comm += dcomm, m.dp.sync += dsync, m.dp.backward += dback, m.dp.time += dcomm + dsync;
  }
}

void settle_copies(const Problem& p, const Placement& w, Mapped& m) {
  if (p.copies.empty()) return;
  const int64_t devices = p.cost.devices();
  for (const Node& n : p.g.nodes()) {
    const auto i = static_cast<size_t>(n.id);
    if (!p.active[i] || n.op->op_class == OpClass::kParallel) continue;
    // On the whole machine, in series (as refine_views' operators): the
    // DP's total moves by the node's change. (Inside a split the DP keeps
    // the slower branch; its figure stands.)
    if (m.at[i] != std::make_pair(int64_t{0}, devices)) continue;
    if (std::none_of(n.inputs.begin(), n.inputs.end(), [&](const TensorRef& t) { return p.copies.count(t) > 0; })) continue;
    Result& leaf = m.leaves[i];
    const double dsync = p.comm(w, n.id, 0).sync - leaf.sync, dupdate = p.update_seconds(w, n.id, 0) - leaf.update;
    leaf.sync += dsync, leaf.update += dupdate, leaf.compute += dupdate, leaf.time += dsync + dupdate;
    m.dp.sync += dsync, m.dp.update += dupdate, m.dp.compute += dupdate, m.dp.time += dsync + dupdate;
  }
}

}  // namespace pcgx::search
