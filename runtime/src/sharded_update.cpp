// ZeRO in the executor (device_executor.h): each bucket's gradients
// reduce-scattered, one block of it updated per device, the updated blocks
// all-gathered into every copy (stages 1, 2: after the update; 3: before
// each pass of the operator that reads them); and the moments between
// their blocks and whole shards for checkpoints (train_state.h).
#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <set>

#include "pcgx/pcg/error.h"
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
  zero_turns_.assign(plan_.graph->size(), {});
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
    z.w = allocate(std::vector<int64_t>{z.floats});
    z.g = allocate(std::vector<int64_t>{z.floats});
    if (syncs_micro_batches() && bucket.every_micro_batch) z.part = allocate(std::vector<int64_t>{z.floats});
    // Under mixed precision the blocks are the masters, written as weights
    // are set (write_master_blocks); unset, zero as the weights.
    z.current = mixed();
  }
  init_zero_windows();
}

void DeviceExecutor::init_zero_windows() {
  // Every device of a bucket decides alike (the gathers' and reduce-scatters'
  // places and tags must agree): from the plan, not from what it holds.
  const Graph& g = *plan_.graph;
  const auto consumers = g.consumers();
  std::vector<NodeId> rerun_at(g.size(), -1);  // a recomputed node's re-run: before this node's backward
  for (const RecomputeSegment& seg : plan_.segments)
    for (NodeId n : seg.nodes) rerun_at[static_cast<size_t>(n)] = seg.last_reader;
  for (size_t k = 0; k < plan_.buckets.size(); ++k) {
    ZeroBlock& z = zero_blocks_[k];
    if (z.member < 0) continue;
    const SyncBucket& bucket = plan_.buckets[k];
    NodeId first = static_cast<NodeId>(g.size()), last = -1, back = -1, first_compute = static_cast<NodeId>(g.size());
    bool micro = true, local = true;
    for (const SyncPart& part : bucket.parts)
      for (const auto& [c, i] : consumers[static_cast<size_t>(part.tensor.node)]) {
        if (g.node(c).inputs[static_cast<size_t>(i)] != part.tensor) continue;
        first = std::min(first, c), last = std::max(last, c), back = std::max({back, c, rerun_at[static_cast<size_t>(c)]});
        micro = micro && pass_of(c) == 1;
        const NodePlan& np = plan_.nodes[static_cast<size_t>(c)];
        if (np.run != NodePlan::Run::kTasks) {
          local = false;
          continue;
        }
        if (g.node(c).op->op_class == OpClass::kCompute) first_compute = std::min(first_compute, c);
        for (int64_t t = 0; t < np.tasks.tasks; ++t)
          local = local && plan_.owner(part.tensor, np.tasks.input_shard[static_cast<size_t>(t)][static_cast<size_t>(i)]) == np.task_device[static_cast<size_t>(t)];
      }
    if (last < 0) continue;
    // (A pipeline schedule of one chunk runs each micro-batch's nodes as
    // the passes do; ZeRO 2 and 3 take no other: trainer.cpp.)
    const bool windows = micro && (!plan_.pipeline || plan_.pipeline->chunks() == 1) && pass_of(back) == 1;
    z.grads_windowed = windows && shards_gradients(bucket.zero);
    z.weights_windowed = windows && local && bucket.gathered_for_use;
    if (z.grads_windowed) {
      zero_turns_[static_cast<size_t>(last)].open_gradients.push_back(k);
      zero_turns_[static_cast<size_t>(first)].reduce_after_backward.push_back(k);
    }
    if (z.weights_windowed) {
      zero_turns_[static_cast<size_t>(first)].gather_forward.push_back(k);
      zero_turns_[static_cast<size_t>(last)].drop_after_forward.push_back(k);
      zero_turns_[static_cast<size_t>(back)].gather_backward.push_back(k);
      zero_turns_[static_cast<size_t>(first)].drop_after_backward.push_back(k);
    } else if (bucket.gathered_for_use && first_compute < static_cast<NodeId>(g.size())) {
      // Its copies stay: gathered before its first compute reader's passes.
      zero_turns_[static_cast<size_t>(first_compute)].gather_forward.push_back(k);
      zero_turns_[static_cast<size_t>(first_compute)].gather_backward.push_back(k);
    }
  }
}

void DeviceExecutor::put_away_between_uses() {
  for (size_t k = 0; k < zero_blocks_.size(); ++k) {
    const ZeroBlock& z = zero_blocks_[k];
    if (z.member < 0) continue;
    put_away(k, kFlat);
    if (z.weights_windowed) put_away(k, kWeightCopies);
    if (z.grads_windowed) put_away(k, kGradientCopies);
  }
  if (mixed() && sharded()) give_back(whole_masters_away_, [&](auto&& f) { each_whole_master(f); });
  // What init() allocated for them was never used at once with the rest.
  backend_.trim();
  peak_floats_ = buffer_floats_;
}

template <class F>
void DeviceExecutor::each_copy(size_t k, Copies c, F&& f) {
  if (c == kFlat) return f(bucket_buffers_[k]);
  for (const SyncPart& part : plan_.buckets[k].parts)
    for (int64_t shard : part.shards) {
      if (!owns(part.tensor, shard)) continue;
      const auto s = static_cast<size_t>(shard);
      if (c == kGradientCopies) {
        f(grads(part.tensor)[s]);
        continue;
      }
      f(values(part.tensor)[s]);  // (its master: the bucket's blocks, block_master)
    }
}

template <class F>
void DeviceExecutor::each_whole_master(F&& f) {
  for (const auto& [t, k] : parameter_shards())
    if (block_master(t)) f(masters_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)][static_cast<size_t>(k)]);
}

bool DeviceExecutor::gathers_whole_weights() const {
  return sharded() && (mixed() || shards_weights(highest_zero(plan_.zero, plan_.zero_weights)));
}

void DeviceExecutor::write_master_blocks(TensorRef t) {
  for (size_t k = 0; k < zero_blocks_.size(); ++k) {
    ZeroBlock& z = zero_blocks_[k];
    if (z.member < 0) continue;
    const Buffer& flat = bucket_buffers_[k];
    const int64_t mine = z.member * z.floats;
    bool open = false;
    int64_t at = 0;
    for (const SyncPart& part : plan_.buckets[k].parts) {
      for (int64_t shard : part.shards)
        if (part.tensor == t && owns(t, shard)) {  // every copy holds the same values
          // The block as it is, in its place of the flat buffer; the part
          // over it; the block back.
          if (!open) bring_back(k, kFlat), backend_.set_range(flat, mine, z.w), open = true;
          backend_.set_range(flat, at, values(t)[static_cast<size_t>(shard)]);
          break;
        }
      at += part.floats;
    }
    if (!open) continue;
    backend_.copy_range(z.w, flat, mine);
    put_away(k, kFlat);
  }
}

template <class Each>
void DeviceExecutor::give_back(char& away, Each&& each) {
  if (away) return;
  int64_t freed = 0;
  each([&](Buffer& b) {
    if (b && backend_.release(b)) freed += b.numel;
  });
  held(-freed);
  away = freed > 0 ? 2 : 1;
}

template <class Each>
void DeviceExecutor::take_back(char& away, Each&& each, bool zero) {
  if (!away) return;
  int64_t floats = 0;
  each([&](Buffer& b) {
    if (!b) return;
    if (away == 2) backend_.reacquire(b), floats += b.numel;
    else if (zero) backend_.fill(b, 0.f);
  });
  held(floats);
  away = 0;
}

void DeviceExecutor::put_away(size_t k, Copies c) {
  give_back(zero_blocks_[k].away[c], [&](auto&& f) { each_copy(k, c, f); });
}

void DeviceExecutor::bring_back(size_t k, Copies c) {
  // Where the backend kept the memory, gradients are zeroed here (what a
  // flat buffer's padding holds is only ever zero: the blocks' padding
  // stays zero).
  const bool was_away = zero_blocks_[k].away[c] != 0;
  take_back(zero_blocks_[k].away[c], [&](auto&& f) { each_copy(k, c, f); }, c == kGradientCopies);
  if (!was_away || c != kGradientCopies) return;
  for (const SyncPart& part : plan_.buckets[k].parts)
    for (int64_t shard : part.shards)
      if (owns(part.tensor, shard)) touched_[static_cast<size_t>(part.tensor.node)][static_cast<size_t>(part.tensor.output)][static_cast<size_t>(shard)] = 0;
}

void DeviceExecutor::load_master_block(size_t k) {
  ZeroBlock& z = zero_blocks_[k];
  if (mixed()) throw Error("zero: bucket " + std::to_string(k) + "'s master blocks reloaded under mixed precision, whose whole masters are given back");
  const bool away = z.away[kWeightCopies] != 0;
  if (away) bring_back(k, kWeightCopies);  // never set: zeros, as the copies
  bring_back(k, kFlat);
  const Buffer& flat = bucket_buffers_[k];
  int64_t at = 0;
  for (const SyncPart& part : plan_.buckets[k].parts) {
    for (int64_t shard : part.shards)
      if (owns(part.tensor, shard)) {  // every copy holds the same values
        backend_.set_range(flat, at, master(part.tensor, shard));
        break;
      }
    at += part.floats;
  }
  backend_.copy_range(z.w, flat, z.member * z.floats);
  put_away(k, kFlat);
  if (away) put_away(k, kWeightCopies);
  z.current = true;
}

void DeviceExecutor::load_master_blocks() {
  if (masters_current_) return;
  const OutsideStep outside(*this);
  for (size_t k = 0; k < plan_.buckets.size(); ++k)
    if (zero_blocks_[k].member >= 0 && !zero_blocks_[k].current) load_master_block(k);
  masters_current_ = true;
}

void DeviceExecutor::zero_after_forward(const Node& n) {
  for (size_t k : zero_turns_[static_cast<size_t>(n.id)].drop_after_forward) put_away(k, kWeightCopies);
}

void DeviceExecutor::zero_before_backward(const Node& n) {
  for (size_t k : zero_turns_[static_cast<size_t>(n.id)].open_gradients) bring_back(k, kGradientCopies);
  gather_before(n, true);
}

void DeviceExecutor::zero_after_backward(const Node& n) {
  const ZeroTurns& turns = zero_turns_[static_cast<size_t>(n.id)];
  for (size_t k : turns.reduce_after_backward) {
    // Over micro-batches each adds its block to the step's (`part`).
    const bool add = syncs_micro_batches() && slice_ > 0;
    auto sync = [&] { reduce_scatter_bucket(k, add); };
    if (plan_.buckets[k].devices.size() > 1) collective(StepEventKind::kGradientSync, static_cast<int64_t>(k), sync);
    else sync();
    put_away(k, kGradientCopies);
  }
  for (size_t k : turns.drop_after_backward) put_away(k, kWeightCopies);
}

void DeviceExecutor::reduce_scatter_bucket(size_t k, bool add) {
  const SyncBucket& bucket = plan_.buckets[k];
  ZeroBlock& z = zero_blocks_[k];
  bring_back(k, kFlat);
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
  put_away(k, kFlat);
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
    if (!member(bucket) || zero_blocks_[k].grads_windowed || (!last && !bucket.every_micro_batch)) continue;
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
  bring_back(k, kWeightCopies);
  bring_back(k, kFlat);
  const Buffer& flat = bucket_buffers_[k];
  auto gather = [&] {
    if (bucket.devices.size() > 1)
      comm_.all_gather(bucket.devices, z.w.span(), flat.span(), gather_tag(static_cast<NodeId>(tag_node), k, kind));
    else
      backend_.set_range(flat, 0, z.w);
    int64_t at = 0;
    for (const SyncPart& part : bucket.parts) {
      for (int64_t shard : part.shards)
        if (owns(part.tensor, shard)) {
          // The weights; under mixed precision rounded to the compute copy,
          // and the FP32 master whole where a checkpoint gathers it.
          const Buffer& w = values(part.tensor)[static_cast<size_t>(shard)];
          backend_.copy_range(w, flat, at);
          if (!mixed()) continue;
          backend_.round(w, plan_.precision);
          if (!whole_masters_away_) backend_.copy_range(master(part.tensor, shard), flat, at);
        }
      at += part.floats;
    }
  };
  if (bucket.devices.size() > 1) collective(StepEventKind::kWeightGather, static_cast<int64_t>(k), gather);
  else gather();
  put_away(k, kFlat);
}

void DeviceExecutor::gather_weights(bool whole, int64_t* bytes_sent) {
  std::optional<OutsideStep> outside;
  if (whole) outside.emplace(*this);
  if (whole && mixed() && sharded()) take_back(whole_masters_away_, [&](auto&& f) { each_whole_master(f); }, false);
  for (size_t k = 0; sharded() && k < plan_.buckets.size(); ++k) {
    const ZeroBlock& z = zero_blocks_[k];
    if (z.member < 0 || (!whole && plan_.buckets[k].gathered_for_use)) continue;  // stage 3: before each use
    gather_bucket(k, static_cast<int64_t>(plan_.graph->size()), 0);
    if (bytes_sent) *bytes_sent += static_cast<int64_t>(plan_.buckets[k].devices.size() - 1) * z.floats * static_cast<int64_t>(sizeof(float));
  }
  // Mixed precision: the gathers above rounded their compute copies; the
  // weights in no bucket are rounded from the masters the update wrote.
  if (mixed()) refresh_compute_weights();
}

template <class F>
void DeviceExecutor::each_whole_moment(F&& f) {
  const auto shards = parameter_shards();
  for (size_t i = 0; i < shards.size(); ++i)
    if (bucketed(*plan_.graph, shards[i].first)) f(full_moments_[i].m), f(full_moments_[i].v);
}

void DeviceExecutor::drop_whole_copies() {
  for (size_t k = 0; k < zero_blocks_.size(); ++k)
    if (zero_blocks_[k].weights_windowed) put_away(k, kWeightCopies);
  if (!full_moments_.empty()) give_back(full_moments_away_, [&](auto&& f) { each_whole_moment(f); });
  if (mixed() && sharded()) give_back(whole_masters_away_, [&](auto&& f) { each_whole_master(f); });
}

void DeviceExecutor::gather_before(const Node& n, bool backward) {
  if (zero_turns_.empty()) return;
  const ZeroTurns& turns = zero_turns_[static_cast<size_t>(n.id)];
  const std::vector<size_t>& list = backward ? turns.gather_backward : turns.gather_forward;
  if (list.empty()) return;
  load_master_blocks();  // the first step, or new weights set
  // Tags past the graph's (gather_tag: after_graph above every node id),
  // distinct per node.
  const auto past = static_cast<int64_t>(plan_.graph->size()) + 1 + n.id;
  for (size_t k : list) gather_bucket(k, past, backward ? 3 : 0);
}

std::vector<ParameterSlot> DeviceExecutor::moment_shards(std::span<const ParameterSlot> slots) {
  if (!sharded()) return {slots.begin(), slots.end()};
  const OutsideStep outside(*this);
  const auto shards = parameter_shards();
  const bool adam = !slots.empty() && slots.front().m && slots.front().v;
  if (full_moments_.empty()) {
    for (const auto& [t, k] : shards) {
      ParameterSlot& s = full_moments_.emplace_back();
      if (!bucketed(*plan_.graph, t)) continue;  // the optimizer's own, below
      // (No `w`: the copy may be given back between uses; nothing reads it.)
      const std::span<const int64_t> shape = backend_.shape(values(t)[static_cast<size_t>(k)]);
      s.m = allocate(shape);
      if (adam) s.v = allocate(shape);
    }
  } else {
    take_back(full_moments_away_, [&](auto&& f) { each_whole_moment(f); }, false);
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
  const OutsideStep outside(*this);
  const auto shards = parameter_shards();
  each_moment_block(slots, [&](size_t k, int kind, const Buffer& block) {
    const SyncBucket& bucket = plan_.buckets[k];
    bring_back(k, kFlat);
    const Buffer& flat = bucket_buffers_[k];
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
    put_away(k, kFlat);
  });
  return full;
}

void DeviceExecutor::shard_moments(std::span<const ParameterSlot> slots) {
  if (!sharded()) return;
  const OutsideStep outside(*this);
  const auto shards = parameter_shards();
  each_moment_block(slots, [&](size_t k, int kind, const Buffer& block) {
    bring_back(k, kFlat);
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
    put_away(k, kFlat);
  });
}

}  // namespace pcgx::runtime
