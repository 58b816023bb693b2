#pragma once
// The tasks of one compute-operator instance, resolved to shard indices:
// which shard of every input each task reads, which shard of every output
// it writes, and where those blocks sit in the logical tensors. The
// interpreter, the reference gradients and the runtime all run tasks from
// this one table, so they agree on who reads what.
#include <cstdint>
#include <span>
#include <vector>

#include "pcgx/pcg/degree_inference.h"
#include "pcgx/pcg/operator.h"

namespace pcgx {

// Per task, one shard index per tensor (of its inputs, or of its
// outputs), read as shards[task][tensor]: one flat array per table rather
// than a vector per task (the search builds a table per operator and
// candidate; at 3,072 devices those vectors were a third of the time
// spent building them).
class TaskShards {
 public:
  TaskShards() = default;
  TaskShards(int64_t tasks, size_t width) : width_(width), flat_(static_cast<size_t>(tasks) * width) {}
  std::span<const int64_t> operator[](size_t task) const { return {flat_.data() + task * width_, width_}; }
  std::span<int64_t> operator[](size_t task) { return {flat_.data() + task * width_, width_}; }

 private:
  size_t width_ = 0;
  std::vector<int64_t> flat_;
};

struct TaskTable {
  int64_t tasks = 0;
  TaskGrid grid;  // the task grid (degree_inference.h): tasks are numbered row-major over grid.extents
  std::vector<ParallelTensorShape> input_shapes, output_shapes;
  TaskShards input_shard;   // [task][input]
  TaskShards output_shard;  // [task][output] (= task, see degree_inference.h)

  // The context a kernel sees for task t (block offsets of its shards).
  TaskContext context(int64_t t) const;
};

// Throws pcgx::Error when the shapes admit no task grid.
TaskTable task_table(const OpDef& op, const Attributes& attrs, std::span<const ParallelTensorShape> inputs,
                     std::span<const ParallelTensorShape> outputs);

}  // namespace pcgx
