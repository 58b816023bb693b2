// Layout changes in one step (execution_plan.h): pieces sent straight to
// their devices, and all-reduces within groups of shards.
#include <algorithm>

#include "pcgx/runtime/device_executor.h"

namespace pcgx::runtime {

int64_t DeviceExecutor::collective_tag(NodeId node, int64_t group, bool backward) {
  // Two tags per call (all_reduce's reduce and broadcast), below the base.
  return Communicator::kCollectiveTagBase - 2 * (((static_cast<int64_t>(node) << 24) | group) * 2 + (backward ? 1 : 0));
}

std::pair<int, int> DeviceExecutor::piece_ends(const Node& n, const Piece& p, bool backward) const {
  const int a = plan_.owner(n.inputs[0], p.in_shard), b = plan_.owner({plan_.nodes[static_cast<size_t>(n.id)].to, 0}, p.out_shard);
  return backward ? std::pair{b, a} : std::pair{a, b};
}

const Buffer& DeviceExecutor::piece_source(const Node& n, const Piece& p, bool backward) {
  const TensorRef out{plan_.nodes[static_cast<size_t>(n.id)].to, 0};
  return backward ? grads(out)[static_cast<size_t>(p.out_shard)] : values(n.inputs[0])[static_cast<size_t>(p.in_shard)];
}

// The pieces this device sends, each through a buffer of its extent kept
// across steps.
void DeviceExecutor::piece_sends(const Node& n, bool backward) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  for (size_t k = 0; k < np.pieces.size(); ++k) {
    const Piece& p = np.pieces[k];
    const auto [from, to] = piece_ends(n, p, backward);
    if (from != me || to == me) continue;
    const Buffer& b = block_buffer(move_buffers_, n.id, {static_cast<int64_t>(k), backward}, p.extent);
    backend_.read_block(piece_source(n, p, backward), backward ? p.out_offset : p.in_offset, b);
    comm_.send(to, tag(n, static_cast<int64_t>(k), backward), b.span());
  }
}

// Forward, output shards start zeroed and add the pieces of input shards;
// backward, each piece's gradient goes back and is added to the input
// shard's (possibly later: deferred_ in device_executor.h).
void DeviceExecutor::run_pieces(const Node& n, bool backward) {
  const int b = backward ? 1 : 0;
  if (!early_[b][static_cast<size_t>(n.id)]) piece_sends(n, backward);
  if (!backward) {
    const TensorRef out{plan_.nodes[static_cast<size_t>(n.id)].to, 0};
    for (int64_t j = 0; j < plan_.graph->shape(out).num_shards(); ++j)
      if (owns(out, j)) backend_.fill(values(out)[static_cast<size_t>(j)], 0.f);
  }
  if (!backward || !deferred_[static_cast<size_t>(n.id)][0]) piece_receives(n, backward);
}

// The pieces this device receives (or cuts from its own shards) and adds;
// a piece moving between devices travels in a buffer of its extent, kept
// across steps.
void DeviceExecutor::piece_receives(const Node& n, bool backward) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  const TensorRef in = n.inputs[0], out{np.to, 0};
  for (size_t k = 0; k < np.pieces.size(); ++k) {
    const Piece& p = np.pieces[k];
    const auto [from, to] = piece_ends(n, p, backward);
    if (to != me) continue;
    const Buffer& b = block_buffer(move_buffers_, n.id, {static_cast<int64_t>(k), backward}, p.extent);
    if (from == me) backend_.read_block(piece_source(n, p, backward), backward ? p.out_offset : p.in_offset, b);
    else comm_.recv(from, tag(n, static_cast<int64_t>(k), backward), b.span());
    if (!backward) {
      backend_.add_block(values(out)[static_cast<size_t>(p.out_shard)], p.out_offset, b);
    } else {
      backend_.add_block(first_touch(in, p.in_shard), p.in_offset, b);
    }
  }
}

namespace {

// This device's member of `group` (or null), with the group's devices,
// sorted, in `devices`.
const AllReduceMember* join(const std::vector<AllReduceMember>& group, int me, std::vector<int>& devices) {
  const auto mine = std::find_if(group.begin(), group.end(), [&](const AllReduceMember& m) { return m.device == me; });
  if (mine == group.end()) return nullptr;
  devices.clear();
  for (const AllReduceMember& m : group) devices.push_back(m.device);
  std::sort(devices.begin(), devices.end());
  return &*mine;
}

}  // namespace

// Every member copies its input shard into its output shard and the group
// all-reduces them.
void DeviceExecutor::forward_all_reduce(const Node& n) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  const TensorRef in = n.inputs[0], out{np.to, 0};
  for (size_t g = 0; g < np.groups.size(); ++g) {
    const AllReduceMember* mine = join(np.groups[g], me, group_scratch_);
    if (!mine) continue;
    const Buffer& y = values(out)[static_cast<size_t>(mine->out_shard)];
    backend_.copy(y, values(in)[static_cast<size_t>(mine->in_shard)]);
    collective(StepEventKind::kCollective, static_cast<int64_t>(g),
               [&] { comm_.all_reduce(group_scratch_, y.span(), collective_tag(n.id, static_cast<int64_t>(g), false)); });
  }
}

// The dual of an all-reduce is an all-reduce of the outputs' gradients,
// added to each input's.
void DeviceExecutor::backward_all_reduce(const Node& n) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  const TensorRef in = n.inputs[0], out{np.to, 0};
  for (size_t g = 0; g < np.groups.size(); ++g) {
    const AllReduceMember* mine = join(np.groups[g], me, group_scratch_);
    if (!mine) continue;
    const Buffer& dy = grads(out)[static_cast<size_t>(mine->out_shard)];
    const Buffer& b = block_buffer(move_buffers_, n.id, {static_cast<int64_t>(g), 2}, backend_.shape(dy));
    backend_.copy(b, dy);
    collective(StepEventKind::kCollective, static_cast<int64_t>(g),
               [&] { comm_.all_reduce(group_scratch_, b.span(), collective_tag(n.id, static_cast<int64_t>(g), true)); });
    backend_.add(first_touch(in, mine->in_shard), b);
  }
}

}  // namespace pcgx::runtime
