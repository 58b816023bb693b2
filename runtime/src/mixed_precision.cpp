// Mixed precision in the executor (device_executor.h): which values are
// rounded to the compute precision, and the FP32 master weights beside
// their compute copies.
#include <algorithm>

#include "pcgx/pcg/error.h"
#include "pcgx/runtime/device_executor.h"

namespace pcgx::runtime {

void DeviceExecutor::init_precision() {
  if (!mixed()) return;
  const Graph& g = *plan_.graph;
  rounds_.assign(g.size(), 0);
  // What is an activation: a float value a compute operator wrote (not a
  // loss or a part of one, and not a scalar, which is the loss carried on), moved or summed
  // by parallel operators, or a float model input that reaches some
  // compute operator other than a loss. Indices (token ids, positions,
  // class labels) are never rounded, and neither is a target, which only
  // losses read: it stays as given, as PyTorch's autocast runs the losses
  // in FP32.
  std::vector<char> reaches_model(g.size(), 0);  // some path through parallel operators to a non-loss compute one
  const auto consumers = g.consumers();
  for (size_t k = g.size(); k-- > 0;)
    for (const auto& [c, input] : consumers[k]) {
      const Node& r = g.node(c);
      if (r.op->op_class == OpClass::kParallel ? reaches_model[static_cast<size_t>(c)] != 0 : r.op->loss == LossKind::kNone)
        reaches_model[k] = 1;
    }
  std::vector<char> activation(g.size(), 0);
  for (const Node& n : g.nodes()) {
    const auto id = static_cast<size_t>(n.id);
    const bool real = n.outputs[0].dtype == DataType::kFloat32 && n.outputs[0].rank() > 0;
    if (n.op->is_weight || !real) continue;
    if (n.op->op_class == OpClass::kSource) activation[id] = reaches_model[id];
    else if (n.op->op_class == OpClass::kParallel) activation[id] = !n.inputs.empty() && activation[static_cast<size_t>(n.inputs[0].node)];
    else activation[id] = n.op->loss == LossKind::kNone && !n.op->loss_part;
    const NodePlan::Run run = plan_.nodes[id].run;
    // Sources round as set_source writes them (round_source, with the
    // layouts sliced from them); the others as they run.
    rounds_[id] = activation[id] && (n.op->op_class == OpClass::kSource || (run != NodePlan::Run::kSliced && run != NodePlan::Run::kDone));
  }
  masters_.resize(g.size());
  for (const Node& n : g.nodes()) {
    if (!n.op->is_weight) continue;
    const TensorRef p = plan_.parameter[static_cast<size_t>(n.id)];
    const auto& layouts = sliced_from_[static_cast<size_t>(n.id)];
    if (p.node != n.id && std::find(layouts.begin(), layouts.end(), p.node) == layouts.end())
      throw Error(describe(n) + ": its trained layout is not filled from it; mixed precision cannot keep its master copy");
    auto& m = masters_[static_cast<size_t>(p.node)];
    m.resize(plan_.graph->node(p.node).outputs.size());
    auto& shards = m[static_cast<size_t>(p.output)];
    shards.resize(static_cast<size_t>(g.shape(p).num_shards()));
    for (int64_t k = 0; k < g.shape(p).num_shards(); ++k)
      if (owns(p, k)) shards[static_cast<size_t>(k)] = allocate(g.shape(p).slice_shape());
  }
}

const Buffer& DeviceExecutor::master(TensorRef t, int64_t shard) const {
  const auto node = static_cast<size_t>(t.node), out = static_cast<size_t>(t.output);
  if (mixed() && node < masters_.size() && out < masters_[node].size()) return masters_[node][out][static_cast<size_t>(shard)];
  return values_[node][out][static_cast<size_t>(shard)];
}

void DeviceExecutor::round_outputs(NodeId n) {
  const Node& node = plan_.graph->node(n);
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    if (node.outputs[o].dtype != DataType::kFloat32) continue;  // indices stay exact
    for (const Buffer& b : values_[static_cast<size_t>(n)][o])
      if (b) backend_.round(b, plan_.precision);
  }
}

void DeviceExecutor::round_source(NodeId n) {
  const Node& node = plan_.graph->node(n);
  if (node.op->is_weight) {
    const TensorRef p = plan_.parameter[static_cast<size_t>(n)];
    const auto& values = this->values(p);
    const auto& masters = masters_[static_cast<size_t>(p.node)][static_cast<size_t>(p.output)];
    for (size_t k = 0; k < values.size() && !block_master(p); ++k)  // (its blocks already written: write_master_blocks)
      if (values[k]) backend_.copy(masters[k], values[k]);
  } else if (!rounds_[static_cast<size_t>(n)]) {
    return;
  }
  round_outputs(n);
  for (NodeId id : sliced_from_[static_cast<size_t>(n)])
    if (!micro({id, 0})) round_outputs(id);  // a pipelined layout's slices are rounded as enter_slice uploads them
}

bool DeviceExecutor::block_master(TensorRef t) const { return mixed() && sharded() && !plan_.graph->node(t.node).op->is_weight; }

void DeviceExecutor::refresh_compute_weights() {
  for (const Node& n : plan_.graph->nodes()) {
    if (!n.op->is_weight) continue;
    const TensorRef p = plan_.parameter[static_cast<size_t>(n.id)];
    if (block_master(p)) continue;  // rounded as its bucket is gathered (gather_bucket)
    const auto& values = this->values(p);
    const auto& masters = masters_[static_cast<size_t>(p.node)][static_cast<size_t>(p.output)];
    for (size_t k = 0; k < values.size(); ++k)
      if (values[k]) backend_.copy_rounded(values[k], masters[k], plan_.precision);
  }
}

}  // namespace pcgx::runtime
