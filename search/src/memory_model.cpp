// Memory per device of a mapped graph (see cost_model.h for what counts).
#include <algorithm>
#include <set>

#include "pcgx/search/machine_mapping.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/step_communication.h"

namespace pcgx::search {

std::vector<DeviceMemory> memory_breakdown(const Placement& p, const TrainingRecipe& recipe, int64_t in_flight) {
  const Graph& g = p.graph();
  const int64_t devices = p.devices();
  const Precision precision = recipe.precision;
  std::vector<DeviceMemory> mem(static_cast<size_t>(devices));
  const SourceLayouts layouts = source_layouts(g);
  const RecomputePlan recompute = plan_recompute(g, layouts, recipe.recompute);
  // The first operator of a layout change run in one step holds nothing.
  const std::vector<char> heads = layout_change_heads(g, layouts);
  const auto consumers = g.consumers();
  // Per recomputed segment and device: the outputs it re-creates.
  std::vector<std::vector<double>> segment(static_cast<size_t>(recompute.segments));
  // A pipelined tensor is kept one micro-slice per micro-batch in flight.
  auto bytes = [&](const ParallelTensorShape& s) {
    const int64_t slices = s.slices();
    return activation_shard_bytes(s, precision) * static_cast<double>(std::min(slices, std::max<int64_t>(in_flight, 1))) /
           static_cast<double>(slices);
  };
  auto kept = [&](NodeId n, int64_t d, const ParallelTensorShape& s) {
    if (d < 0 || d >= devices) return;
    const int32_t seg = recompute.segment[static_cast<size_t>(n)];
    if (seg < 0) {
      mem[static_cast<size_t>(d)].activations += bytes(s);
      return;
    }
    auto& per = segment[static_cast<size_t>(seg)];
    if (per.empty()) per.assign(static_cast<size_t>(devices), 0.0);
    // Re-created for one micro-batch at a time, during its backward.
    per[static_cast<size_t>(d)] += activation_shard_bytes(s, precision) / static_cast<double>(s.slices());
  };
  const ParamBytes per = param_bytes(precision);
  // Under ZeRO what the stage shards is split over the devices holding the
  // same block (`group` of them).
  auto weight = [&](int64_t d, const ParallelTensorShape& s, int64_t group) {
    if (d < 0 || d >= devices) return;
    const auto elements = static_cast<double>(s.shard_elements());
    const double r = static_cast<double>(group);
    const double opt = shards_optimizer(recipe.zero) ? r : 1.0, grad = shards_gradients(recipe.zero) ? r : 1.0;
    const double held = shards_weights(recipe.zero) ? r : 1.0;
    DeviceMemory& m = mem[static_cast<size_t>(d)];
    m.weights += elements * static_cast<double>(per.weight) / held;
    m.master += elements * static_cast<double>(per.master) / opt;
    m.gradients += elements * static_cast<double>(per.gradient) / grad;
    m.optimizer += elements * static_cast<double>(per.optimizer) / opt;
  };
  // The distinct devices holding the block of weight shard `shard`.
  auto group_of = [&](TensorRef w, int64_t shard) {
    const ParallelTensorShape& s = g.shape(w);
    const int64_t blocks = s.num_blocks(), block = shard % blocks;
    std::set<int64_t> holders;
    for (int64_t c = 0; c < s.replica; ++c) holders.insert(p.owner(w, c * blocks + block));
    return static_cast<int64_t>(holders.size());
  };
  std::set<std::pair<TensorRef, int64_t>> weights_held;
  // ZeRO 3: per device, the weights each operator gathers there, in model
  // order (two operators' at most are held at once: cost_model.h).
  std::vector<std::vector<std::pair<NodeId, double>>> gathered(static_cast<size_t>(devices));
  std::set<std::pair<TensorRef, int64_t>> gathered_here;
  for (const Node& n : g.nodes()) {
    gathered_here.clear();
    if (n.op->op_class == OpClass::kSource || layouts.is_layout(g, n.id)) continue;
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs)) {
      const TaskTable& tt = p.tasks(n.id);
      const auto& dev = p.task_devices(n.id);
      for (int64_t t = 0; t < tt.tasks; ++t) {
        for (size_t o = 0; o < n.outputs.size(); ++o) kept(n.id, dev[static_cast<size_t>(t)], n.outputs[o]);
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          const TensorRef w = n.inputs[i];
          const int64_t shard = tt.input_shard[static_cast<size_t>(t)][i];
          const int64_t d = p.owner(w, shard);
          if (!layouts.weight(w)) {
            // An activation shard read from another device: the task keeps
            // the copy it received for its backward pass (a pipeline
            // stage's boundary input, one per micro-batch in flight).
            const int64_t here = dev[static_cast<size_t>(t)];
            if (d != here && here >= 0 && here < devices) mem[static_cast<size_t>(here)].activations += bytes(g.shape(w));
            continue;
          }
          const int64_t group = recipe.zero == ZeroStage::k0 ? 1 : group_of(w, shard);
          if (weights_held.insert({w, d}).second) weight(d, g.shape(w), group);
          if (shards_weights(recipe.zero) && group > 1 && d >= 0 && d < devices && gathered_here.insert({w, d}).second) {
            auto& list = gathered[static_cast<size_t>(d)];
            if (list.empty() || list.back().first != n.id) list.emplace_back(n.id, 0.0);
            list.back().second += static_cast<double>(g.shape(w).shard_elements()) * static_cast<double>(per.weight);
          }
        }
      }
      continue;
    }
    // Shard-level operators: their outputs are kept where they live, like
    // any activation the backward pass reads; but a step of a chain of
    // layout changes, read only by the next (a stage boundary gathered
    // dimension by dimension), is read by no backward pass: its buffer
    // serves the micro-batch passing through, one at a time.
    if (heads[static_cast<size_t>(n.id)]) continue;
    const auto& readers = consumers[static_cast<size_t>(n.id)];
    const bool passing = !readers.empty() && recompute.segment[static_cast<size_t>(n.id)] < 0 &&
                         std::all_of(readers.begin(), readers.end(), [&](const auto& r) {
                           // (a recomputed reader re-runs from it in backward: then it is kept)
                           return g.node(r.first).op->op_class == OpClass::kParallel && recompute.segment[static_cast<size_t>(r.first)] < 0;
                         });
    for (size_t o = 0; o < n.outputs.size(); ++o)
      for (int64_t d : p.owners({n.id, static_cast<int32_t>(o)})) {
        if (!passing) kept(n.id, d, n.outputs[o]);
        else if (d >= 0 && d < devices)
          mem[static_cast<size_t>(d)].activations += activation_shard_bytes(n.outputs[o], precision) / static_cast<double>(n.outputs[o].slices());
      }
  }
  // One segment is re-created at a time, during its own backward.
  for (const auto& held : segment)
    for (size_t d = 0; d < held.size(); ++d) mem[d].transient = std::max(mem[d].transient, held[d]);
  // ZeRO 3's gathered weights (during the backward pass too, so beside a
  // re-created segment): the most two consecutive operators hold.
  for (size_t d = 0; d < gathered.size(); ++d) {
    double most = 0;
    for (size_t k = 0; k < gathered[d].size(); ++k)
      most = std::max(most, gathered[d][k].second + (k + 1 < gathered[d].size() ? gathered[d][k + 1].second : 0.0));
    // At the turn to the backward pass the last operator's weights arrive
    // again while its forward copy is in use.
    if (!gathered[d].empty()) most = std::max(most, 2 * gathered[d].back().second);
    mem[d].transient += most;
  }
  return mem;
}

std::vector<double> memory_per_device(const Placement& p, const TrainingRecipe& recipe, int64_t in_flight) {
  std::vector<double> total;
  for (const DeviceMemory& m : memory_breakdown(p, recipe, in_flight)) total.push_back(m.total());
  return total;
}

std::vector<double> memory_per_device(const Graph& g, const std::vector<MachineView>& views, int64_t devices,
                                      const TrainingRecipe& recipe, int64_t in_flight) {
  std::vector<MachineView> placed(views);
  placed.resize(g.size());
  return memory_per_device(Placement(g, placed, devices), recipe, in_flight);
}

}  // namespace pcgx::search
