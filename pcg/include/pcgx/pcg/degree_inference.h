#pragma once
// Degree inference for compute operators (docs/design.md, "Parallel tensors").
//
// A compute operator runs as T tasks, a grid of task dimensions:
//   - the slot dimension s: replica slots every input carries alike
//     (slot-wise execution, always legal);
//   - one task dimension per active ParallelKind (degree > 1).
// Task order, outermost first: s, the kinds whose output is kPartial (in kind
// order), then the kinds that split the output (in output-dimension order).
// Tasks are numbered row-major in that order, which makes task t produce
// output shard t in canonical order.
//
// Each input's shard for a task: data dimension j takes the coordinate of the
// kind that splits j (0 when unsplit); its replica slot is the row-major
// combination, in task order, of the coordinates of s and of every kind that
// replicates it (kCopy or kSum).
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/operator.h"

namespace pcgx {

struct TensorMapping {
  std::vector<int> dim_task;      // per data dimension: task dimension or -1
  std::vector<int> replica_task;  // task dimensions forming the replica slot, outermost first
};

struct TaskGrid {
  std::vector<int64_t> extents;       // per task dimension
  std::vector<std::string> names;     // "slot" or the kind's name
  std::vector<TensorMapping> inputs;
  std::vector<TensorMapping> outputs;
  int64_t num_tasks() const;
};

struct DegreeInference {
  std::vector<ParallelTensorShape> outputs;
  TaskGrid grid;
};

// Infers the output parallel shapes of one compute-operator instance, or
// throws pcgx::Error naming the operator, the input and its degrees.
DegreeInference infer_degrees(const OpDef& op, const Attributes& attrs,
                              std::span<const ParallelTensorShape> inputs,
                              std::span<const TensorType> output_types);

// The task grid of a compute node of `g`, as its inputs' and outputs'
// parallel shapes give it.
struct Node;
class Graph;
TaskGrid task_grid(const Graph& g, const Node& n);

// Shard index of tensor `m` (with shape `shape`) for the task at `coords`.
int64_t shard_for_task(const TensorMapping& m, const ParallelTensorShape& shape,
                       std::span<const int64_t> coords, std::span<const int64_t> extents);

}  // namespace pcgx
