#include "pcgx/pcg/tasks.h"

#include "pcgx/pcg/degree_inference.h"

namespace pcgx {

TaskTable task_table(const OpDef& op, const Attributes& attrs, std::span<const ParallelTensorShape> inputs,
                     std::span<const ParallelTensorShape> outputs) {
  TaskTable t;
  t.input_shapes.assign(inputs.begin(), inputs.end());
  t.output_shapes.assign(outputs.begin(), outputs.end());
  std::vector<TensorType> out_types;
  for (const auto& s : outputs) out_types.push_back({s.logical_shape(), s.dtype});
  t.grid = infer_degrees(op, attrs, inputs, out_types).grid;
  const TaskGrid& grid = t.grid;
  t.tasks = grid.num_tasks();
  std::vector<int64_t> coords(grid.extents.size(), 0);
  t.input_shard = TaskShards(t.tasks, inputs.size());
  t.output_shard = TaskShards(t.tasks, outputs.size());
  for (int64_t k = 0; k < t.tasks; ++k) {
    const std::span<int64_t> in = t.input_shard[static_cast<size_t>(k)];
    for (size_t i = 0; i < inputs.size(); ++i) in[i] = shard_for_task(grid.inputs[i], inputs[i], coords, grid.extents);
    const std::span<int64_t> out = t.output_shard[static_cast<size_t>(k)];
    for (size_t o = 0; o < outputs.size(); ++o) out[o] = shard_for_task(grid.outputs[o], outputs[o], coords, grid.extents);
    for (size_t d = coords.size(); d-- > 0;) {
      if (++coords[d] < grid.extents[d]) break;
      coords[d] = 0;
    }
  }
  return t;
}

TaskContext TaskTable::context(int64_t t) const {
  TaskContext ctx{input_shapes, output_shapes, {}, {}};
  std::vector<int64_t> block;
  int64_t slot = 0;
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    input_shapes[i].shard_coords(input_shard[static_cast<size_t>(t)][i], slot, block);
    ctx.input_offsets.push_back(input_shapes[i].block_offset(block));
  }
  for (size_t o = 0; o < output_shapes.size(); ++o) {
    output_shapes[o].shard_coords(output_shard[static_cast<size_t>(t)][o], slot, block);
    ctx.output_offsets.push_back(output_shapes[o].block_offset(block));
  }
  return ctx;
}

}  // namespace pcgx
