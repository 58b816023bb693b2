#include "pcgx/runtime/device_executor.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "pcgx/pcg/error.h"
#include "pcgx/runtime/host_backend.h"

namespace pcgx::runtime {
namespace {

bool same_shape(const Tensor<float>& t, const ParallelTensorShape& s) {
  if (t.shape.size() != s.dims.size()) return false;
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (t.shape[d] != s.dims[d].size) return false;
  return true;
}

}  // namespace

DeviceExecutor::DeviceExecutor(const ExecutionPlan& plan, Communicator& comm)
    : plan_(plan), comm_(comm), host_comm_(comm), owned_(std::make_unique<HostBackend>()), backend_(*owned_) {
  init();
}

DeviceExecutor::DeviceExecutor(const ExecutionPlan& plan, Communicator& comm, Backend& backend, Communicator* host)
    : plan_(plan), comm_(comm), host_comm_(host ? *host : comm), backend_(backend) {
  init();
}

DeviceExecutor::~DeviceExecutor() = default;

void DeviceExecutor::init() {
  const ExecutionPlan& plan = plan_;
  const Graph& g = *plan.graph;
  for (const Node& n : g.nodes())
    if (plan.nodes[static_cast<size_t>(n.id)].run == NodePlan::Run::kTasks)
      if (const std::string why = backend_.unsupported(n); !why.empty())
        throw Error(describe(n) + ": the " + backend_.name() + " backend cannot run it: " + why);
  values_.resize(g.size());
  grads_.resize(g.size());
  touched_.resize(g.size());
  contexts_.resize(g.size());
  source_offsets_.resize(g.size());
  received_.resize(g.size());
  received_once_.resize(g.size());
  move_buffers_.resize(g.size());
  contributions_.resize(g.size());
  scratch_of_.resize(g.size());
  kernel_times_.resize(g.size());
  partial_sums_.resize(g.size());
  held_grads_.resize(g.size());
  micro_.resize(g.size());
  pass_.resize(g.size());
  staged_.resize(g.size());
  for (const Node& n : g.nodes()) {
    const StepPhase ph = plan.phase.empty() ? StepPhase::kMicro : plan.phase[static_cast<size_t>(n.id)];
    pass_[static_cast<size_t>(n.id)] = ph == StepPhase::kStep ? 0 : ph == StepPhase::kAfter ? 2 : 1;
    for (const ParallelTensorShape& s : n.outputs) micro_[static_cast<size_t>(n.id)].push_back(s.slices() > 1);
  }
  size_t arity = 1, outputs = 1;
  for (const Node& n : g.nodes()) {
    const auto id = static_cast<size_t>(n.id);
    // The first operator of a layout change run in one step writes its
    // partner's output, nothing of its own (step_communication.h).
    const bool head = plan.nodes[id].to >= 0 && plan.nodes[id].to != n.id;
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const ParallelTensorShape& s = n.outputs[o];
      auto& v = values_[id].emplace_back(static_cast<size_t>(s.num_shards()));
      auto& d = grads_[id].emplace_back(static_cast<size_t>(s.num_shards()));
      touched_[id].emplace_back(static_cast<size_t>(s.num_shards()), 0);
      for (int64_t k = 0; k < s.num_shards() && !head; ++k)
        if (owns({n.id, static_cast<int32_t>(o)}, k)) {
          v[static_cast<size_t>(k)] = allocate(s.slice_shape());  // one micro-batch's
          d[static_cast<size_t>(k)] = allocate(s.slice_shape());
        }
    }
    if (n.op->op_class == OpClass::kSource || plan.layouts.sliced(n.id)) {  // filled from a logical value: their blocks, once
      const ParallelTensorShape& s = n.outputs[0];
      std::vector<int64_t> block;
      int64_t slot = 0;
      for (int64_t k = 0; k < s.num_shards(); ++k) {
        s.shard_coords(k, slot, block);
        source_offsets_[id].push_back(s.block_offset(block));
      }
    }
    const TaskTable& tt = plan.nodes[id].tasks;
    for (int64_t t = 0; t < tt.tasks; ++t) contexts_[id].push_back(tt.context(t));
    arity = std::max(arity, n.inputs.size());
    outputs = std::max(outputs, n.outputs.size());
  }
  bucket_buffers_.resize(plan.buckets.size());
  init_zero();
  init_recompute();
  sliced_from_.resize(g.size());
  for (const Node& n : g.nodes())
    if (plan.layouts.sliced(n.id)) sliced_from_[static_cast<size_t>(plan.layouts.root[static_cast<size_t>(n.id)])].push_back(n.id);
  init_precision();
  in_.resize(arity), din_.resize(arity), direct_.resize(arity);
  out_.resize(outputs), dout_.resize(outputs);
  // Forward, a node's inputs are final once its last producer has run
  // (sources and the layouts sliced from them before the step: those sends
  // go first); backward, a node's output gradient once its first reader
  // (the last to run backward) has, or at once when nothing reads it.
  const auto consumers = g.consumers();
  for (auto& v : sends_after_) v.resize(g.size() + 3);  // + each pass's start
  for (auto& v : early_) v.assign(g.size(), 0);
  // Backward, a receive into a tensor's gradient waits until just before
  // the next of the tensor's readers to run backward: nothing writes that
  // gradient in between, so the contributions add up in the same order as
  // at the sender's turn (the same floats), and the device runs the nodes
  // in between meanwhile. Not where a node reads one tensor twice (its
  // inputs' receives would interleave differently).
  std::vector<std::vector<std::vector<NodeId>>> readers(g.size());  // [node][output]: ascending
  for (const Node& n : g.nodes()) readers[static_cast<size_t>(n.id)].resize(n.outputs.size());
  for (const Node& n : g.nodes())
    for (const TensorRef& in : n.inputs) {
      auto& r = readers[static_cast<size_t>(in.node)][static_cast<size_t>(in.output)];
      if (r.empty() || r.back() != n.id) r.push_back(n.id);
    }
  deferred_.resize(g.size());
  receives_before_.resize(g.size());
  for (size_t id = g.size(); id-- > 0;) {  // descending: each list in the order receives ran before
    const Node& n = g.node(static_cast<NodeId>(id));
    deferred_[id].assign(n.inputs.size(), 0);
    const NodePlan::Run run = plan.nodes[id].run;
    if (run != NodePlan::Run::kTasks && run != NodePlan::Run::kMoves && run != NodePlan::Run::kPieces) continue;
    for (size_t i = 0; i < (run == NodePlan::Run::kPieces ? 1 : n.inputs.size()); ++i) {
      const TensorRef x = n.inputs[i];
      if (std::count(n.inputs.begin(), n.inputs.end(), x) > 1) continue;
      const auto& r = readers[static_cast<size_t>(x.node)][static_cast<size_t>(x.output)];
      auto at = std::lower_bound(r.begin(), r.end(), n.id);
      while (at != r.begin() && pass_of(*(at - 1)) != pass_of(n.id)) --at;  // within the node's pass
      if (at == r.begin()) continue;  // the last reader to run backward: nothing to go on with
      if (once_per_step(n, i)) continue;  // a compute node's: received at the last micro-batch alone
      deferred_[id][i] = 1;
      receives_before_[static_cast<size_t>(*(at - 1))].emplace_back(n.id, i);
    }
  }
  for (const Node& n : g.nodes()) {
    const auto id = static_cast<size_t>(n.id);
    const NodePlan::Run run = plan.nodes[id].run;
    if (run == NodePlan::Run::kTasks || run == NodePlan::Run::kMoves || run == NodePlan::Run::kPieces) {
      // Producers of an earlier pass have run before this pass starts.
      NodeId last = -1;
      for (const TensorRef& in : n.inputs) {
        const Node& p = g.node(in.node);
        if (p.op->op_class != OpClass::kSource && !plan.layouts.sliced(p.id) && pass_of(p.id) == pass_of(n.id))
          last = std::max(last, in.node);
      }
      sends_after_[0][last < 0 ? g.size() + static_cast<size_t>(pass_of(n.id)) : static_cast<size_t>(last)].push_back(n.id), early_[0][id] = 1;
    }
    if (run == NodePlan::Run::kMoves || run == NodePlan::Run::kPieces) {
      const NodeId out = run == NodePlan::Run::kPieces ? plan.nodes[id].to : n.id;
      // Backward, readers of an earlier forward pass have run before this pass starts.
      NodeId first = static_cast<NodeId>(g.size());
      for (const auto& [reader, input] : consumers[static_cast<size_t>(out)])
        if (pass_of(reader) == pass_of(n.id)) first = std::min(first, reader);
      const size_t after = first == static_cast<NodeId>(g.size()) ? g.size() + static_cast<size_t>(pass_of(n.id)) : static_cast<size_t>(first);
      if (first > out) sends_after_[1][after].push_back(n.id), early_[1][id] = 1;
    }
  }
  // Backward, the readers run in descending order: send what they need first, first.
  for (auto& v : sends_after_[1]) std::reverse(v.begin(), v.end());
  init_pipeline();
  put_away_between_uses();
}

void DeviceExecutor::forward_sends(const Node& n, bool recompute) {
  at(n.id, recompute);
  switch (plan_.nodes[static_cast<size_t>(n.id)].run) {
    case NodePlan::Run::kTasks: forward_compute_sends(n); break;
    case NodePlan::Run::kMoves: move_sends(n, false); break;
    case NodePlan::Run::kPieces: piece_sends(n, false); break;
    default: break;
  }
}

void DeviceExecutor::backward_sends(const Node& n) {
  at(n.id, true);
  switch (plan_.nodes[static_cast<size_t>(n.id)].run) {
    case NodePlan::Run::kMoves: move_sends(n, true); break;
    case NodePlan::Run::kPieces: piece_sends(n, true); break;
    default: break;
  }
}

int64_t DeviceExecutor::tag(const Node& n, int64_t index, bool backward) const {
  return ((static_cast<int64_t>(n.id) << 32) | index) * 2 + (backward ? 1 : 0);
}

const Buffer& DeviceExecutor::buffer(std::vector<std::map<Slot, Buffer>>& pool, NodeId node, Slot slot, const ParallelTensorShape& shape) {
  auto& m = pool[static_cast<size_t>(node)];
  auto it = m.find(slot);
  if (it == m.end()) it = m.emplace(slot, allocate(shape.slice_shape())).first;
  return it->second;
}

const Buffer& DeviceExecutor::move_buffer(const Node& n, size_t k) {
  const Move& m = plan_.nodes[static_cast<size_t>(n.id)].moves[k];
  return buffer(move_buffers_, n.id, {static_cast<int64_t>(k), 0},
                move_kind(n, m).first == Move::Kind::kCut ? n.outputs[static_cast<size_t>(m.output)]
                                           : plan_.graph->shape(n.inputs[static_cast<size_t>(m.input)]));
}

void DeviceExecutor::accumulate(TensorRef t, int64_t shard, const Buffer& g) {
  backend_.add(first_touch(t, shard), g);
}

const Buffer& DeviceExecutor::block_buffer(std::vector<std::map<Slot, Buffer>>& pool, NodeId node, Slot slot,
                                           std::span<const int64_t> extent) {
  auto& m = pool[static_cast<size_t>(node)];
  auto it = m.find(slot);
  if (it == m.end()) it = m.emplace(slot, allocate(extent)).first;
  return it->second;
}

Tensor<float> DeviceExecutor::download(const Buffer& b) const {
  if (!b || !b.data) return {};  // none, or freed until recomputed
  const std::span<const int64_t> shape = backend_.shape(b);
  Tensor<float> t(std::vector<int64_t>(shape.begin(), shape.end()));
  backend_.download(b, t.data);
  return t;
}

Tensor<float> DeviceExecutor::value(TensorRef t, int64_t shard) const {
  return download(values_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)][static_cast<size_t>(shard)]);
}

Tensor<float> DeviceExecutor::gradient(TensorRef t, int64_t shard) const {
  return download(grads_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)][static_cast<size_t>(shard)]);
}

void DeviceExecutor::set_source(NodeId node, const Tensor<float>& logical) {
  const ParallelTensorShape& s = plan_.graph->node(node).outputs[0];
  if (!same_shape(logical, s)) throw Error(describe(plan_.graph->node(node)) + ": value has the wrong shape");
  // ZeRO's master blocks come from the new value: under mixed precision
  // at once, from the value before it is rounded; else the blocks of
  // copies that exist only while used at once (their copies taken back
  // meanwhile, outside the step), the others before the next gather or
  // update.
  std::vector<size_t> windowed;
  std::optional<OutsideStep> outside;
  const TensorRef p = plan_.graph->node(node).op->is_weight ? plan_.parameter[static_cast<size_t>(node)] : TensorRef{-1, 0};
  const bool blocks = p.node >= 0 && block_master(p);
  if (p.node >= 0 && sharded()) {
    for (size_t k = 0; k < zero_blocks_.size(); ++k) {
      ZeroBlock& z = zero_blocks_[k];
      const auto& parts = plan_.buckets[k].parts;
      if (z.member < 0 || std::none_of(parts.begin(), parts.end(), [&](const SyncPart& q) { return q.tensor == p; })) continue;
      if (!blocks) z.current = false, masters_current_ = false;
      if (z.weights_windowed) windowed.push_back(k);
    }
    if (!windowed.empty() || blocks) outside.emplace(*this);
    for (size_t k : windowed) bring_back(k, kWeightCopies);
  }
  auto fill = [&](NodeId id) {
    const auto& offsets = source_offsets_[static_cast<size_t>(id)];
    const int64_t shards = plan_.graph->node(id).outputs[0].num_shards();
    for (int64_t k = 0; k < shards; ++k)
      if (owns({id, 0}, k)) backend_.upload_block(logical, offsets[static_cast<size_t>(k)], values_[static_cast<size_t>(id)][0][static_cast<size_t>(k)]);
  };
  fill(node);
  bool staged = false;
  for (NodeId id : sliced_from_[static_cast<size_t>(node)]) {
    if (!micro({id, 0})) fill(id);
    else if (!staged) staged_[static_cast<size_t>(node)] = logical, staged = true;  // each micro-batch's slices at its turn (no allocation after the first step)
  }
  if (blocks) write_master_blocks(p);
  if (mixed()) round_source(node);
  for (size_t k : windowed) {
    if (!blocks) load_master_block(k);
    put_away(k, kWeightCopies);
  }
}

std::vector<std::pair<TensorRef, int64_t>> DeviceExecutor::parameter_shards() const {
  std::vector<std::pair<TensorRef, int64_t>> out;
  for (const Node& n : plan_.graph->nodes()) {
    if (!n.op->is_weight) continue;
    const TensorRef p = plan_.parameter[static_cast<size_t>(n.id)];
    for (int64_t k = 0; k < plan_.graph->shape(p).num_shards(); ++k)
      if (owns(p, k)) out.emplace_back(p, k);
  }
  return out;
}

bool DeviceExecutor::member(const SyncBucket& b) const {
  return std::binary_search(b.devices.begin(), b.devices.end(), comm_.rank());
}

void DeviceExecutor::settle_timings() {
  if (timed_calls_.empty()) return;
  backend_.read_marks(mark_seconds_);
  for (const TimedCall& c : timed_calls_) {
    KernelTime& k = kernel_times_[static_cast<size_t>(c.node)];
    const double seconds = mark_seconds_[static_cast<size_t>(c.to)] - mark_seconds_[static_cast<size_t>(c.from)];
    switch (c.part) {
      case TimedPart::kForward: k.forward += seconds, ++k.tasks; break;
      case TimedPart::kRecompute: k.recompute += seconds, ++k.reruns; break;  // a re-run: not the forward's own time
      case TimedPart::kBackward: k.backward += seconds; break;
    }
  }
  timed_calls_.clear();
}

void DeviceExecutor::pack_gradients(const SyncBucket& bucket, const Buffer& flat) {
  // This device's copies of each block, summed into the bucket: the first
  // copied, the others added (a block with one copy here, the usual case,
  // costs a copy in and a copy out). A bucket groups blocks by the devices
  // their copies live on, so each of its devices holds every part.
  int64_t at = 0;
  for (const SyncPart& part : bucket.parts) {
    bool first = true;
    for (int64_t shard : part.shards) {
      if (!owns(part.tensor, shard)) continue;
      const Buffer& g = grads(part.tensor)[static_cast<size_t>(shard)];
      if (first) backend_.set_range(flat, at, g);
      else backend_.add_range(flat, at, g);
      first = false;
    }
    at += part.floats;
  }
}

void DeviceExecutor::unpack_gradients(const SyncBucket& bucket, const Buffer& flat) {
  int64_t at = 0;
  for (const SyncPart& part : bucket.parts) {
    for (int64_t shard : part.shards)
      if (owns(part.tensor, shard)) backend_.copy_range(grads(part.tensor)[static_cast<size_t>(shard)], flat, at);
    at += part.floats;
  }
}

void DeviceExecutor::synchronize_gradients() {
  if (sharded()) load_master_blocks();
  if (syncs_micro_batches()) {  // the others' after their backward passes
    if (micro_batches_synced_ != plan_.micro_batches - 1)
      throw Error(std::string("ZeRO ") + name(highest_zero(plan_.zero, plan_.zero_weights)) + ": " + std::to_string(micro_batches_synced_) + " of the step's first " + std::to_string(plan_.micro_batches - 1) +
                  " micro-batches synchronized; run the step with forward_backward()");
    reduce_scatter_micro_batch(true);
    micro_batches_synced_ = 0;
    return;
  }
  for (size_t k = 0; k < plan_.buckets.size(); ++k) {
    const SyncBucket& bucket = plan_.buckets[k];
    if (!member(bucket) || zero_blocks_[k].grads_windowed) continue;  // (those reduce-scattered in the backward pass)
    Buffer& flat = bucket_buffers_[k];
    if (!flat) flat = allocate(std::vector<int64_t>{bucket.floats});  // once: the size never changes
    // Packing, the all-reduce and unpacking are one recorded event: what
    // CostModel::bucket_time prices.
    auto sync = [&] {
      if (sharded()) return reduce_scatter_bucket(k);
      const auto t0 = timing_ ? backend_.now() : Backend::Clock::time_point{};
      pack_gradients(bucket, flat);
      const auto t1 = timing_ ? backend_.now() : Backend::Clock::time_point{};
      if (bucket.devices.size() > 1)
        comm_.all_reduce(bucket.devices, flat.span(), collective_tag(static_cast<NodeId>(plan_.graph->size()), static_cast<int64_t>(k), true));
      const auto t2 = timing_ ? backend_.now() : Backend::Clock::time_point{};
      unpack_gradients(bucket, flat);
      if (timing_) {
        bucket_copy_seconds_ += std::chrono::duration<double>((t1 - t0) + (backend_.now() - t2)).count();
        bucket_copy_bytes_ += static_cast<double>(bucket.floats) * sizeof(float);
      }
    };
    if (bucket.devices.size() > 1) collective(StepEventKind::kGradientSync, static_cast<int64_t>(k), sync);
    else sync();
  }
}

double DeviceExecutor::forward() {
  if (plan_.pipeline) throw Error("a plan with a pipeline schedule runs its steps with forward_backward()");
  if (plan_.micro_batches == 1) {
    forward_pass(1);
    return read_loss();
  }
  forward_pass(0);
  for (int64_t k = 0; k < plan_.micro_batches; ++k) enter_slice(k), forward_pass(1);
  forward_pass(2);
  return read_loss();
}

void DeviceExecutor::forward_pass(int pass) {
  const Graph& g = *plan_.graph;
  for (NodeId c : sends_after_[0][g.size() + static_cast<size_t>(pass)]) forward_sends(g.node(c));
  for (const Node& n : g.nodes())
    if (pass_of(n.id) == pass) forward_node(n);
}

void DeviceExecutor::forward_node(const Node& n) {
  const Graph& g = *plan_.graph;
  at(n.id, false);
  acquire(n.id);
  gather_before(n, false);
  run_forward(n);
  zero_after_forward(n);
  for (NodeId c : sends_after_[0][static_cast<size_t>(n.id)]) forward_sends(g.node(c));
  for (size_t s : free_after_forward_[static_cast<size_t>(n.id)]) release_segment(plan_.segments[s]);
  for (NodeId f : free_nodes_after_forward_[static_cast<size_t>(n.id)]) release_node(f);
}

void DeviceExecutor::run_forward(const Node& n) {
  switch (plan_.nodes[static_cast<size_t>(n.id)].run) {
    case NodePlan::Run::kTasks: forward_compute(n); break;
    case NodePlan::Run::kMoves: forward_moves(n); break;
    case NodePlan::Run::kPieces: run_pieces(n, false); break;
    case NodePlan::Run::kAllReduce: forward_all_reduce(n); break;
    case NodePlan::Run::kSliced:
    case NodePlan::Run::kDone: break;
  }
  // A layout change run in one step wrote its partner's output (a sum under
  // a reduce-scatter or an all-reduce): rounded there.
  const NodeId to = plan_.nodes[static_cast<size_t>(n.id)].to;
  if (mixed() && rounds_[static_cast<size_t>(n.id)]) round_outputs(to >= 0 ? to : n.id);
}

double DeviceExecutor::read_loss() {
  // The loss to device 0: a host float, so through the host communicator
  // (a staging one would treat its address as device memory).
  const TensorRef out = plan_.graph->outputs().at(0);
  const int holder = plan_.owner(out, 0);
  const int64_t loss_tag = -(int64_t{1} << 62);
  float loss = 0.f;
  if (holder == comm_.rank()) {
    loss = backend_.element(values(out)[0], 0);
    if (holder != 0) host_comm_.send(0, loss_tag, std::span<const float>(&loss, 1));
  } else if (comm_.rank() == 0) {
    host_comm_.recv(holder, loss_tag, std::span<float>(&loss, 1));
  }
  return comm_.rank() == 0 ? loss : 0.0;
}

void DeviceExecutor::forward_compute_sends(const Node& n) {
  if (rerun_keeps_inputs()) return;
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const TaskTable& tt = np.tasks;
  const int me = comm_.rank();
  const size_t ins = n.inputs.size();
  for (int64_t t = 0; t < tt.tasks; ++t) {
    const int dev = np.task_device[static_cast<size_t>(t)];
    if (dev == me) continue;
    for (size_t i = 0; i < ins; ++i) {
      const int64_t s = tt.input_shard[static_cast<size_t>(t)][i];
      if (slice_ > 0 && once_per_step(n, i)) continue;  // sent at the first micro-batch
      if (plan_.owner(n.inputs[i], s) == me)
        comm_.send(dev, tag(n, t * static_cast<int64_t>(ins) + static_cast<int64_t>(i), false), values(n.inputs[i])[static_cast<size_t>(s)].span());
    }
  }
}

void DeviceExecutor::forward_compute(const Node& n) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const TaskTable& tt = np.tasks;
  const int me = comm_.rank();
  const size_t ins = n.inputs.size(), outs = n.outputs.size();
  if (!early_[0][static_cast<size_t>(n.id)]) forward_compute_sends(n);
  for (int64_t t = 0; t < tt.tasks; ++t) {
    if (np.task_device[static_cast<size_t>(t)] != me) continue;
    for (size_t i = 0; i < ins; ++i) {
      const int64_t s = tt.input_shard[static_cast<size_t>(t)][i];
      const int from = plan_.owner(n.inputs[i], s);
      if (from == me) {
        in_[i] = &values(n.inputs[i])[static_cast<size_t>(s)];
        continue;
      }
      const Buffer& r = buffer(once_per_step(n, i) ? received_once_ : received_, n.id, {t, i}, plan_.graph->shape(n.inputs[i]));
      if ((slice_ == 0 || !once_per_step(n, i)) && !rerun_keeps_inputs())
        comm_.recv(from, tag(n, t * static_cast<int64_t>(ins) + static_cast<int64_t>(i), false), r.span());
      in_[i] = &r;
    }
    // A sum over micro-batches: the first written in place, the others
    // through a buffer and added.
    const bool adds = slice_ > 0 && plan_.phase[static_cast<size_t>(n.id)] == StepPhase::kAccumulate;
    for (size_t o = 0; o < outs; ++o) {
      const Buffer& y = values({n.id, static_cast<int32_t>(o)})[static_cast<size_t>(tt.output_shard[static_cast<size_t>(t)][o])];
      out_[o] = adds ? &buffer(partial_sums_, n.id, {t, o}, n.outputs[o]) : &y;
    }
    const bool clock = tracing(), marks = timing_ && !clock;
    const auto t0 = clock ? backend_.now() : Backend::Clock::time_point{};
    const int64_t m0 = marks ? backend_.mark() : 0;
    backend_.forward(n, context(n.id, t), std::span(in_.data(), ins), std::span(out_.data(), outs));
    if (marks) timed_calls_.push_back({n.id, recomputing_ ? TimedPart::kRecompute : TimedPart::kForward, m0, backend_.mark()});
    if (clock) {
      const auto t1 = backend_.now();
      if (timing_) {
        KernelTime& k = kernel_times_[static_cast<size_t>(n.id)];
        const double seconds = std::chrono::duration<double>(t1 - t0).count();
        if (recomputing_) k.recompute += seconds, ++k.reruns;  // a re-run: not the forward's own time
        else k.forward += seconds, ++k.tasks;
      }
      if (tracing()) recorder_->record(StepEventKind::kForward, t, -1, t0, t1);
    }
    if (adds)
      for (size_t o = 0; o < outs; ++o)
        backend_.add(values({n.id, static_cast<int32_t>(o)})[static_cast<size_t>(tt.output_shard[static_cast<size_t>(t)][o])], *out_[o]);
  }
}

// Forward a move sends its input shard (a cut: the block) from the source
// device; backward the transpose: the output gradient (a placement's: the
// block) back from the destination.
void DeviceExecutor::move_sends(const Node& n, bool backward) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  for (size_t k = 0; k < np.moves.size(); ++k) {
    const Move& m = np.moves[k];
    const int src = plan_.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard);
    const int dst = np.owner[static_cast<size_t>(m.output)][static_cast<size_t>(m.out_shard)];
    const int from = backward ? dst : src, to = backward ? src : dst;
    if (from != me || to == me) continue;
    const Buffer& x = backward ? grads({n.id, m.output})[static_cast<size_t>(m.out_shard)]
                               : values(n.inputs[static_cast<size_t>(m.input)])[static_cast<size_t>(m.in_shard)];
    const auto [kind, offset] = move_kind(n, m);
    if (kind == (backward ? Move::Kind::kPlace : Move::Kind::kCut)) {
      const Buffer& b = move_buffer(n, k);
      backend_.read_block(x, *offset, b);
      comm_.send(to, tag(n, static_cast<int64_t>(k), backward), b.span());
    } else {
      comm_.send(to, tag(n, static_cast<int64_t>(k), backward), x.span());
    }
  }
}

void DeviceExecutor::forward_moves(const Node& n) {
  const NodePlan& np = plan_.nodes[static_cast<size_t>(n.id)];
  const int me = comm_.rank();
  auto src_of = [&](const Move& m) { return plan_.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard); };
  auto dst_of = [&](const Move& m) { return np.owner[static_cast<size_t>(m.output)][static_cast<size_t>(m.out_shard)]; };
  auto input = [&](const Move& m) -> const Buffer& {
    return values(n.inputs[static_cast<size_t>(m.input)])[static_cast<size_t>(m.in_shard)];
  };
  if (!early_[0][static_cast<size_t>(n.id)]) move_sends(n, false);
  // A Batch's output gathers every micro-batch's slice: zeroed at the first.
  if (slice_ == 0 || plan_.phase[static_cast<size_t>(n.id)] != StepPhase::kAccumulate)
    for (size_t o = 0; o < n.outputs.size(); ++o)
      for (const Buffer& t : values({n.id, static_cast<int32_t>(o)}))
        if (t) backend_.fill(t, 0.f);
  for (size_t k = 0; k < np.moves.size(); ++k) {
    const Move& m = np.moves[k];
    if (dst_of(m) != me) continue;
    const Buffer& y = values({n.id, m.output})[static_cast<size_t>(m.out_shard)];
    const auto [kind, offset] = move_kind(n, m);
    if (src_of(m) == me) {
      if (kind == Move::Kind::kCut) backend_.add_from_block(y, input(m), *offset);
      else if (kind == Move::Kind::kPlace) backend_.add_block(y, *offset, input(m));
      else backend_.add(y, input(m));
      continue;
    }
    const Buffer& x = move_buffer(n, k);
    comm_.recv(src_of(m), tag(n, static_cast<int64_t>(k), false), x.span());
    if (kind == Move::Kind::kPlace) backend_.add_block(y, *offset, x);
    else backend_.add(y, x);
  }
}

}  // namespace pcgx::runtime
