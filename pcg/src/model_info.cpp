#include "pcgx/pcg/model_info.h"

namespace pcgx {

ModelInfo model_info(const Graph& g) {
  ModelInfo info;
  for (const Node& n : g.nodes()) {
    if (n.op->is_weight) {
      info.parameters += n.outputs[0].num_elements();
      continue;
    }
    if (n.op->op_class == OpClass::kSource) {
      if (info.batch_size == 0 && !n.outputs[0].dims.empty()) info.batch_size = n.outputs[0].dims[0].size;
    } else {
      ++info.operators;
      ++info.op_counts[n.op->name];
      const std::vector<TensorType> in = g.input_types(n);
      std::vector<TensorType> out;
      for (const auto& s : n.outputs) out.push_back({s.logical_shape(), s.dtype});
      info.forward_flops += n.op->flops(n.attrs, in, out);
      info.forward_bytes += memory_bytes(*n.op, n.attrs, in, out);
    }
    for (const auto& s : n.outputs) info.activation_bytes += static_cast<double>(s.total_bytes());
  }
  info.training_flops = 3.0 * info.forward_flops;
  if (info.batch_size > 0) info.activation_bytes_per_sample = info.activation_bytes / static_cast<double>(info.batch_size);
  return info;
}

}  // namespace pcgx
