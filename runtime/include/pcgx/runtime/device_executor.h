#pragma once
// One device's share of a training step (DESIGN.md "Runtime"). Every device
// holds an executor over the same plan and runs the same sequence of
// calls; each computes only its own tasks and moves, and exchanges shards
// through its Communicator. Buffers for the shards it owns are allocated
// once; a step reuses them.
#include <map>
#include <string>
#include <vector>

#include "pcgx/runtime/communicator.h"
#include "pcgx/runtime/execution_plan.h"

namespace pcgx::runtime {

class DeviceExecutor {
 public:
  DeviceExecutor(const ExecutionPlan& plan, Communicator& comm);

  // Sets this device's shards of a source node from its logical value.
  void set_source(NodeId node, const Tensor<float>& logical);
  // Runs the forward pass; returns the loss (graph output 0, replica slot
  // 0) on device 0 and 0 elsewhere.
  double forward();
  // Runs the backward pass of graph output 0 (seeded with 1).
  void backward();

  // This device's shards of a node output and of its gradient (empty
  // tensors for shards it does not own).
  std::vector<Tensor<float>>& values(TensorRef t) { return values_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]; }
  std::vector<Tensor<float>>& grads(TensorRef t) { return grads_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]; }
  bool owns(TensorRef t, int64_t shard) const { return plan_.owner(t, shard) == comm_.rank(); }
  const ExecutionPlan& plan() const { return plan_; }
  Communicator& communicator() { return comm_; }

 private:
  void forward_compute(const Node& n);
  void forward_moves(const Node& n);
  void backward_compute(const Node& n);
  void backward_moves(const Node& n);
  int64_t tag(const Node& n, int64_t index, bool backward) const;

  const ExecutionPlan& plan_;
  Communicator& comm_;
  std::vector<std::vector<std::vector<Tensor<float>>>> values_, grads_;  // [node][output][shard]
  // Input shards a task received from another device, kept for backward.
  std::vector<std::map<std::pair<int64_t, size_t>, Tensor<float>>> received_;
};

}  // namespace pcgx::runtime
