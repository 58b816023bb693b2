// Memory per device of a mapped graph (see cost_model.h for what counts).
#include <set>

#include "pcgx/search/machine_mapping.h"

namespace pcgx::search {

std::vector<DeviceMemory> memory_breakdown(const Placement& p, Precision precision, double activations) {
  const Graph& g = p.graph();
  const int64_t devices = p.devices();
  std::vector<DeviceMemory> mem(static_cast<size_t>(devices));
  const SourceLayouts layouts = source_layouts(g);
  auto kept = [&](int64_t d, const ParallelTensorShape& s) {
    if (d >= 0 && d < devices) mem[static_cast<size_t>(d)].activations += activations * activation_shard_bytes(s, precision);
  };
  const ParamBytes per = param_bytes(precision);
  auto weight = [&](int64_t d, const ParallelTensorShape& s) {
    if (d < 0 || d >= devices) return;
    const auto elements = static_cast<double>(s.shard_elements());
    DeviceMemory& m = mem[static_cast<size_t>(d)];
    m.weights += elements * static_cast<double>(per.weight);
    m.master += elements * static_cast<double>(per.master);
    m.gradients += elements * static_cast<double>(per.gradient);
    m.optimizer += elements * static_cast<double>(per.optimizer);
  };
  std::set<std::pair<TensorRef, int64_t>> weights_held;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class == OpClass::kSource || layouts.is_layout(g, n.id)) continue;
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs)) {
      const TaskTable& tt = p.tasks(n.id);
      const auto& dev = p.task_devices(n.id);
      for (int64_t t = 0; t < tt.tasks; ++t) {
        for (size_t o = 0; o < n.outputs.size(); ++o) kept(dev[static_cast<size_t>(t)], n.outputs[o]);
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          const TensorRef w = n.inputs[i];
          if (!layouts.weight(w)) continue;
          const int64_t d = p.owner(w, tt.input_shard[static_cast<size_t>(t)][i]);
          if (weights_held.insert({w, d}).second) weight(d, g.shape(w));
        }
      }
      continue;
    }
    // Shard-level operators: their outputs are kept where they live, like
    // any activation the backward pass reads.
    for (size_t o = 0; o < n.outputs.size(); ++o)
      for (int64_t d : p.owners({n.id, static_cast<int32_t>(o)})) kept(d, n.outputs[o]);
  }
  return mem;
}

std::vector<double> memory_per_device(const Placement& p, Precision precision, double activations) {
  std::vector<double> total;
  for (const DeviceMemory& m : memory_breakdown(p, precision, activations)) total.push_back(m.total());
  return total;
}

std::vector<double> memory_per_device(const Graph& g, const std::vector<MachineView>& views, int64_t devices, Precision precision,
                                      double activations) {
  std::vector<MachineView> placed(views);
  placed.resize(g.size());
  return memory_per_device(Placement(g, placed, devices), precision, activations);
}

}  // namespace pcgx::search
