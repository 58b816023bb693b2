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

struct TaskTable {
  int64_t tasks = 0;
  TaskGrid grid;  // the task grid (degree_inference.h): tasks are numbered row-major over grid.extents
  std::vector<ParallelTensorShape> input_shapes, output_shapes;
  std::vector<std::vector<int64_t>> input_shard;   // [task][input]
  std::vector<std::vector<int64_t>> output_shard;  // [task][output] (= task, see degree_inference.h)

  // The context a kernel sees for task t (block offsets of its shards).
  TaskContext context(int64_t t) const;
};

// Throws pcgx::Error when the shapes admit no task grid.
TaskTable task_table(const OpDef& op, const Attributes& attrs, std::span<const ParallelTensorShape> inputs,
                     std::span<const ParallelTensorShape> outputs);

}  // namespace pcgx
