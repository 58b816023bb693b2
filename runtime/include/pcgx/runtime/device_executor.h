#pragma once
// One device's share of a training step (docs/design.md "Runtime"). Every device
// holds an executor over the same plan and runs the same sequence of
// calls; each computes only its own tasks and moves, and exchanges shards
// through its Communicator.
//
// Order. Nodes run in graph order forward and in reverse backward, but a
// shard is sent as soon as it is final, not when its reader's turn comes:
// forward, right after its producer; backward, a layout change's gradient
// right after the last reader of its output (a compute node's input
// gradients already go out right after its kernel). Sends never block, so
// this is always safe, and a device running a branch beside another's
// (a ResNeXt downsample beside the block's convolutions) starts when its
// input exists, as the cost model and the simulator assume; sent in graph
// order, it waited for the whole block. Backward, receiving a gradient
// contribution waits until just before the next reader of its tensor runs
// backward, not at the sender's turn, so a device goes on with the block's
// other convolutions meanwhile; the contributions still add up in the same
// order.
//
// Memory. Every buffer a step needs (the shards it owns and their
// gradients, shards received from other devices, blocks cut for sending,
// gradient contributions on their way to another device) is allocated the
// first time it is needed and reused by every later step; kernels take
// their temporaries from per-thread scratch. A value no backward pass
// reads (ExecutionPlan::freed, pcg/saved_tensors.h: a Linear's output
// read only by a Reshape, partial sums before their reduce-scatter) is
// released after its last forward reader and acquired again before its
// node's next forward, so the step holds only what backward reads plus
// what the forward pass needs at once, as search's memory model counts
// (tests/runtime/freed_values_test.cpp). After the first step a
// single-device or data-parallel step allocates nothing, released buffers
// included (the backend reuses their memory: host_backend.h;
// tests/runtime_alloc/allocation_test.cpp counts).
//
// Micro-batches (execution_plan.h). A plan with pipelined tensors runs a
// step as one forward and backward pass per micro-batch: the buffers of
// pipelined tensors are one micro-batch's, reused by every micro-batch;
// each pass runs the nodes of its phase in the order above (sends early,
// receives deferred, within the pass); a remote input read once per step
// travels at the first micro-batch and its gradient, summed here, at the
// last.
//
// Pipeline schedules (ExecutionPlan::pipeline, set_pipeline). Each device
// runs its stage's program (pcg/pipeline_schedule.h): per step, the
// forward or backward of one micro-batch through one chunk, over the
// chunk's nodes (and, on this device, the nodes of other stages whose
// messages it sends or receives: a node another stage runs belongs here to
// the latest chunk of this stage it reads from, else the first that reads
// it). A chunk's micro-batch buffers (its nodes' pipelined outputs and the
// inputs they received) form an activation set: a forward step takes a
// free set, or allocates one, and keeps it until the micro-batch's
// backward through the chunk returns it, so a device holds as many sets
// per chunk as the schedule has micro-batches in flight there
// (activation_sets()). Messages pair up because both ends of a chunk
// boundary run their micro-batches in the same (ascending) order; the
// weights' gradients add up over the micro-batches in that order too, so
// every schedule gives the same bits as running them one at a time. A
// recomputed segment's re-run reads the inputs its tasks received in the
// forward step, kept in the set (the sending stage does not run this
// step, so nothing is sent again).
//
// Recomputation (execution_plan.h, RecomputeSegment). The outputs of a
// recomputed segment are freed (Backend::release) once their last forward
// reader has run; backward, just before that reader's gradient, the
// segment's nodes run their forward again, in order, messages and
// collectives included (every device re-runs the same nodes at the same
// point, so the messages pair up as in the forward pass), and their
// outputs are freed again after the segment's first node's gradient. The
// kernels are the forward pass's with the same offsets (dropout draws the
// same masks), so the gradients are the same bits as when everything is
// kept. A released segment's memory goes back to the backend, which
// reuses it (host_backend.h). What stays allocated:
// shards a re-run task receives from other devices and blocks in transit,
// and every segment whose readers overlap another's (each is freed after
// its own last reader), so the peak exceeds the memory model's one
// segment at a time where segments interleave.
//
// Mixed precision (the plan's `precision` bf16 or fp16; low_precision.h).
// Every float value a node writes forward (the losses' aside, which stay
// FP32) and every input gradient a kernel writes backward is rounded to the
// precision, so kernels compute on 16-bit values and accumulate in FP32;
// the model's inputs are rounded when set, except those only a loss reads
// (its targets). Gradient contributions add up in FP32: across readers,
// micro-batches and devices, and in the gradient buckets. The optimizer
// updates an FP32 master copy of each parameter shard, from which the
// compute copy the nodes read is rounded after every update; checkpoints
// and the final weights are the masters. The backward pass starts from the
// loss scale (set_loss_scale; FP16's dynamic scaling, trainer.h).
//
// Hardware. Every buffer is the backend's (backend.h) and every kernel,
// block copy and optimizer update runs there; the executor itself only
// orders the work and the messages, so the same executor drives the CPU
// and a GPU.
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/runtime/backend.h"
#include "pcgx/runtime/communicator.h"
#include "pcgx/runtime/execution_plan.h"
#include "pcgx/runtime/step_trace.h"

namespace pcgx::runtime {

// Time spent in one compute node's kernels (seconds, summed over its tasks
// run on a device while timing was on) and the number of those tasks. As
// TrainResult holds them, each task's clock read is taken off
// (clock_read_seconds in trainer.h).
struct KernelTime {
  double forward = 0, backward = 0;
  int64_t tasks = 0;
  // Forward tasks re-run in the backward pass (recomputation): their time
  // and count, apart, so forward/tasks stays one forward's.
  double recompute = 0;
  int64_t reruns = 0;
};

class DeviceExecutor {
 public:
  // On the host (host_backend.h), or on `backend`, which must outlive the
  // executor and whose memory `comm` must take. Values that live in host
  // memory whatever the backend (the loss sent to device 0) go through
  // `host` (default: `comm`, right when the backend's memory is the host's).
  // Throws pcgx::Error naming the first operator the backend cannot run.
  DeviceExecutor(const ExecutionPlan& plan, Communicator& comm);
  DeviceExecutor(const ExecutionPlan& plan, Communicator& comm, Backend& backend, Communicator* host = nullptr);
  ~DeviceExecutor();

  // Sets this device's shards of a source node, and of the layouts sliced
  // from it (execution_plan.h), from its logical value.
  void set_source(NodeId node, const Tensor<float>& logical);
  // Runs the forward pass; returns the loss (graph output 0, replica slot
  // 0) on device 0 and 0 elsewhere. A plan with micro-batches
  // (execution_plan.h) runs them one after the other, keeping the last.
  double forward();
  // Runs the backward pass of graph output 0 (seeded with 1). Not for a
  // plan with micro-batches, which keeps one micro-batch's activations:
  // forward_backward() runs those.
  void backward();
  // Forward and backward of one step, what the trainer runs: forward();
  // backward(); or, with M micro-batches, each one's forward then its
  // backward, the weights' gradients adding up (execution_plan.h says
  // which node runs when). Returns forward()'s loss.
  double forward_backward();
  // With a pipeline schedule: per chunk, the activation sets this device
  // has allocated, which is the most micro-batches it has held in flight
  // through that chunk (0 for another stage's chunk).
  std::vector<int64_t> activation_sets() const;
  // The parameter shards this device holds (ExecutionPlan::parameter), for
  // the optimizer: a weight's, or every copy of its stored layout.
  std::vector<std::pair<TensorRef, int64_t>> parameter_shards() const;
  // All-reduces the gradients of every stored layout's copies (each group
  // of shards holding the same block), bucket by bucket (the plan's), so
  // every copy takes the same step. Under ZeRO, reduce-scatters them
  // instead (below).
  void synchronize_gradients();

  // ZeRO stages 1 and 2 (the plan's `zero`, pcg/training_recipe.h). A
  // bucket of r devices is padded to r equal blocks; member i of the
  // bucket's (sorted) devices owns block i: synchronize_gradients()
  // reduce-scatters the gradients so that it receives the sum of block i
  // alone, the optimizer updates the device's master copy of block i of
  // the weights with the moments of block i alone, so each device keeps
  // 1/r of the optimizer state, and gather_weights() all-gathers the
  // updated blocks into every copy. The copies in and out of the buckets
  // are stage 0's: the gradients in, the weights out. Every copy then holds what stage 0's
  // update gives it, up to the order the reduce-scatter sums the r
  // gradients in (with 2 devices, the same bits). At stage 1 the
  // gradients are reduce-scattered after the backward pass; at stages 2 and
  // 3 each bucket as soon as the backward pass has written its gradients,
  // which then go (the ZeroBlock comment below says where not).
  //
  // What the optimizer updates on this device, the same list every step:
  // at stage 0 every parameter shard (parameter_shards() order; its master
  // under mixed precision); under ZeRO the shards outside any bucket, then
  // this device's block of each bucket it belongs to.
  struct UpdateList {
    std::vector<Buffer> params, grads;
  };
  UpdateList update_buffers() const;
  // After the optimizer's update: under ZeRO the updated blocks into every
  // copy of every bucket's weights; under mixed precision the compute
  // copies rounded (from the gathered blocks under ZeRO, from the masters
  // at stage 0). At stage 3
  // only the blocks kept whole (below the persistence threshold), unless
  // `whole` (checkpoints and the trained weights): each compute operator
  // gathers the other weights it synchronizes before its forward and again
  // before its backward (forward_node, backward_node), as the cost model
  // prices it; every weight block is its own bucket.
  // Adds the bytes this device sent to `bytes_sent` when given. A stage 3
  // copy exists only while its readers run (ZeroBlock below): gathered
  // whole, every copy stays until drop_whole_copies() (after reading them).
  // Taking copies back outside a step is not counted in buffer_bytes().
  void gather_weights(bool whole = false, int64_t* bytes_sent = nullptr);
  // The optimizer's state (`slots`, in update_buffers() order) as whole
  // shards in parameter_shards() order, as train_state.h reads and writes
  // it. At stage 0 that is `slots` itself. Under ZeRO, unsharded_moments
  // all-gathers every member's block of the moments into whole copies (every
  // device calls it, in step; adds the bytes it sent to `bytes_sent`);
  // moment_shards returns the same buffers untouched, for restore_state to
  // fill, and shard_moments then copies each device's block back into
  // `slots`.
  std::vector<ParameterSlot> unsharded_moments(std::span<const ParameterSlot> slots, int64_t* bytes_sent = nullptr);
  std::vector<ParameterSlot> moment_shards(std::span<const ParameterSlot> slots);
  void shard_moments(std::span<const ParameterSlot> slots);
  // After a checkpoint is gathered or restored: the whole moments and (at
  // stage 3) the whole weight copies given back, so a step holds what it
  // held before. Their memory outside the step is not counted in
  // buffer_bytes().
  void drop_whole_copies();

  // This device's shards of a node output and of its gradient (no buffer
  // for shards it does not own), in the backend's memory.
  std::vector<Buffer>& values(TensorRef t) { return values_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]; }
  std::vector<Buffer>& grads(TensorRef t) { return grads_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]; }
  // The same copied to the host (an empty tensor for a shard it does not
  // own, or a recomputed one freed until its segment runs again).
  Tensor<float> value(TensorRef t, int64_t shard) const;
  Tensor<float> gradient(TensorRef t, int64_t shard) const;
  Backend& backend() { return backend_; }
  // The most bytes of buffers this executor has held at once: values,
  // gradients, shards received and in transit, gradient buckets, ZeRO's
  // blocks. After the first step, the memory a step takes beside the
  // optimizer's state (with micro-batches, one micro-batch's activations;
  // with recomputation, the kept ones and the segments live at once;
  // under ZeRO 2 and 3, the whole weights and gradients only while used).
  // Not counted: what setting a weight or gathering the weights whole for
  // a checkpoint takes back outside a step (OutsideStep).
  int64_t buffer_bytes() const { return peak_floats_ * static_cast<int64_t>(sizeof(float)); }
  bool owns(TensorRef t, int64_t shard) const { return plan_.owner(t, shard) == comm_.rank(); }
  // The FP32 master copy of a parameter shard under mixed precision (what
  // the optimizer updates, checkpoints hold and training returns), else
  // the shard itself. Under ZeRO a bucketed shard's master is its
  // bucket's blocks (ZeroBlock::w: 1/r of it on each device, as the memory
  // model counts it); its whole copy here exists only from
  // gather_weights(true) to drop_whole_copies().
  const Buffer& master(TensorRef t, int64_t shard) const;
  // Whether the whole weights (a checkpoint's, the trained ones) must be
  // gathered first with gather_weights(true): under ZeRO 3 the copies
  // exist only while used, and under ZeRO with mixed precision the FP32
  // masters are blocks. The same answer on every device.
  bool gathers_whole_weights() const;
  // The seed of the backward pass (1 by default): FP16's loss scale.
  void set_loss_scale(float scale) { loss_scale_ = scale; }
  const ExecutionPlan& plan() const { return plan_; }

  // Kernel timing (for measured cost-model profiles): each kernel and
  // gradient-rule call is timed alone, so waiting for inputs and moving
  // shards are not counted. The times come from the backend's marks
  // (Backend::mark), read into kernel_times() by settle_timings(), once
  // per step; while a step is traced they come from the trace's clock
  // reads instead. Off by default.
  void set_timing(bool on) { timing_ = on; }
  void settle_timings();
  // Records every kernel and collective of this device into `r` while it is
  // on (step_trace.h); the communicator records the messages. Null: none.
  void set_recorder(StepRecorder* r) { recorder_ = r; }
  const std::vector<KernelTime>& kernel_times() const { return kernel_times_; }
  // With timing on: seconds spent copying gradients into buckets and the
  // sums back (the all-reduce aside), and the gradient bytes so copied.
  double bucket_copy_seconds() const { return bucket_copy_seconds_; }
  double bucket_copy_bytes() const { return bucket_copy_bytes_; }
  // Puts back totals saved before a step (a stalled one, trainer.h).
  void restore_kernel_times(const std::vector<KernelTime>& saved) { std::copy(saved.begin(), saved.end(), kernel_times_.begin()); }
  Communicator& communicator() { return comm_; }

 private:
  using Slot = std::pair<int64_t, size_t>;  // (task or move, input)

  // Buffers, send and receive order: what both constructors share.
  void init();
  // The backend's buffer, counted in buffer_bytes().
  Buffer allocate(std::span<const int64_t> shape) {
    const Buffer b = backend_.allocate(shape);
    held(b.numel);
    return b;
  }
  void held(int64_t floats) {
    buffer_floats_ += floats;
    // (Giving back never raises the peak: after OutsideStep the peak may sit
    // below what is held until those copies go.)
    if (floats > 0) peak_floats_ = std::max(peak_floats_, buffer_floats_);
  }
  int64_t buffer_floats_ = 0, peak_floats_ = 0;

  // Recomputation: per node, the segments (ExecutionPlan::segments) freed
  // after its forward, re-run before its backward, freed after its
  // backward; the nodes no backward reads (ExecutionPlan::freed) freed
  // after its forward; whether its outputs are freed now.
  std::vector<std::vector<size_t>> free_after_forward_, recompute_before_, free_after_backward_;
  std::vector<std::vector<NodeId>> free_nodes_after_forward_;
  std::vector<char> released_;
  std::vector<int64_t> freed_floats_;  // per node: what its release gave back
  bool recomputing_ = false;  // kernel timing counts the re-run apart
  // Under a pipeline schedule a re-run task reads the inputs it received
  // in the forward step, kept in the activation set: the devices that sent
  // them (another stage's among them) do not run this step.
  bool rerun_keeps_inputs() const { return recomputing_ && plan_.pipeline.has_value(); }
  void init_recompute();
  void release_segment(const RecomputeSegment& s);
  void release_node(NodeId n);
  void recompute_segment(const RecomputeSegment& s);
  void acquire(NodeId n);  // its outputs' buffers again, where freed
  void run_forward(const Node& n);  // its kernels, moves or collective

  // Mixed precision: per node, whether run_forward rounds its outputs
  // (and set_source an input's value); the masters of the parameter
  // shards, [node][output][shard] as values_; the backward pass's seed.
  std::vector<char> rounds_;
  std::vector<std::vector<std::vector<Buffer>>> masters_;
  float loss_scale_ = 1.f;
  bool mixed() const { return is_mixed(plan_.precision); }
  void init_precision();
  void round_outputs(NodeId n);
  // After set_source gave a weight its value: the masters of its parameter
  // shards take it whole (under ZeRO: its blocks, write_master_blocks), and
  // every layout of it is rounded.
  void round_source(NodeId n);
  // A parameter shard whose master is its bucket's blocks (ZeRO with mixed
  // precision), its whole master given back between checkpoints
  // (whole_masters_away_, as ZeroBlock::away).
  bool block_master(TensorRef t) const;
  char whole_masters_away_ = 0;
  template <class F>
  void each_whole_master(F&& f);
  // Under ZeRO with mixed precision: parameter t's FP32 value (its shards,
  // set, not yet rounded) into this device's block of every bucket
  // holding it.
  void write_master_blocks(TensorRef t);
  // The compute copies from the masters, after an update.
  void refresh_compute_weights();

  // Micro-batches (execution_plan.h). A node's pass: 0 for kStep, 1 for
  // kMicro and kAccumulate (run once per micro-batch), 2 for kAfter.
  int pass_of(NodeId n) const { return pass_[static_cast<size_t>(n)]; }
  bool micro(TensorRef t) const { return micro_[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)] != 0; }
  void forward_pass(int pass);
  void backward_pass(int pass);
  // One node's part of a pass here, with the sends, receives, re-runs and
  // releases that go with it.
  void forward_node(const Node& n);
  void backward_node(const Node& n);
  // Zeroes the gradients (all, or the pipelined tensors' only).
  void clear_gradients(bool micro_only);
  // The same for a pipeline step of `chunk`: only the gradients its
  // backward can write (chunk_grads_), the others being cleared by their
  // own chunk's steps before they are written again. With `writer` (the
  // chunk less one, under an interlaced schedule): the gradients of
  // tensors read across chunks on this device (crosses_) are cleared only
  // where their chunk is `writer`'s.
  void clear_chunk_gradients(int64_t chunk, std::optional<int64_t> writer);
  void clear_tensor_gradients(TensorRef t);  // every shard of t here
  void clear_gradient(TensorRef t, int64_t shard);
  // Whether node n's kernel adds input i's part of a later micro-batch
  // straight into the gradient summed over them (Backend::accumulates_gradient).
  bool sums_in_place(const Node& n, size_t i) const;
  // A gradient shard no writer has touched since it was cleared lazily
  // (its first writer was to overwrite it) is zeroed now: a bucket reads
  // it whole.
  void settle_gradient(TensorRef t, int64_t shard);
  void seed_loss();
  double read_loss();
  // Makes micro-batch k the running one (the kernels' offsets and the
  // Pipeline and Batch moves become k's: context(), move_kind()) and fills
  // the pipelined layouts of the inputs with k's slices; with `chunk` >= 0,
  // only that chunk's input layouts are filled (none when `fill` is false).
  void enter_slice(int64_t k, int64_t chunk = -1, bool fill = true);
  // Per micro-batch k: each pass-1 node's task contexts here, their whole
  // shards' offsets moved to k's slice, and where a Pipeline (Batch) cuts
  // (places) k's slice; made once (init_slices), so that entering a
  // micro-batch costs its input slices' copies alone. A pass-1 node's
  // kernels read context(), the running slice's.
  std::vector<std::vector<std::vector<TaskContext>>> slice_contexts_;  // [k][node][task]
  std::vector<std::vector<std::vector<int64_t>>> slice_offsets_;       // [k][node]
  const TaskContext& context(NodeId n, int64_t t) const {
    const auto id = static_cast<size_t>(n);
    const auto& sliced = slice_contexts_.empty() ? contexts_[id] : slice_contexts_[static_cast<size_t>(slice_)][id];
    return (sliced.empty() ? contexts_[id] : sliced)[static_cast<size_t>(t)];
  }
  // A move's kind and offset this pass: a Pipeline's copy cuts the
  // micro-batch's slice, a Batch's places it.
  std::pair<Move::Kind, const std::vector<int64_t>*> move_kind(const Node& n, const Move& m) const;
  // A compute node's input that a task reads once per step, not per
  // micro-batch (sent and received at the first, its gradient at the last).
  bool once_per_step(const Node& n, size_t i) const {
    return plan_.micro_batches > 1 && pass_of(n.id) == 1 && !micro(n.inputs[i]);
  }
  std::vector<int> pass_;
  std::vector<std::vector<char>> micro_;  // [node][output]: pipelined
  int64_t slice_ = 0;
  std::vector<Tensor<float>> staged_;  // per Input with pipelined layouts: this step's value
  std::vector<int64_t> offset_scratch_;
  // Per node: outputs of kAccumulate tasks after the first micro-batch,
  // added into the outputs; gradients for another device's shard of a
  // once_per_step input, summed until the last micro-batch.
  std::vector<std::map<Slot, Buffer>> partial_sums_, held_grads_;

  // Pipeline schedules (pipeline_steps.cpp). Per node, the chunk in whose
  // steps this device does its part (-1: before any, with a pipeline
  // none); per chunk, its pass-1 nodes here and its pipelined tensors.
  std::vector<int64_t> step_chunk_;
  std::vector<std::vector<NodeId>> chunk_nodes_;
  std::vector<std::vector<TensorRef>> chunk_tensors_;
  std::vector<std::vector<std::vector<char>>> chunk_shards_;  // [chunk][tensor][shard]: held here
  std::vector<std::vector<TensorRef>> chunk_grads_;  // per chunk: the pipelined tensors its nodes read or write
  // One micro-batch's buffers of a chunk (see the class comment): per
  // chunk tensor its shards; per chunk node its received inputs and its
  // recomputation state.
  struct ActivationSet {
    std::vector<std::vector<Buffer>> values;
    std::vector<std::map<Slot, Buffer>> received;
    std::vector<char> released;
    std::vector<int64_t> freed;
  };
  std::vector<std::vector<ActivationSet>> free_sets_;     // per chunk
  std::map<std::pair<int64_t, int64_t>, ActivationSet> in_flight_;  // (chunk, micro-batch)
  std::vector<int64_t> sets_made_;                        // per chunk
  std::vector<PipelineStep> program_;                     // this device's stage's
  std::vector<char> starts_freed_;                        // per node: recomputed or freed (a new set's start released)
  // Per node: 1 when a node stepping in the next chunk on this device reads
  // its output (an interlaced chunk beside one of this stage's: both run
  // here, in different steps).
  std::vector<char> crosses_;
  void init_pipeline();
  void init_slices();  // slice_contexts_, slice_offsets_
  double scheduled_step();
  ActivationSet new_set(int64_t chunk);
  void swap_set(int64_t chunk, ActivationSet& s);  // in, and out again
  void chunk_forward(int64_t chunk);
  void chunk_backward(int64_t chunk);
  // Inputs received once per step (weights read per micro-batch on
  // another device): kept outside the activation sets.
  std::vector<std::map<Slot, Buffer>> received_once_;

  void forward_compute(const Node& n);
  void forward_moves(const Node& n);
  void backward_compute(const Node& n);
  void backward_moves(const Node& n);
  // What a node sends from this device (forward: its inputs' shards to the
  // devices that read them; backward: a layout change's gradient), run
  // early where sends_after_ says, else at the node's own turn.
  void forward_sends(const Node& n, bool recompute = false);  // recompute: charged to the backward pass
  void backward_sends(const Node& n);
  void forward_compute_sends(const Node& n);
  void move_sends(const Node& n, bool backward);
  // What a node receives backward into the gradient of its input i (and
  // adds), at its own turn or deferred (deferred_).
  void backward_receives(const Node& n, size_t i);
  void move_receives(const Node& n, size_t i);
  void piece_receives(const Node& n, bool backward);
  // A piece's devices in a pass (forward from its input shard's owner to its
  // output shard's, backward the other way), and its block's shard: the
  // input value forward, the output gradient backward.
  std::pair<int, int> piece_ends(const Node& n, const Piece& p, bool backward) const;
  const Buffer& piece_source(const Node& n, const Piece& p, bool backward);
  // Layout changes in one step (layout_change.cpp).
  void run_pieces(const Node& n, bool backward);
  void piece_sends(const Node& n, bool backward);
  void forward_all_reduce(const Node& n);
  void backward_all_reduce(const Node& n);
  int64_t tag(const Node& n, int64_t index, bool backward) const;
  // The tag of a collective of node `node`'s group `group`, the same on
  // every member.
  static int64_t collective_tag(NodeId node, int64_t group, bool backward);
  // A buffer of one shard of `shape`, kept for (node, slot) across steps.
  const Buffer& buffer(std::vector<std::map<Slot, Buffer>>& pool, NodeId node, Slot slot, const ParallelTensorShape& shape);
  // What move k of shard-level node n carries between devices, in both
  // passes: the cut block (Repartition) or the whole input shard.
  const Buffer& move_buffer(const Node& n, size_t k);
  // Adds a gradient contribution into a shard this device owns.
  void accumulate(TensorRef t, int64_t shard, const Buffer& g);
  Tensor<float> download(const Buffer& b) const;

  const ExecutionPlan& plan_;
  Communicator& comm_;
  Communicator& host_comm_;  // for host memory (the loss)
  std::unique_ptr<Backend> owned_;  // the host's, when none was given
  Backend& backend_;
  std::vector<std::vector<std::vector<Buffer>>> values_, grads_;  // [node][output][shard]
  // Per gradient shard, bits of GradState: whether it has received
  // anything this backward pass (the first contribution is written into
  // it directly), and whether the last clear left it unzeroed because a
  // kernel that overwrites (Backend::overwrites_gradient) wrote it first
  // the pass before: the same kernel comes first again (a plan's order is
  // the same every step), and any other first writer zeroes it first
  // (first_touch), so no stale value is ever read.
  enum GradState : char { kTouched = 1, kUnzeroed = 2, kOverwrittenFirst = 4 };
  std::vector<std::vector<std::vector<char>>> touched_;
  // Marks shard s of x's gradient touched, zeroing it first when it was
  // left unzeroed; returns it.
  const Buffer& first_touch(TensorRef x, int64_t s);
  std::vector<std::vector<TaskContext>> contexts_;  // [node][task]
  std::vector<std::vector<std::vector<int64_t>>> source_offsets_;  // [source node][shard]
  // Input shards a task received from another device (kept for backward),
  // blocks in transit for moves, and gradient contributions of a task
  // sent to or received from another device.
  std::vector<std::map<Slot, Buffer>> received_, move_buffers_, contributions_;
  // A task's contribution to a gradient shard this device holds that the
  // kernel cannot write in place (backward_compute): added into the shard
  // right after the kernel, so one buffer per input position and shape
  // serves every node. A buffer per node would hold a second copy of every
  // weight gradient summed over micro-batches. A deque: references stay
  // valid while a task's later inputs add entries.
  std::deque<std::pair<size_t, Buffer>> scratch_contributions_;
  std::vector<std::map<Slot, const Buffer*>> scratch_of_;  // per node and (task, input): its scratch, found once
  const Buffer& scratch_contribution(NodeId node, Slot slot, const ParallelTensorShape& shape);
  std::vector<std::vector<NodeId>> sliced_from_;  // [source]: the layouts filled from it
  std::vector<int> group_scratch_;
  std::vector<Buffer> bucket_buffers_;  // per bucket of the plan, allocated on first use
  // Under ZeRO, per bucket this device belongs to (sharded_update.cpp):
  // its place among the bucket's devices, the block size, and its block of
  // the weights and of the reduced gradients.
  //
  // What stays of the whole bucket between its uses. Its flat buffer (the
  // reduce-scatter's input, the all-gather's output) exists only while one
  // runs. At stage 3 the copies of its weights exist only from the gather
  // before its first reader's forward to its last reader's, and again from
  // the gather before its first backward (or the re-run of a recomputed
  // segment holding a reader) to its last; at stages 2 and 3 the whole
  // gradients only from the first backward writing them to the last, after
  // which the bucket is reduce-scattered, as DeepSpeed's ZeRO-2 and FSDP
  // free them. `windowed` says where that holds (init_zero_windows: no
  // pipeline of several chunks, every reader runs in each micro-batch, and for the
  // weights every reader is a task on the device holding the copy it
  // reads); elsewhere the copies stay (as at stage 1) and the bucket is
  // reduce-scattered after the pass.
  enum Copies : uint8_t { kWeightCopies, kGradientCopies, kFlat };
  struct ZeroBlock {
    int member = -1;
    int64_t floats = 0;
    Buffer w, g;
    Buffer part;  // ZeRO 2 and 3 over micro-batches: one micro-batch's reduced block, before it is added to `g`
    bool weights_windowed = false, grads_windowed = false;
    bool current = false;  // `w` holds this device's block of the weights last set
    // Per Copies: 0 held, 1 given back (the backend kept the memory), 2 freed.
    char away[3] = {0, 0, 0};
  };
  std::vector<ZeroBlock> zero_blocks_;  // per bucket of the plan
  // Whole-shard moments of the bucketed copies, parameter_shards() order
  // (unsharded_moments), allocated at the first checkpoint.
  std::vector<ParameterSlot> full_moments_;
  char full_moments_away_ = 0;  // as ZeroBlock::away
  // f(Buffer&) on each whole moment allocated here (the bucketed shards').
  template <class F>
  void each_whole_moment(F&& f);
  bool sharded() const { return shards_optimizer(plan_.zero); }
  // Per node, what ZeRO does at its turn with the buckets listed: stage 3
  // gathers before its forward or its backward, and gives the weight copies
  // back after either; stages 2 and 3 take the whole gradients back before
  // its backward, and reduce-scatter them and give them back after it.
  struct ZeroTurns {
    std::vector<size_t> gather_forward, gather_backward, drop_after_forward, drop_after_backward, open_gradients, reduce_after_backward;
  };
  std::vector<ZeroTurns> zero_turns_;
  void init_zero_windows();
  // At the end of init(): the copies that exist only while used given back
  // (and under mixed precision the whole masters, block_master).
  void put_away_between_uses();
  bool masters_current_ = false;  // every bucket's `w` is `current`
  void zero_after_forward(const Node& n);
  void zero_before_backward(const Node& n);
  void zero_after_backward(const Node& n);
  // Bucket k's copies of one kind (each_copy: this device's weight copies,
  // or gradients; or the flat buffer) given back to the
  // backend, and taken back (gradients zeroed, the flat buffer zeroed).
  template <class F>
  void each_copy(size_t k, Copies c, F&& f);  // (sharded_update.cpp; no std::function: no allocation in a step)
  void put_away(size_t k, Copies c);
  void bring_back(size_t k, Copies c);
  // The mechanism under both, and under the checkpoint's whole moments:
  // every buffer `each` visits (each(f) calls f(Buffer&) on them) given
  // back, `away` recording how (ZeroBlock::away), or taken back (zeroed
  // where the backend kept the memory and `zero` asks; freed memory comes
  // back zeroed), counted in buffer_bytes() as the backend frees it.
  template <class Each>
  void give_back(char& away, Each&& each);
  template <class Each>
  void take_back(char& away, Each&& each, bool zero);
  // Work outside a step (weights set, gathered whole for a checkpoint)
  // that takes copies back: not counted in buffer_bytes().
  struct OutsideStep {
    DeviceExecutor& ex;
    int64_t peak;
    explicit OutsideStep(DeviceExecutor& e) : ex(e), peak(e.peak_floats_) {}
    ~OutsideStep() { ex.peak_floats_ = peak; }
  };
  // All-gathers bucket k's updated blocks into this device's copies (and
  // their compute copies under mixed precision); `tag_node` and `kind`
  // tell the collective apart.
  void gather_bucket(size_t k, int64_t tag_node, int kind);
  void gather_before(const Node& n, bool backward);
  bool member(const SyncBucket& b) const;
  void init_zero();
  // The bucket's gradients (each part's first copy here, the others added)
  // into `flat`, and back into every copy.
  void pack_gradients(const SyncBucket& b, const Buffer& flat);
  void unpack_gradients(const SyncBucket& b, const Buffer& flat);
  // Under ZeRO: the bucket's gradients reduce-scattered into its
  // ZeroBlock's `g` (with `add`, added to what `g` holds).
  void reduce_scatter_bucket(size_t k, bool add = false);
  // ZeRO 2 and 3 over micro-batches (training_recipe.h's syncs_every_micro_batch):
  // after each micro-batch's backward pass but the last, every bucket here
  // whose gradients come with every micro-batch (SyncBucket::
  // every_micro_batch) is reduce-scattered and added into this device's
  // block of the step's gradient, and its whole gradients start again from
  // zero; synchronize_gradients() then (`last`, after the once-per-step
  // backward) adds the last micro-batch's and sends the other buckets.
  bool syncs_micro_batches() const { return syncs_every_micro_batch(highest_zero(plan_.zero, plan_.zero_weights)) && plan_.micro_batches > 1; }
  void reduce_scatter_micro_batch(bool last = false);
  int64_t micro_batches_synced_ = 0;  // this step's
  // Under ZeRO: each ZeroBlock's `w` (the FP32 master block ZeRO keeps and
  // the optimizer updates in place) from this device's copy of the
  // weights, before the first step and after set_source() gave a weight a
  // new value (a bucket whose copies are given back between uses: at once,
  // set_source taking them back for it); the update then keeps it, and
  // gather_weights() the copies. load_master_blocks() loads every bucket
  // not `current`. (Under mixed precision set_source writes the blocks at
  // once, write_master_blocks, and they are always current: the whole
  // masters this would read exist only for a checkpoint.)
  void load_master_blocks();
  void load_master_block(size_t k);
  // f(bucket, 1 for m or 2 for v, this device's block of it) over the
  // optimizer's `slots` (update_buffers() order) of every bucket here.
  void each_moment_block(std::span<const ParameterSlot> slots, const std::function<void(size_t, int, const Buffer&)>& f);
  // A buffer of `extent`, kept for (node, slot) across steps.
  const Buffer& block_buffer(std::vector<std::map<Slot, Buffer>>& pool, NodeId node, Slot slot, std::span<const int64_t> extent);
  // Per-call argument arrays, sized once to the largest arity.
  std::vector<const Buffer*> in_, out_, dout_, din_;
  std::vector<char> direct_;
  bool timing_ = false;
  // Kernel calls timed by marks since the last settle_timings().
  enum class TimedPart : uint8_t { kForward, kBackward, kRecompute };
  struct TimedCall {
    NodeId node;
    TimedPart part;
    int64_t from, to;  // Backend::mark()'s
  };
  std::vector<TimedCall> timed_calls_;
  std::vector<double> mark_seconds_;
  double bucket_copy_seconds_ = 0, bucket_copy_bytes_ = 0;
  std::vector<KernelTime> kernel_times_;  // [node]
  StepRecorder* recorder_ = nullptr;
  // [forward/backward][node]: the nodes whose sends run right after it
  // (at index size() + pass: before any node of that pass);
  // [forward/backward][node]: 1 when its sends run there rather than at
  // its own turn.
  std::vector<std::vector<NodeId>> sends_after_[2];
  std::vector<char> early_[2];
  // Backward: [node][input] 1 when what the node receives into that
  // input's gradient waits until just before the tensor's next reader to
  // run backward, which receives_before_[reader] lists as (node, input).
  std::vector<std::vector<char>> deferred_;
  std::vector<std::vector<std::pair<NodeId, size_t>>> receives_before_;
  bool tracing() const { return recorder_ && recorder_->on(); }
  // Where the executor is, for the messages the recorder charges to it.
  void at(NodeId node, bool backward) {
    if (recorder_) recorder_->at(node, backward);
  }
  // Runs `f` (a collective) as one recorded event.
  template <class F>
  void collective(StepEventKind kind, int64_t index, F&& f) {
    if (!tracing()) return f();
    const auto t0 = backend_.now();
    recorder_->enter();
    f();
    recorder_->leave();
    recorder_->record(kind, index, -1, t0, backend_.now());
  }
};

}  // namespace pcgx::runtime
