// The backward pass of a device's step (device_executor.h): gradients
// cleared and seeded, each node's gradient rule, and the contributions
// sent to and received from other devices.
#include <algorithm>
#include <chrono>

#include "pcgx/pcg/error.h"
#include "pcgx/runtime/device_executor.h"

namespace pcgx::runtime {

void DeviceExecutor::backward() {
  if (plan_.micro_batches > 1)
    throw Error("a plan with " + std::to_string(plan_.micro_batches) +
                " micro-batches keeps one micro-batch's activations: run forward_backward()");
  clear_gradients(false);
  seed_loss();
  backward_pass(1);
}

void DeviceExecutor::clear_gradients(bool micro_only) {
  for (size_t id = 0; id < grads_.size(); ++id)
    for (size_t o = 0; o < grads_[id].size(); ++o)
      if (!micro_only || micro_[id][o]) clear_tensor_gradients({static_cast<NodeId>(id), static_cast<int32_t>(o)});
}

void DeviceExecutor::clear_chunk_gradients(int64_t chunk, std::optional<int64_t> writer) {
  for (const TensorRef& t : chunk_grads_[static_cast<size_t>(chunk)]) {
    // Read by the next chunk's step: its gradient, written there, is kept
    // for its own chunk's step (cleared when that next chunk's runs).
    const auto id = static_cast<size_t>(t.node);
    if (writer && crosses_[id] && step_chunk_[id] != *writer) continue;
    clear_tensor_gradients(t);
  }
}

void DeviceExecutor::clear_tensor_gradients(TensorRef t) {
  const auto shards = touched_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)].size();
  for (size_t k = 0; k < shards; ++k) clear_gradient(t, static_cast<int64_t>(k));
}

bool DeviceExecutor::sums_in_place(const Node& n, size_t i) const {
  // Not within a micro-batch (a tensor two nodes read sums their parts as
  // a one-device run does, part by part), nor under mixed precision,
  // where each micro-batch's part is rounded before it is added in FP32
  // (as autocast's AccumulateGrad does), nor where the node reads the
  // tensor twice (both inputs' gradients would be the one buffer).
  const TensorRef x = n.inputs[i];
  return slice_ > 0 && !micro(x) && !mixed() && std::count(n.inputs.begin(), n.inputs.end(), x) == 1 &&
         !backend_.overwrites_gradient(n, i) && backend_.accumulates_gradient(n, i);
}

void DeviceExecutor::clear_gradient(TensorRef t, int64_t shard) {
  char& state = touched_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)][static_cast<size_t>(shard)];
  if (state & kOverwrittenFirst) {  // its first writer overwrites it
    state = kUnzeroed;
    return;
  }
  // (A gradient given back between its uses is zeroed when taken back.)
  if (const Buffer& b = grads_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)][static_cast<size_t>(shard)]; b && b.data) backend_.fill(b, 0.f);
  state = 0;
}

void DeviceExecutor::settle_gradient(TensorRef t, int64_t shard) {
  char& state = touched_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)][static_cast<size_t>(shard)];
  if (state & kTouched || !(state & kUnzeroed)) return;
  backend_.fill(grads_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)][static_cast<size_t>(shard)], 0.f);
  state = 0;
}

const Buffer& DeviceExecutor::first_touch(TensorRef x, int64_t s) {
  char& state = touched_[static_cast<size_t>(x.node)][static_cast<size_t>(x.output)][static_cast<size_t>(s)];
  const Buffer& g = grads(x)[static_cast<size_t>(s)];
  if (!(state & kTouched)) {
    if (state & kUnzeroed) backend_.fill(g, 0.f);
    state = kTouched;
  }
  return g;
}

void DeviceExecutor::seed_loss() {
  const TensorRef out = plan_.graph->outputs().at(0);
  const ParallelTensorShape& s = plan_.graph->shape(out);
  for (int64_t b = 0; b < s.num_blocks(); ++b)  // replica slot 0 holds the loss
    if (owns(out, b)) {
      backend_.fill(grads(out)[static_cast<size_t>(b)], loss_scale_);
      touched_[static_cast<size_t>(out.node)][static_cast<size_t>(out.output)][static_cast<size_t>(b)] = kTouched;
    }
}

void DeviceExecutor::backward_pass(int pass) {
  const Graph& g = *plan_.graph;
  for (NodeId c : sends_after_[1][g.size() + static_cast<size_t>(pass)]) backward_sends(g.node(c));
  for (size_t k = g.size(); k-- > 0;)
    if (pass_of(static_cast<NodeId>(k)) == pass) backward_node(g.node(static_cast<NodeId>(k)));
}

void DeviceExecutor::backward_node(const Node& n) {
  if (n.op->op_class == OpClass::kSource) return;
  const Graph& g = *plan_.graph;
  const auto k = static_cast<size_t>(n.id);
  zero_before_backward(n);
  for (size_t s : recompute_before_[k]) recompute_segment(plan_.segments[s]);
  for (const auto& [c, i] : receives_before_[k]) at(c, true), backward_receives(g.node(c), i);
  at(n.id, true);
  switch (plan_.nodes[k].run) {
    case NodePlan::Run::kTasks: backward_compute(n); break;
    case NodePlan::Run::kMoves: backward_moves(n); break;
    case NodePlan::Run::kPieces: run_pieces(n, true); break;
    case NodePlan::Run::kAllReduce: backward_all_reduce(n); break;
    case NodePlan::Run::kSliced:
    case NodePlan::Run::kDone: break;
  }
  for (NodeId c : sends_after_[1][k]) backward_sends(g.node(c));
  zero_after_backward(n);
  for (size_t s : free_after_backward_[k]) release_segment(plan_.segments[s]);
}

const Buffer& DeviceExecutor::scratch_contribution(NodeId node, Slot slot, const ParallelTensorShape& shape) {
  auto& known = scratch_of_[static_cast<size_t>(node)];
  if (const auto it = known.find(slot); it != known.end()) return *it->second;
  const size_t input = slot.second;
  auto fits = [&](const Buffer& b) {
    const std::span<const int64_t> have = backend_.shape(b);
    if (have.size() != shape.dims.size()) return false;
    for (size_t d = 0; d < have.size(); ++d) {
      const ParallelDim& pd = shape.dims[d];
      if (have[d] != pd.size / pd.degree / pd.pipeline) return false;
    }
    return true;
  };
  for (const auto& [i, b] : scratch_contributions_)
    if (i == input && fits(b)) return *(known[slot] = &b);
  return *(known[slot] = &scratch_contributions_.emplace_back(input, allocate(shape.slice_shape())).second);
}

void DeviceExecutor::backward_compute(const Node& n) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const TaskTable& tt = np.tasks;
  const int me = comm_.rank();
  const size_t ins = n.inputs.size(), outs = n.outputs.size();
  auto is_float = [&](size_t i) { return plan_.graph->shape(n.inputs[i]).dtype == DataType::kFloat32; };
  for (int64_t t = 0; t < tt.tasks; ++t) {
    if (np.task_device[static_cast<size_t>(t)] != me) continue;
    const auto& shards = tt.input_shard[static_cast<size_t>(t)];
    for (size_t i = 0; i < ins; ++i) {
      const TensorRef x = n.inputs[i];
      const int64_t s = shards[i];
      const bool mine = plan_.owner(x, s) == me;
      in_[i] = mine ? &values(x)[static_cast<size_t>(s)] : &(once_per_step(n, i) ? received_once_ : received_)[static_cast<size_t>(n.id)].at({t, i});
      direct_[i] = 0;
      din_[i] = nullptr;
      if (!is_float(i)) continue;  // index inputs: no gradient
      // The first contribution to a gradient shard of this device is
      // written in place (it is zero, or overwritten), and so are those of
      // later micro-batches to a gradient summed over them where the
      // kernel adds (sums_in_place); other later ones go through a scratch
      // buffer added right after the kernel, those for another device
      // through a buffer of this task.
      const bool overwrites = backend_.overwrites_gradient(n, i);
      char& touched = touched_[static_cast<size_t>(x.node)][static_cast<size_t>(x.output)][static_cast<size_t>(s)];
      if (mine && !(touched & kTouched)) {
        if (overwrites) {
          din_[i] = &grads(x)[static_cast<size_t>(s)];
          touched = kTouched | kOverwrittenFirst;
        } else {
          din_[i] = &first_touch(x, s);
        }
        direct_[i] = 1;
      } else if (mine && sums_in_place(n, i)) {
        din_[i] = &grads(x)[static_cast<size_t>(s)];
        direct_[i] = 1;
      } else {
        const Buffer& c = mine ? scratch_contribution(n.id, {t, i}, plan_.graph->shape(x))
                               : buffer(contributions_, n.id, {t, i}, plan_.graph->shape(x));
        if (!overwrites) backend_.fill(c, 0.f);
        din_[i] = &c;
      }
    }
    for (size_t o = 0; o < outs; ++o) {
      const auto j = static_cast<size_t>(tt.output_shard[static_cast<size_t>(t)][o]);
      out_[o] = &values({n.id, static_cast<int32_t>(o)})[j];
      dout_[o] = &grads({n.id, static_cast<int32_t>(o)})[j];
    }
    const bool clock = tracing(), marks = timing_ && !clock;
    const auto t0 = clock ? backend_.now() : Backend::Clock::time_point{};
    const int64_t m0 = marks ? backend_.mark() : 0;
    backend_.backward(n, context(n.id, t), std::span(in_.data(), ins),
                      std::span(out_.data(), outs), std::span(dout_.data(), outs), std::span(din_.data(), ins));
    if (marks) timed_calls_.push_back({n.id, TimedPart::kBackward, m0, backend_.mark()});
    if (clock) {
      const auto t1 = backend_.now();
      if (timing_) kernel_times_[static_cast<size_t>(n.id)].backward += std::chrono::duration<double>(t1 - t0).count();
      if (tracing()) recorder_->record(StepEventKind::kBackward, t, -1, t0, t1);
    }
    if (mixed())  // what this task's kernel wrote; sums of contributions stay FP32
      for (size_t i = 0; i < ins; ++i)
        if (din_[i]) backend_.round(*din_[i], plan_.precision);
    for (size_t i = 0; i < ins; ++i) {
      if (!is_float(i) || direct_[i]) continue;
      const Buffer& c = *din_[i];
      const int owner = plan_.owner(n.inputs[i], shards[i]);
      if (owner == me) {
        accumulate(n.inputs[i], shards[i], c);
        continue;
      }
      const int64_t message = tag(n, t * static_cast<int64_t>(ins) + static_cast<int64_t>(i), true);
      if (!once_per_step(n, i)) {
        comm_.send(owner, message, c.span());
        continue;
      }
      // Another device's shard read once per step: its gradient summed over
      // the micro-batches here and sent once, at the last.
      const Buffer& held = buffer(held_grads_, n.id, {t, i}, plan_.graph->shape(n.inputs[i]));
      if (slice_ == 0) backend_.copy(held, c);
      else backend_.add(held, c);
      if (slice_ + 1 == plan_.micro_batches) comm_.send(owner, message, held.span());
    }
  }
  for (size_t i = 0; i < ins; ++i)
    if (is_float(i) && !deferred_[static_cast<size_t>(n.id)][i]) backward_receives(n, i);
}

void DeviceExecutor::backward_receives(const Node& n, size_t i) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  switch (np.run) {
    case NodePlan::Run::kTasks: {
      // Contributions of the tasks run elsewhere to input shards this
      // device owns (index inputs have none).
      if (plan_.graph->shape(n.inputs[i]).dtype != DataType::kFloat32) break;
      if (once_per_step(n, i) && slice_ + 1 < plan_.micro_batches) break;  // summed by the senders until the last
      const TaskTable& tt = np.tasks;
      const auto ins = static_cast<int64_t>(n.inputs.size());
      for (int64_t t = 0; t < tt.tasks; ++t) {
        if (np.task_device[static_cast<size_t>(t)] == me) continue;
        const int64_t s = tt.input_shard[static_cast<size_t>(t)][i];
        if (plan_.owner(n.inputs[i], s) != me) continue;
        const Buffer& part = buffer(contributions_, n.id, {t, i}, plan_.graph->shape(n.inputs[i]));
        comm_.recv(np.task_device[static_cast<size_t>(t)], tag(n, t * ins + static_cast<int64_t>(i), true), part.span());
        accumulate(n.inputs[i], s, part);
      }
      break;
    }
    case NodePlan::Run::kMoves: move_receives(n, i); break;
    case NodePlan::Run::kPieces: piece_receives(n, true); break;
    default: break;
  }
}

void DeviceExecutor::backward_moves(const Node& n) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  auto src_of = [&](const Move& m) { return plan_.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard); };
  auto dst_of = [&](const Move& m) { return np.owner[static_cast<size_t>(m.output)][static_cast<size_t>(m.out_shard)]; };
  auto into = [&](const Move& m) -> const Buffer& { return first_touch(n.inputs[static_cast<size_t>(m.input)], m.in_shard); };
  // The transpose of a move: a cut's gradient is placed after receiving.
  for (size_t k = 0; k < np.moves.size(); ++k) {
    const Move& m = np.moves[k];
    if (dst_of(m) != me || src_of(m) != me) continue;
    const Buffer& dy = grads({n.id, m.output})[static_cast<size_t>(m.out_shard)];
    const auto [kind, offset] = move_kind(n, m);
    if (kind == Move::Kind::kPlace) backend_.add_from_block(into(m), dy, *offset);
    else if (kind == Move::Kind::kCut) backend_.add_block(into(m), *offset, dy);
    else backend_.add(into(m), dy);
  }
  if (!early_[1][static_cast<size_t>(n.id)]) move_sends(n, true);
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (!deferred_[static_cast<size_t>(n.id)][i]) move_receives(n, i);
}

// The transpose of a move into input i: a cut's gradient is placed after
// receiving.
void DeviceExecutor::move_receives(const Node& n, size_t i) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  for (size_t k = 0; k < np.moves.size(); ++k) {
    const Move& m = np.moves[k];
    if (static_cast<size_t>(m.input) != i) continue;
    const TensorRef x = n.inputs[i];
    const int src = plan_.owner(x, m.in_shard), dst = np.owner[static_cast<size_t>(m.output)][static_cast<size_t>(m.out_shard)];
    if (src != me || dst == me) continue;
    const Buffer& g = move_buffer(n, k);
    comm_.recv(dst, tag(n, static_cast<int64_t>(k), true), g.span());
    const Buffer& into = first_touch(x, m.in_shard);
    const auto [kind, offset] = move_kind(n, m);
    if (kind == Move::Kind::kCut) backend_.add_block(into, *offset, g);
    else backend_.add(into, g);
  }
}

}  // namespace pcgx::runtime
