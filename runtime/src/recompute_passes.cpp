// Activation recomputation in a step (device_executor.h): where each
// segment is freed and re-run, and the re-run itself.
#include "pcgx/runtime/device_executor.h"

namespace pcgx::runtime {

void DeviceExecutor::init_recompute() {
  const size_t nodes = plan_.graph->size();
  free_after_forward_.assign(nodes, {});
  recompute_before_.assign(nodes, {});
  free_after_backward_.assign(nodes, {});
  released_.assign(nodes, 0);
  freed_floats_.assign(nodes, 0);
  free_nodes_after_forward_.assign(nodes, {});
  for (size_t s = 0; s < plan_.segments.size(); ++s) {
    const RecomputeSegment& seg = plan_.segments[s];
    free_after_forward_[static_cast<size_t>(seg.last_reader)].push_back(s);
    recompute_before_[static_cast<size_t>(seg.last_reader)].push_back(s);
    free_after_backward_[static_cast<size_t>(seg.nodes.front())].push_back(s);
  }
  for (const FreedNode& f : plan_.freed) free_nodes_after_forward_[static_cast<size_t>(f.last_reader)].push_back(f.node);
  // A step starts with every segment and freed node released: each is
  // allocated when it first runs. The buffers init() made for them were
  // never used, so they do not count as held at once with the rest.
  for (const RecomputeSegment& seg : plan_.segments) release_segment(seg);
  for (const FreedNode& f : plan_.freed) release_node(f.node);
  backend_.trim();
  peak_floats_ = buffer_floats_;
}

void DeviceExecutor::release_segment(const RecomputeSegment& seg) {
  for (NodeId n : seg.nodes) release_node(n);
}

void DeviceExecutor::release_node(NodeId n) {
  if (released_[static_cast<size_t>(n)]) return;
  // Floats the backend gave back (none where it keeps the memory).
  int64_t& freed = freed_floats_[static_cast<size_t>(n)];
  freed = 0;
  for (auto& shards : values_[static_cast<size_t>(n)])
    for (Buffer& b : shards)
      if (b && backend_.release(b)) freed += b.numel;
  held(-freed);
  released_[static_cast<size_t>(n)] = 1;
}

void DeviceExecutor::acquire(NodeId n) {
  // A layout change run as one step writes the output of its chain's last node.
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n)];
  if ((np.run == NodePlan::Run::kPieces || np.run == NodePlan::Run::kAllReduce) && np.to != n) acquire(np.to);
  if (!released_[static_cast<size_t>(n)]) return;
  // Only where the backend freed them do the buffers need memory again;
  // elsewhere they still hold theirs, which the forward run overwrites.
  if (freed_floats_[static_cast<size_t>(n)] > 0) {
    for (auto& shards : values_[static_cast<size_t>(n)])
      for (Buffer& b : shards)
        if (b) backend_.reacquire(b);
    held(freed_floats_[static_cast<size_t>(n)]);
  }
  released_[static_cast<size_t>(n)] = 0;
}

void DeviceExecutor::recompute_segment(const RecomputeSegment& seg) {
  const Graph& g = *plan_.graph;
  // The forward pass's order, each node's sends at its own turn (the early
  // ones too: sends never block, and every device re-runs the same nodes
  // at the same point of its backward pass). Each node's outputs are
  // allocated at its turn, and what no reverse rule reads goes again once
  // its last reader here has run.
  recomputing_ = true;
  for (NodeId id : seg.nodes) {
    const Node& n = g.node(id);
    acquire(id);
    if (early_[0][static_cast<size_t>(id)]) forward_sends(n, true);
    at(id, true);
    run_forward(n);
    for (const auto& [node, reader] : seg.passing)
      if (reader == id) release_node(node);
  }
  recomputing_ = false;
}

}  // namespace pcgx::runtime
