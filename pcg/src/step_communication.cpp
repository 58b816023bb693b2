#include "pcgx/pcg/step_communication.h"

#include <algorithm>
#include <optional>

#include "pcgx/pcg/recompute_plan.h"

namespace pcgx {
namespace {

// The groups of an all-reduce from tensor `in` to tensor `out`, summing `k`
// slots into `k` copies, when every group's inputs and outputs sit one each
// on the same k devices; otherwise nothing.
std::optional<std::vector<std::vector<AllReduceMember>>> all_reduce_groups(const Placement& p, TensorRef in, TensorRef out,
                                                                           int64_t k) {
  const Graph& g = p.graph();
  const ParallelTensorShape& from = g.shape(in);
  const ParallelTensorShape& to = g.shape(out);
  if (from.replica != to.replica || from.num_blocks() != to.num_blocks() || from.replica % k != 0) return std::nullopt;
  const int64_t blocks = from.num_blocks();
  std::vector<std::vector<AllReduceMember>> groups;
  std::vector<int> ins, outs, a, c;
  for (int64_t first = 0; first < from.replica; first += k)
    for (int64_t b = 0; b < blocks; ++b) {
      ins.clear(), outs.clear();
      for (int64_t i = 0; i < k; ++i) {
        const int64_t shard = (first + i) * blocks + b;
        ins.push_back(static_cast<int>(p.owner(in, shard))), outs.push_back(static_cast<int>(p.owner(out, shard)));
      }
      a = ins, c = outs;
      std::sort(a.begin(), a.end()), std::sort(c.begin(), c.end());
      if (a != c || std::adjacent_find(a.begin(), a.end()) != a.end()) return std::nullopt;
      // Each member's input, and the output on its device.
      std::vector<AllReduceMember> group;
      for (int64_t i = 0; i < k; ++i) {
        const auto j = std::find(outs.begin(), outs.end(), ins[static_cast<size_t>(i)]) - outs.begin();
        group.push_back({ins[static_cast<size_t>(i)], static_cast<int32_t>((first + i) * blocks + b),
                         static_cast<int32_t>((first + j) * blocks + b)});
      }
      groups.push_back(std::move(group));
    }
  return groups;
}

double elements(const ParallelTensorShape& s) { return static_cast<double>(s.shard_elements()); }

}  // namespace

namespace {

// Nodes whose shards move without a kernel (node_runs' kMoves before any
// fusion): shard-level operators that are not sources or sliced layouts.
bool moves(const Graph& g, const SourceLayouts& layouts, NodeId n) {
  const Node& node = g.node(n);
  return node.op->op_class != OpClass::kSource && !layouts.sliced(n) && node.op->is_shard_level(node.attrs);
}

// The partner completing a layout change that `n` starts, where all move.
std::optional<NodeId> fused_partner(const Graph& g, const SourceLayouts& layouts, const Node& n, const Readers& consumers) {
  if (!moves(g, layouts, n.id) || n.op->data_move == DataMove::kAllReduce) return std::nullopt;
  const auto partner = layout_change_partner(g, n.id, consumers);
  if (!partner || !moves(g, layouts, *partner)) return std::nullopt;
  for (NodeId x : layout_change_inside(g, n.id, *partner))
    if (!moves(g, layouts, x)) return std::nullopt;
  return partner;
}

}  // namespace

std::vector<NodeId> layout_change_partners(const Graph& g, const SourceLayouts& layouts) {
  std::vector<NodeId> partners(g.size(), -1);
  const auto consumers = g.consumers();
  for (const Node& n : g.nodes())
    if (const auto p = fused_partner(g, layouts, n, consumers)) {
      partners[static_cast<size_t>(n.id)] = *p;
      for (NodeId x : layout_change_inside(g, n.id, *p)) partners[static_cast<size_t>(x)] = *p;
    }
  return partners;
}

std::vector<char> layout_change_heads(const Graph& g, const SourceLayouts& layouts) {
  const std::vector<NodeId> partners = layout_change_partners(g, layouts);
  std::vector<char> heads(g.size(), 0);
  for (size_t k = 0; k < g.size(); ++k) heads[k] = partners[k] >= 0;
  return heads;
}

std::vector<NodeRun> node_runs(const Placement& p, const SourceLayouts& layouts, RunDetail detail) {
  const Graph& g = p.graph();
  std::vector<NodeRun> runs(g.size());
  for (const Node& n : g.nodes()) {
    NodeRun& r = runs[static_cast<size_t>(n.id)];
    if (n.op->op_class == OpClass::kSource) r.kind = NodeRun::Kind::kDone;
    else if (layouts.sliced(n.id)) r.kind = NodeRun::Kind::kSliced;
    else if (n.op->is_shard_level(n.attrs)) r.kind = NodeRun::Kind::kMoves;
    else r.kind = NodeRun::Kind::kTasks;
  }
  const auto consumers = g.consumers();
  for (const Node& n : g.nodes()) {
    NodeRun& r = runs[static_cast<size_t>(n.id)];
    if (r.kind != NodeRun::Kind::kMoves) continue;
    if (n.op->data_move == DataMove::kAllReduce) {
      if (auto groups = all_reduce_groups(p, n.inputs[0], {n.id, 0}, n.attrs.get_int("degree")))
        r.kind = NodeRun::Kind::kAllReduce, r.groups = std::move(*groups), r.to = n.id;
      continue;
    }
    const auto partner = fused_partner(g, layouts, n, consumers);
    if (!partner || runs[static_cast<size_t>(*partner)].kind != NodeRun::Kind::kMoves) continue;
    const Node& b = g.node(*partner);
    const auto [sum, copy] = relayout_factors(n, b);
    std::optional<std::vector<std::vector<AllReduceMember>>> groups;
    if (sum > 1 && sum == copy) groups = all_reduce_groups(p, n.inputs[0], {b.id, 0}, sum);
    if (groups) {
      r.kind = NodeRun::Kind::kAllReduce, r.groups = std::move(*groups);
    } else {
      r.kind = NodeRun::Kind::kPieces;
      if (detail == RunDetail::kPieces) r.pieces = relayout_pieces(g.shape(n.inputs[0]), b.outputs[0], sum, copy);
    }
    r.to = b.id;
    runs[static_cast<size_t>(b.id)].kind = NodeRun::Kind::kDone;
    // The splits between hold nothing either: written by n's step too.
    for (NodeId x : layout_change_inside(g, n.id, b.id)) runs[static_cast<size_t>(x)].kind = NodeRun::Kind::kDone, runs[static_cast<size_t>(x)].to = b.id;
  }
  return runs;
}

std::vector<TensorRef> parameter_tensors(const Graph& g, const SourceLayouts& layouts) {
  std::vector<TensorRef> out(g.size(), TensorRef{-1, 0});
  for (const Node& n : g.nodes()) {
    if (n.op->is_weight) out[static_cast<size_t>(n.id)] = {n.id, 0};
    // A chain's nodes come in order: its last one (the end) wins.
    if (layouts.stored[static_cast<size_t>(n.id)]) out[static_cast<size_t>(layouts.root[static_cast<size_t>(n.id)])] = {n.id, 0};
  }
  return out;
}

namespace {

// The floats node n's run sends in the forward pass, and with `backward`
// its gradients too (each layout change's dual sends as much again).
double node_floats(const Placement& p, const Node& n, const NodeRun& r, bool backward) {
  const Graph& g = p.graph();
  const double passes = backward ? 2 : 1;
  double floats = 0;
  switch (r.kind) {
    case NodeRun::Kind::kTasks: {
      const TaskTable& tt = p.tasks(n.id);
      const auto& dev = p.task_devices(n.id);
      for (int64_t t = 0; t < tt.tasks; ++t)
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          const ParallelTensorShape& s = g.shape(n.inputs[i]);
          if (p.owner(n.inputs[i], tt.input_shard[static_cast<size_t>(t)][i]) == dev[static_cast<size_t>(t)]) continue;
          floats += elements(s) * (backward && s.dtype == DataType::kFloat32 ? 2 : 1);  // the shard, and its gradient back
        }
      break;
    }
    case NodeRun::Kind::kMoves:
      for (const Move& m : p.moves(n.id)) {
        if (p.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard) == p.owner({n.id, m.output}, m.out_shard)) continue;
        floats += passes * (m.kind == Move::Kind::kCut ? elements(n.outputs[static_cast<size_t>(m.output)])
                                                       : elements(g.shape(n.inputs[static_cast<size_t>(m.input)])));
      }
      break;
    case NodeRun::Kind::kPieces: {
      const Node& to = g.node(r.to);
      const auto [sum, copy] = relayout_factors(n, to);
      for_each_relayout_piece(g.shape(n.inputs[0]), to.outputs[0], sum, copy, [&](const PieceSize& pc) {
        if (p.owner(n.inputs[0], pc.in_shard) != p.owner({r.to, 0}, pc.out_shard)) floats += passes * static_cast<double>(pc.elements);
      });
      break;
    }
    case NodeRun::Kind::kAllReduce:
      for (const auto& group : r.groups) floats += passes * 2 * static_cast<double>(group.size() - 1) * elements(g.shape({r.to, 0}));
      break;
    case NodeRun::Kind::kSliced:
    case NodeRun::Kind::kDone: break;
  }
  return floats;
}

}  // namespace

double step_bytes(const Placement& p, const SourceLayouts& layouts, const std::vector<NodeRun>& runs) {
  const Graph& g = p.graph();
  double floats = 0;
  for (const Node& n : g.nodes()) floats += node_floats(p, n, runs[static_cast<size_t>(n.id)], true);
  // Every stored layout's copies of a block all-reduce their gradients.
  const auto params = parameter_tensors(g, layouts);
  for (const Node& n : g.nodes()) {
    if (!n.op->is_weight || params[static_cast<size_t>(n.id)].node == n.id) continue;
    const TensorRef t = params[static_cast<size_t>(n.id)];
    const ParallelTensorShape& s = g.shape(t);
    const int64_t blocks = s.num_blocks();
    std::vector<int64_t> devices;
    for (int64_t b = 0; b < blocks; ++b) {
      devices.clear();
      for (int64_t c = 0; c < s.replica; ++c) devices.push_back(p.owner(t, c * blocks + b));
      std::sort(devices.begin(), devices.end());
      const auto k = std::unique(devices.begin(), devices.end()) - devices.begin();
      floats += 2 * static_cast<double>(k - 1) * elements(s);
    }
  }
  // The loss, to device 0.
  if (!g.outputs().empty() && p.owner(g.outputs()[0], 0) != 0) floats += 1;
  return 4 * floats;
}

double step_bytes(const Graph& g, std::span<const MachineView> views, int64_t devices) {
  const Placement p(g, views, devices);
  const SourceLayouts layouts = source_layouts(g);
  return step_bytes(p, layouts, node_runs(p, layouts, RunDetail::kKinds));
}

double recompute_step_bytes(const Graph& g, std::span<const MachineView> views, int64_t devices, Recompute policy, bool kept_inputs,
                            int32_t layers, std::span<const int64_t> chunk, std::span<const std::string> operators, AttentionKernel attention) {
  if (policy == Recompute::kNone && attention != AttentionKernel::kFlash) return 0;  // (only flash re-runs anything of its own)
  const Placement p(g, views, devices);
  const SourceLayouts layouts = source_layouts(g);
  const std::vector<NodeRun> runs = node_runs(p, layouts, RunDetail::kKinds);
  return recompute_step_bytes(p, runs, plan_recompute(g, layouts, policy, layers, chunk, operators, attention), kept_inputs);
}

double recompute_step_bytes(const Placement& p, const std::vector<NodeRun>& runs, const RecomputePlan& plan, bool kept_inputs) {
  double floats = 0;
  for (const Node& n : p.graph().nodes())
    if (plan.recomputed[static_cast<size_t>(n.id)] && !(kept_inputs && runs[static_cast<size_t>(n.id)].kind == NodeRun::Kind::kTasks))
      floats += node_floats(p, n, runs[static_cast<size_t>(n.id)], false);
  return 4 * floats;
}

namespace {
std::vector<double> bytes_by_device(const Placement& p) {
  std::vector<double> held(static_cast<size_t>(p.devices()), 0.0);
  const Graph& g = p.graph();
  for (const Node& n : g.nodes())
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const double bytes = 4 * elements(n.outputs[o]);
      for (const int64_t d : p.owners({n.id, static_cast<int32_t>(o)}))
        if (d >= 0 && d < p.devices()) held[static_cast<size_t>(d)] += bytes;
    }
  return held;
}
}  // namespace

double held_bytes(const Placement& p, int64_t device) {
  const std::vector<double> held = bytes_by_device(p);
  return device >= 0 && device < p.devices() ? held[static_cast<size_t>(device)] : 0.0;
}

double max_held_bytes(const Placement& p) {
  const std::vector<double> held = bytes_by_device(p);
  return held.empty() ? 0.0 : *std::max_element(held.begin(), held.end());
}

}  // namespace pcgx
