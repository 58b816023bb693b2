// ZeRO in the executor (device_executor.h): each bucket's gradients
// reduce-scattered, one block of it updated per device, the updated blocks
// all-gathered into every copy (stages 1, 2: after the update; 3: before
// each pass of the operator that reads them); and the moments between
// their blocks and whole shards for checkpoints (train_state.h).
#include <algorithm>
#include <chrono>
#include <functional>
#include <set>

#include "pcgx/runtime/device_executor.h"

namespace pcgx::runtime {
namespace {

// The tags of a bucket's weight all-gather and of its moments' gathers at
// checkpoints: past every node's collective tags (layout_change.cpp), as
// the gradient syncs' are.
int64_t gather_tag(NodeId after_graph, size_t bucket, int kind) {
  return Communicator::kCollectiveTagBase - 2 * ((((static_cast<int64_t>(after_graph) + 1) << 24) | static_cast<int64_t>(bucket)) * 4 + kind);
}

// A parameter shard is in a bucket when it belongs to a stored layout
// (execution_plan.cpp's sync_buckets), not to the Weight node itself.
bool bucketed(const Graph& g, TensorRef t) { return !g.node(t.node).op->is_weight; }

}  // namespace

void DeviceExecutor::init_zero() {
  zero_blocks_.assign(plan_.buckets.size(), {});
  if (!sharded()) return;
  for (size_t k = 0; k < plan_.buckets.size(); ++k) {
    const SyncBucket& bucket = plan_.buckets[k];
    if (!member(bucket)) continue;
    ZeroBlock& z = zero_blocks_[k];
    const auto r = static_cast<int64_t>(bucket.devices.size());
    z.member = static_cast<int>(std::lower_bound(bucket.devices.begin(), bucket.devices.end(), comm_.rank()) - bucket.devices.begin());
    z.floats = (bucket.floats + r - 1) / r;
    // The padding past the bucket's floats stays zero: a zero gradient
    // leaves a zero weight and zero moments zero.
    bucket_buffers_[k] = allocate(std::vector<int64_t>{r * z.floats});
    z.weights = allocate(std::vector<int64_t>{r * z.floats});
    z.w = allocate(std::vector<int64_t>{z.floats});
    z.g = allocate(std::vector<int64_t>{z.floats});
    if (syncs_micro_batches() && bucket.every_micro_batch) z.part = allocate(std::vector<int64_t>{z.floats});
  }
  if (!shards_weights(plan_.zero)) return;
  // Stage 3: a bucket is gathered for the first compute reader of its
  // weight layout (every bucket holds one block of one layout), unless it
  // is kept whole (below the persistence threshold).
  const Graph& g = *plan_.graph;
  gathers_before_.assign(g.size(), {});
  std::map<TensorRef, std::vector<size_t>> buckets_of;  // a layout split into blocks: one bucket per block
  for (size_t k = 0; k < plan_.buckets.size(); ++k)
    if (zero_blocks_[k].member >= 0 && plan_.buckets[k].gathered_for_use) buckets_of[plan_.buckets[k].parts.front().tensor].push_back(k);
  std::set<TensorRef> seen;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute) continue;
    for (const TensorRef& t : n.inputs)
      if (auto it = buckets_of.find(t); it != buckets_of.end() && seen.insert(t).second)
        for (size_t k : it->second) gathers_before_[static_cast<size_t>(n.id)].push_back(k);
  }
}

void DeviceExecutor::load_master_blocks() {
  for (size_t k = 0; k < plan_.buckets.size(); ++k) {
    ZeroBlock& z = zero_blocks_[k];
    if (z.member < 0) continue;
    int64_t at = 0;
    for (const SyncPart& part : plan_.buckets[k].parts) {
      for (int64_t shard : part.shards)
        if (owns(part.tensor, shard)) {  // every copy holds the same values
          backend_.set_range(z.weights, at, master(part.tensor, shard));
          break;
        }
      at += part.floats;
    }
    backend_.copy_range(z.w, z.weights, z.member * z.floats);
  }
  masters_current_ = true;
}

void DeviceExecutor::reduce_scatter_bucket(size_t k, bool add) {
  const SyncBucket& bucket = plan_.buckets[k];
  ZeroBlock& z = zero_blocks_[k];
  const Buffer& flat = bucket_buffers_[k];
  const Buffer& out = add ? z.part : z.g;
  const auto t0 = timing_ ? backend_.now() : Backend::Clock::time_point{};
  pack_gradients(bucket, flat);
  const auto t1 = timing_ ? backend_.now() : Backend::Clock::time_point{};
  if (bucket.devices.size() > 1)
    comm_.reduce_scatter(bucket.devices, flat.span(), out.span(), collective_tag(static_cast<NodeId>(plan_.graph->size()), static_cast<int64_t>(k), true));
  else
    backend_.copy_range(out, flat, 0);
  if (add) backend_.add_range(z.g, 0, z.part);
  if (timing_) {
    bucket_copy_seconds_ += std::chrono::duration<double>(t1 - t0).count();
    bucket_copy_bytes_ += static_cast<double>(bucket.floats) * sizeof(float);
  }
}

void DeviceExecutor::reduce_scatter_micro_batch(bool last) {
  const bool add = micro_batches_synced_++ > 0;
  for (size_t k = 0; k < plan_.buckets.size(); ++k) {
    const SyncBucket& bucket = plan_.buckets[k];
    // Before the last, only the buckets whose gradients come with every
    // micro-batch; the last adds to them and sends the rest.
    if (!member(bucket) || (!last && !bucket.every_micro_batch)) continue;
    for (const SyncPart& part : bucket.parts)
      for (int64_t shard : part.shards)
        if (owns(part.tensor, shard)) settle_gradient(part.tensor, shard);
    auto sync = [&] { reduce_scatter_bucket(k, add && bucket.every_micro_batch); };
    if (bucket.devices.size() > 1) collective(StepEventKind::kGradientSync, static_cast<int64_t>(k), sync);
    else sync();
    if (last) continue;
    // The next micro-batch's gradients start from zero.
    for (const SyncPart& part : bucket.parts)
      for (int64_t shard : part.shards)
        if (owns(part.tensor, shard)) clear_gradient(part.tensor, shard);
  }
}

DeviceExecutor::UpdateList DeviceExecutor::update_buffers() const {
  UpdateList u;
  for (const auto& [t, k] : parameter_shards()) {
    if (sharded() && bucketed(*plan_.graph, t)) continue;
    u.params.push_back(master(t, k));
    u.grads.push_back(grads_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)][static_cast<size_t>(k)]);
  }
  for (const ZeroBlock& z : zero_blocks_)
    if (z.member >= 0) u.params.push_back(z.w), u.grads.push_back(z.g);
  return u;
}

void DeviceExecutor::gather_bucket(size_t k, int64_t tag_node, int kind) {
  const SyncBucket& bucket = plan_.buckets[k];
  const ZeroBlock& z = zero_blocks_[k];
  auto gather = [&] {
    if (bucket.devices.size() > 1)
      comm_.all_gather(bucket.devices, z.w.span(), z.weights.span(), gather_tag(static_cast<NodeId>(tag_node), k, kind));
    else
      backend_.set_range(z.weights, 0, z.w);
    int64_t at = 0;
    for (const SyncPart& part : bucket.parts) {
      for (int64_t shard : part.shards)
        if (owns(part.tensor, shard)) {
          backend_.copy_range(master(part.tensor, shard), z.weights, at);
          // Mixed precision at stage 3: this copy's compute weights, rounded
          // from the master just gathered (gather_weights rounds them all).
          if (mixed() && bucket.gathered_for_use) {
            const Buffer& w = values(part.tensor)[static_cast<size_t>(shard)];
            backend_.copy_rounded(w, master(part.tensor, shard), plan_.precision);
          }
        }
      at += part.floats;
    }
  };
  if (bucket.devices.size() > 1) collective(StepEventKind::kWeightGather, static_cast<int64_t>(k), gather);
  else gather();
}

void DeviceExecutor::gather_weights(bool whole, int64_t* bytes_sent) {
  for (size_t k = 0; sharded() && k < plan_.buckets.size(); ++k) {
    const ZeroBlock& z = zero_blocks_[k];
    if (z.member < 0 || (!whole && plan_.buckets[k].gathered_for_use)) continue;  // stage 3: before each use
    gather_bucket(k, static_cast<int64_t>(plan_.graph->size()), 0);
    if (bytes_sent) *bytes_sent += static_cast<int64_t>(plan_.buckets[k].devices.size() - 1) * z.floats * static_cast<int64_t>(sizeof(float));
  }
  // Mixed precision: the gathers above (or the update, for the weights in
  // no bucket) wrote the masters; the compute copies are rounded from
  // them. (At stage 3 a block gathered for use is rounded again when it is
  // gathered, from the values its gather writes.)
  if (mixed()) refresh_compute_weights();
}

void DeviceExecutor::gather_before(const Node& n, bool backward) {
  if (gathers_before_.empty()) return;
  if (!masters_current_) load_master_blocks();  // the first step, or new weights set
  // Tags past the graph's (gather_tag: after_graph above every node id),
  // distinct per node.
  const auto past = static_cast<int64_t>(plan_.graph->size()) + 1 + n.id;
  for (size_t k : gathers_before_[static_cast<size_t>(n.id)]) gather_bucket(k, past, backward ? 3 : 0);
}

std::vector<ParameterSlot> DeviceExecutor::moment_shards(std::span<const ParameterSlot> slots) {
  if (!sharded()) return {slots.begin(), slots.end()};
  const auto shards = parameter_shards();
  const bool adam = !slots.empty() && slots.front().m && slots.front().v;
  if (full_moments_.empty()) {
    for (const auto& [t, k] : shards) {
      ParameterSlot& s = full_moments_.emplace_back();
      if (!bucketed(*plan_.graph, t)) continue;  // the optimizer's own, below
      const Buffer& w = values(t)[static_cast<size_t>(k)];
      s.w = w;
      s.m = allocate(backend_.shape(w));
      if (adam) s.v = allocate(backend_.shape(w));
    }
  }
  // The shards outside buckets keep their slots, in the same order.
  size_t next = 0;
  for (size_t i = 0; i < shards.size(); ++i)
    if (!bucketed(*plan_.graph, shards[i].first)) full_moments_[i] = slots[next++];
  return full_moments_;
}

namespace {

// Index of copy `shard` of `t` in parameter_shards() order.
size_t position(std::span<const std::pair<TensorRef, int64_t>> shards, TensorRef t, int64_t shard) {
  return static_cast<size_t>(std::find(shards.begin(), shards.end(), std::pair{t, shard}) - shards.begin());
}

}  // namespace

void DeviceExecutor::each_moment_block(std::span<const ParameterSlot> slots,
                                       const std::function<void(size_t, int, const Buffer&)>& f) {
  size_t slot = slots.size();  // the blocks follow the shards outside buckets
  for (const ZeroBlock& z : zero_blocks_) slot -= z.member >= 0 ? 1 : 0;
  for (size_t k = 0; k < plan_.buckets.size(); ++k) {
    if (zero_blocks_[k].member < 0) continue;
    const ParameterSlot& mine = slots[slot++];
    for (int kind = 1; kind <= 2; ++kind)
      if (const Buffer& block = kind == 1 ? mine.m : mine.v) f(k, kind, block);
  }
}

std::vector<ParameterSlot> DeviceExecutor::unsharded_moments(std::span<const ParameterSlot> slots, int64_t* bytes_sent) {
  std::vector<ParameterSlot> full = moment_shards(slots);
  if (!sharded()) return full;
  const auto shards = parameter_shards();
  each_moment_block(slots, [&](size_t k, int kind, const Buffer& block) {
    const SyncBucket& bucket = plan_.buckets[k];
    const Buffer& flat = bucket_buffers_[k];  // free between steps
    if (bucket.devices.size() > 1) {
      comm_.all_gather(bucket.devices, block.span(), flat.span(), gather_tag(static_cast<NodeId>(plan_.graph->size()), k, kind));
      if (bytes_sent) *bytes_sent += static_cast<int64_t>(bucket.devices.size() - 1) * block.numel * static_cast<int64_t>(sizeof(float));
    } else {
      backend_.set_range(flat, 0, block);
    }
    int64_t at = 0;
    for (const SyncPart& part : bucket.parts) {
      for (int64_t shard : part.shards)
        if (owns(part.tensor, shard)) {
          const ParameterSlot& s = full[position(shards, part.tensor, shard)];
          backend_.copy_range(kind == 1 ? s.m : s.v, flat, at);
        }
      at += part.floats;
    }
  });
  return full;
}

void DeviceExecutor::shard_moments(std::span<const ParameterSlot> slots) {
  if (!sharded()) return;
  const auto shards = parameter_shards();
  each_moment_block(slots, [&](size_t k, int kind, const Buffer& block) {
    const Buffer& flat = bucket_buffers_[k];
    int64_t at = 0;
    for (const SyncPart& part : plan_.buckets[k].parts) {
      for (int64_t shard : part.shards)
        if (owns(part.tensor, shard)) {
          const ParameterSlot& s = full_moments_[position(shards, part.tensor, shard)];
          backend_.set_range(flat, at, kind == 1 ? s.m : s.v);
          break;
        }
      at += part.floats;
    }
    backend_.copy_range(block, flat, zero_blocks_[k].member * zero_blocks_[k].floats);
  });
}

}  // namespace pcgx::runtime
