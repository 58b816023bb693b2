#pragma once
// Where every task and every shard of a PCG lives under a set of machine
// views (machine_view.h). The runtime executes this placement and the cost
// model prices it, so both agree on what crosses which link.
//
//   - Task t of a compute operator runs on its view's device for t and
//     owns the output shards it writes (task t writes output shard t,
//     degree_inference.h).
//   - Every other shard (sources, outputs of shard-level operators) lives
//     with its first reader: the reader with the lowest node id that reads
//     it, on the device of the task that reads it, or for a shard-level
//     reader on the device owning the output shard of its last move that
//     reads it. So a weight lives where it is used and a Repartition's
//     pieces are cut where they are consumed.
//   - A shard nobody reads lives on device (shard index mod devices).
//
// Nodes without a placed view start at device 0. Everything is computed
// on first use and kept.
#include <cstdint>
#include <span>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/pcg/shard_moves.h"
#include "pcgx/pcg/tasks.h"

namespace pcgx {

class Placement {
 public:
  Placement(const Graph& g, std::span<const MachineView> views, int64_t devices);

  const Graph& graph() const { return g_; }
  int64_t devices() const { return devices_; }
  const MachineView& view(NodeId n) const;
  // Replaces one node's view; what depended on it is recomputed on use.
  void set_view(NodeId n, const MachineView& v);

  // Compute (non-shard-level) nodes: their task table and task devices.
  const TaskTable& tasks(NodeId n) const;
  const std::vector<int64_t>& task_devices(NodeId n) const;
  // Shard-level nodes: their moves.
  const std::vector<Move>& moves(NodeId n) const;
  // Device of every shard of tensor t.
  // (Inline where known already: the cost model asks per shard, and the
  // call was most of its time at thousands of devices.)
  const std::vector<int64_t>& owners(TensorRef t) const {
    const auto& per_node = owners_[static_cast<size_t>(t.node)];
    if (static_cast<size_t>(t.output) < per_node.size() && !per_node[static_cast<size_t>(t.output)].empty())
      return per_node[static_cast<size_t>(t.output)];
    return find_owners(t);
  }
  int64_t owner(TensorRef t, int64_t shard) const { return owners(t)[static_cast<size_t>(shard)]; }
  // The distinct devices holding a replica of block `block` of tensor t
  // (its data-parallel group; fewer than its replicas where they co-shard).
  int64_t block_holders(TensorRef t, int64_t block) const;
  // The highest device any task runs on, plus one.
  int64_t devices_needed() const;

 private:
  const Graph& g_;
  std::vector<MachineView> views_;
  int64_t devices_;
  std::vector<std::vector<std::pair<NodeId, int>>> consumers_;  // ascending node id
  mutable std::vector<char> have_tasks_, have_devices_, have_moves_;
  mutable std::vector<TaskTable> tasks_;
  mutable std::vector<std::vector<int64_t>> task_devices_;
  mutable std::vector<std::vector<Move>> moves_;
  const std::vector<int64_t>& find_owners(TensorRef t) const;  // owners(), worked out
  mutable std::vector<std::vector<std::vector<int64_t>>> owners_;  // [node][output], empty: not yet
};

}  // namespace pcgx
