#include "pcgx/pcg/placement.h"

#include <algorithm>

#include "pcgx/pcg/error.h"

namespace pcgx {

Placement::Placement(const Graph& g, std::span<const MachineView> views, int64_t devices)
    : g_(g), views_(views.begin(), views.end()), devices_(devices) {
  views_.resize(g.size());
  consumers_ = g.consumers();
  for (auto& c : consumers_) std::stable_sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  have_tasks_.assign(g.size(), 0);
  have_devices_.assign(g.size(), 0);
  have_moves_.assign(g.size(), 0);
  tasks_.resize(g.size());
  task_devices_.resize(g.size());
  moves_.resize(g.size());
  owners_.resize(g.size());
}

const MachineView& Placement::view(NodeId n) const { return views_[static_cast<size_t>(n)]; }

void Placement::set_view(NodeId n, const MachineView& v) {
  views_[static_cast<size_t>(n)] = v;
  have_devices_[static_cast<size_t>(n)] = 0;
  for (auto& o : owners_) o.clear();
}

const TaskTable& Placement::tasks(NodeId n) const {
  const auto i = static_cast<size_t>(n);
  if (!have_tasks_[i]) {
    const Node& node = g_.node(n);
    std::vector<ParallelTensorShape> in;
    for (const TensorRef& t : node.inputs) in.push_back(g_.shape(t));
    tasks_[i] = task_table(*node.op, node.attrs, in, node.outputs);
    have_tasks_[i] = 1;
  }
  return tasks_[i];
}

const std::vector<int64_t>& Placement::task_devices(NodeId n) const {
  const auto i = static_cast<size_t>(n);
  if (!have_devices_[i]) {
    const TaskTable& tt = tasks(n);
    auto& d = task_devices_[i];
    d.resize(static_cast<size_t>(tt.tasks));
    for (int64_t t = 0; t < tt.tasks; ++t) d[static_cast<size_t>(t)] = views_[i].device(t, tt.grid.extents);
    have_devices_[i] = 1;
  }
  return task_devices_[i];
}

const std::vector<Move>& Placement::moves(NodeId n) const {
  const auto i = static_cast<size_t>(n);
  if (!have_moves_[i]) {
    const Node& node = g_.node(n);
    std::vector<ParallelTensorShape> in;
    for (const TensorRef& t : node.inputs) in.push_back(g_.shape(t));
    moves_[i] = shard_moves(node, in);
    have_moves_[i] = 1;
  }
  return moves_[i];
}

namespace {

// The tensors whose owners are being worked out on this thread: owners()
// follows a tensor's readers and, for the copies a replica-axis Split
// leaves unread, goes back to where they come from, so a parallel
// operator that only such a Split reads would come back to itself.
struct Working {
  const Placement* placement;
  TensorRef tensor;
};
thread_local std::vector<Working> working;

struct WorkingOn {
  WorkingOn(const Placement* p, TensorRef t) { working.push_back({p, t}); }
  ~WorkingOn() { working.pop_back(); }
  WorkingOn(const WorkingOn&) = delete;
  WorkingOn& operator=(const WorkingOn&) = delete;
};

bool worked_on(const Placement* p, TensorRef t) {
  return std::any_of(working.begin(), working.end(), [&](const Working& w) { return w.placement == p && w.tensor == t; });
}

}  // namespace

const std::vector<int64_t>& Placement::find_owners(TensorRef t) const {
  auto& per_node = owners_[static_cast<size_t>(t.node)];
  const Node& n = g_.node(t.node);
  if (per_node.empty()) per_node.resize(n.outputs.size());
  auto& out = per_node[static_cast<size_t>(t.output)];
  if (!out.empty()) return out;
  const WorkingOn on(this, t);
  const int64_t shards = n.outputs[static_cast<size_t>(t.output)].num_shards();
  std::vector<int64_t> own(static_cast<size_t>(shards), -1);
  if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs)) {
    const TaskTable& tt = tasks(n.id);
    const auto& dev = task_devices(n.id);
    for (int64_t k = 0; k < tt.tasks; ++k)
      own[static_cast<size_t>(tt.output_shard[static_cast<size_t>(k)][static_cast<size_t>(t.output)])] = dev[static_cast<size_t>(k)];
  } else {
    // The first reader decides; within it the last task or move reading a
    // shard does (the runtime's order of claims, kept so that a strategy's
    // messages do not change).
    for (const auto& [c, idx] : consumers_[static_cast<size_t>(t.node)]) {
      const Node& reader = g_.node(c);
      if (reader.inputs[static_cast<size_t>(idx)] != t) continue;
      std::vector<int64_t> mine(static_cast<size_t>(shards), -1);
      if (reader.op->is_shard_level(reader.attrs)) {
        for (const Move& m : moves(c))
          if (m.input == idx) mine[static_cast<size_t>(m.in_shard)] = owner({c, m.output}, m.out_shard);
      } else {
        const TaskTable& tt = tasks(c);
        const auto& dev = task_devices(c);
        for (int64_t k = 0; k < tt.tasks; ++k) mine[static_cast<size_t>(tt.input_shard[static_cast<size_t>(k)][static_cast<size_t>(idx)])] = dev[static_cast<size_t>(k)];
      }
      for (size_t s = 0; s < own.size(); ++s)
        if (own[s] < 0) own[s] = mine[s];
    }
  }
  // A shard no one reads, of a Concat or Split along the replica axis (the
  // copies a first-copy Split leaves; not a graph output): where it comes from, so that it moves nowhere
  // (on another device it would be a message, and across pipeline stages
  // one no schedule sends). Where that is what is being worked out (a
  // parallel operator only this Split reads), where that operator's shard
  // comes from in turn, so that neither moves.
  const auto& outs = g_.outputs();
  if (n.op->op_class == OpClass::kCompute && n.op->is_shard_level(n.attrs) && std::find(outs.begin(), outs.end(), t) == outs.end())
    for (const Move& m : moves(t.node)) {
      if (m.output != t.output || own[static_cast<size_t>(m.out_shard)] >= 0) continue;
      const TensorRef from = n.inputs[static_cast<size_t>(m.input)];
      if (!worked_on(this, from)) {
        own[static_cast<size_t>(m.out_shard)] = owner(from, m.in_shard);
        continue;
      }
      const Node& p = g_.node(from.node);
      if (p.op->op_class != OpClass::kParallel) continue;
      for (const Move& pm : moves(from.node))
        if (pm.output == from.output && pm.out_shard == m.in_shard && !worked_on(this, p.inputs[static_cast<size_t>(pm.input)])) {
          own[static_cast<size_t>(m.out_shard)] = owner(p.inputs[static_cast<size_t>(pm.input)], pm.in_shard);
          break;
        }
    }
  for (size_t s = 0; s < own.size(); ++s)
    if (own[s] < 0) own[s] = static_cast<int64_t>(s) % std::max<int64_t>(devices_, 1);
  // owners_ may have been resized by the recursion above: index afresh.
  auto& slot = owners_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)];
  slot = std::move(own);
  return slot;
}

int64_t Placement::block_holders(TensorRef t, int64_t block) const {
  const ParallelTensorShape& s = g_.shape(t);
  const int64_t blocks = s.num_blocks();
  std::vector<int64_t> holders;
  for (int64_t c = 0; c < s.replica; ++c) holders.push_back(owner(t, c * blocks + block));
  std::sort(holders.begin(), holders.end());
  return std::unique(holders.begin(), holders.end()) - holders.begin();
}

int64_t Placement::devices_needed() const {
  int64_t need = 1;
  for (const Node& n : g_.nodes()) {
    if (n.op->op_class == OpClass::kSource || n.op->is_shard_level(n.attrs)) continue;
    need = std::max(need, views_[static_cast<size_t>(n.id)].last_device(tasks(n.id).grid.extents) + 1);
  }
  return need;
}

}  // namespace pcgx
