// Memory per device of a mapped graph (see cost_model.h for what counts).
#include <set>

#include "pcgx/search/machine_mapping.h"

namespace pcgx::search {

std::vector<double> memory_per_device(const Graph& g, const std::vector<MachineView>& views, int64_t devices, double activations) {
  std::vector<MachineView> placed(views);
  placed.resize(g.size());
  return memory_per_device(Placement(g, placed, devices), activations);
}

std::vector<double> memory_per_device(const Placement& p, double activations) {
  const Graph& g = p.graph();
  const int64_t devices = p.devices();
  std::vector<double> mem(static_cast<size_t>(devices), 0.0);
  const SourceLayouts layouts = source_layouts(g);
  auto add = [&](int64_t d, double bytes) {
    if (d >= 0 && d < devices) mem[static_cast<size_t>(d)] += bytes;
  };
  std::set<std::pair<TensorRef, int64_t>> weights_held;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class == OpClass::kSource || layouts.is_layout(g, n.id)) continue;
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs)) {
      const TaskTable& tt = p.tasks(n.id);
      const auto& dev = p.task_devices(n.id);
      for (int64_t t = 0; t < tt.tasks; ++t) {
        for (size_t o = 0; o < n.outputs.size(); ++o) add(dev[static_cast<size_t>(t)], activations * shard_bytes(n.outputs[o]));
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          const TensorRef w = n.inputs[i];
          if (!layouts.weight(w)) continue;
          const int64_t d = p.owner(w, tt.input_shard[static_cast<size_t>(t)][i]);
          if (weights_held.insert({w, d}).second) add(d, 4 * shard_bytes(g.shape(w)));
        }
      }
      continue;
    }
    // Shard-level operators: their outputs are kept where they live, like
    // any activation the backward pass reads.
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const auto& own = p.owners({n.id, static_cast<int32_t>(o)});
      for (int64_t d : own) add(d, activations * shard_bytes(n.outputs[o]));
    }
  }
  return mem;
}

}  // namespace pcgx::search
