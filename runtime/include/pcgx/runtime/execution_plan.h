#pragma once
// The execution plan of a PCG on N devices: which device runs each task of
// every compute operator, which device owns every shard of every tensor, and
// how each shard-level operator (the parallel operators, replica-axis
// Concat/Split) builds its output shards from input shards ("moves").
//
// Ownership. A compute operator's task t runs on device start + t * stride
// of its machine view and owns output shard t (degree_inference.h). Every
// other shard (sources, outputs of parallel operators) is owned by the
// device of its first reader, so a weight lives where it is used and a
// Repartition's pieces are cut where they are consumed. The backward pass
// runs on the same devices: gradients live with the value they belong to.
//
// Moves. Output shard j of a shard-level operator is the sum of its moves;
// a move takes one input shard and copies it, cuts a block out of it
// (Repartition), or places it as a block of the output (Combine). Each is
// linear, and its transpose is the backward move: copy <-> copy,
// cut <-> place. Reduce is several copies into one shard; Replicate one
// shard copied into several.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/tasks.h"

namespace pcgx::runtime {

struct DeviceView {
  int64_t start = 0;
  int64_t stride = 1;
};

struct Move {
  enum class Kind : uint8_t { kCopy, kCut, kPlace };
  int32_t output = 0, out_shard = 0;
  int32_t input = 0, in_shard = 0;
  Kind kind = Kind::kCopy;
  std::vector<int64_t> offset;  // kCut: where in the input; kPlace: where in the output
};

struct NodePlan {
  TaskTable tasks;                         // compute operators
  std::vector<int> task_device;            // per task
  std::vector<Move> moves;                 // shard-level operators
  std::vector<std::vector<int>> owner;     // [output][shard] -> device
};

struct ExecutionPlan {
  const Graph* graph = nullptr;
  int devices = 1;
  std::vector<NodePlan> nodes;  // per node of graph
  int owner(TensorRef t, int64_t shard) const {
    return nodes[static_cast<size_t>(t.node)].owner[static_cast<size_t>(t.output)][static_cast<size_t>(shard)];
  }
};

// `views` per node (empty: every compute operator starts at device 0).
// Throws pcgx::Error when a task would run beyond the last device, naming
// the operator and the devices the strategy needs, or when the graph holds
// an operator the runtime cannot execute.
ExecutionPlan make_plan(const Graph& g, std::span<const DeviceView> views, int devices);

// The devices a strategy needs: 1 + the highest device any task runs on.
int devices_needed(const Graph& g, std::span<const DeviceView> views);

}  // namespace pcgx::runtime
