// A step of a plan with micro-batches (execution_plan.h,
// device_executor.h): the passes in their order, and what moves to each
// micro-batch (kernel offsets, Pipeline and Batch cuts, the inputs'
// slices).
#include "pcgx/runtime/device_executor.h"

namespace pcgx::runtime {

double DeviceExecutor::forward_backward() {
  if (plan_.pipeline) return scheduled_step();
  if (plan_.micro_batches == 1) {
    const double loss = forward();
    backward();
    return loss;
  }
  // The loss's gradient first: what each micro-batch's backward starts from.
  clear_gradients(false);
  micro_batches_synced_ = 0;
  seed_loss();
  forward_pass(0);
  for (int64_t k = 0; k < plan_.micro_batches; ++k) {
    enter_slice(k);
    forward_pass(1);
    if (k + 1 == plan_.micro_batches) forward_pass(2);
    if (k == 0) backward_pass(2);
    else clear_gradients(true);
    backward_pass(1);
    if (syncs_micro_batches() && k + 1 < plan_.micro_batches) reduce_scatter_micro_batch();  // the last: synchronize_gradients()
  }
  backward_pass(0);
  return read_loss();
}

void DeviceExecutor::enter_slice(int64_t k, int64_t chunk, bool fill) {
  slice_ = k;
  const Graph& g = *plan_.graph;
  // The pipelined layouts of the inputs: this micro-batch's part of each shard.
  if (!fill) return;
  for (size_t src = 0; src < staged_.size(); ++src) {
    if (staged_[src].data.empty()) continue;
    for (NodeId id : sliced_from_[src]) {
      if (!micro({id, 0}) || (chunk >= 0 && step_chunk_[static_cast<size_t>(id)] != chunk)) continue;
      const ParallelTensorShape& s = g.node(id).outputs[0];
      for (int64_t j = 0; j < s.num_shards(); ++j) {
        if (!owns({id, 0}, j)) continue;
        micro_batch_offset(s, source_offsets_[static_cast<size_t>(id)][static_cast<size_t>(j)], k, offset_scratch_);
        const Buffer& b = values_[static_cast<size_t>(id)][0][static_cast<size_t>(j)];
        backend_.upload_block(staged_[src], offset_scratch_, b);
        if (mixed() && rounds_[src]) backend_.round(b, plan_.precision);
      }
    }
  }
}

std::pair<Move::Kind, const std::vector<int64_t>*> DeviceExecutor::move_kind(const Node& n, const Move& m) const {
  // Only a Pipeline or Batch that cuts micro-batches runs once per one
  // (one of degree 1 is a copy, run once per step).
  if (n.op->data_move == DataMove::kPipeline && pass_of(n.id) == 1 && plan_.micro_batches > 1)
    return {Move::Kind::kCut, &slice_offsets_[static_cast<size_t>(slice_)][static_cast<size_t>(n.id)]};
  if (n.op->data_move == DataMove::kBatch && pass_of(n.id) == 1 && plan_.micro_batches > 1)
    return {Move::Kind::kPlace, &slice_offsets_[static_cast<size_t>(slice_)][static_cast<size_t>(n.id)]};
  return {m.kind, &m.offset};
}

}  // namespace pcgx::runtime
