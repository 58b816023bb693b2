#pragma once
// The cost model (docs/design.md, "Search"): how long one training iteration of
// each node of a PCG takes on a machine, and what it keeps in memory.
//
// Compute operators. All T tasks of an operator are alike; one task's
// forward time is a roofline over its local shards,
//     max(FLOPs / (peak_flops * e.compute), bytes / (memory_bandwidth * e.memory)) + launch,
// with FLOPs and bytes from the operator's registry entry evaluated at shard
// shapes, and per-operator efficiencies `e` kept in data/cost/efficiency.json
// (not in code). Backward = e.backward x forward (2 for GEMM-like operators:
// one GEMM for each input's gradient). A measured profile (pcg/profile.h,
// `--profile`) replaces both times for the (operator, shard shapes) it
// lists, its fitted device rates replace the machine's in the roofline of
// the others, its fitted links replace the machine's link levels of the
// same name, and its per-node overhead is charged once per node per step.
//
// Communication follows the placement (pcg/placement.h: tasks on their
// views' devices, every other shard with its first reader), the same one
// the runtime executes, and each transfer is priced as the collective it is
// (collectives.h):
//     Repartition  scatter / gather      Combine    gather / scatter
//     Replicate    broadcast / reduce    Reduce     reduce / broadcast
//     AllReduce    all-reduce / all-reduce           Pipeline, Batch: free
// (forward / backward), each over the devices of one group of shards, the
// slowest group counting. A layout change of one tensor over the same
// devices is the collective it amounts to (layout_change_time):
//     Combine(d, k) then Repartition(d', k)   all-to-all / all-to-all
//     Combine(d, k) then Replicate(k)         all-gather / reduce-scatter
//     Reduce(k) then Repartition(d, k)        reduce-scatter / all-gather
//     Reduce(k) then Replicate(k)             all-reduce / all-reduce
// A compute task whose input shard lives on another device receives it
// (send/recv), and sends its gradient back.
//
// Sources (source_layout.h). A batch is loaded where it is read. Whatever is
// computed from weights alone is the weights' layout: no forward cost; per
// iteration each group of its shards that hold the same block all-reduce
// their gradients, in DDP's buckets (CommOptions::bucket_bytes, 25 MiB by
// default) on a communication channel beside the backward pass. Inside the
// machine-mapping DP a tensor's share of that synchronization is
// bytes x allreduce(bucket) / bucket, so it does not depend on how the
// layout was written; the final estimate replays the buckets against the
// backward pass and charges only what is not hidden (gradient_sync.h);
// nothing is hidden on a device that does not overlap communication with
// computation (DeviceSpec::overlaps_communication). A parameter read
// through several layouts holding the same blocks on the same devices
// (source_layout.h's parameter_copies: a tied LM head reads the
// embedding table transposed) is synchronized and updated once, by its
// first layout (held_by_original); at ZeRO 3 a copy whose blocks are
// gathered for use is still gathered, and reduce-scattered, as its own.
//
// Pipelining (Pipeline/Batch, pipeline.h): a task whose shards are
// processed in p micro-slices runs p times on slice shapes (so p launches),
// and pipelined data moves as p messages of 1/p the bytes (p latencies).
//
// Precision (pcg/precision.h, the plan's): compute runs at the machine's
// peak for it (DeviceSpec::peak), float tensors are read, written, kept and
// sent at its activation size (2 bytes in bf16/fp16), gradients are
// synchronized in FP32, or in the compute precision where the recipe's
// grad_precision says so.
//
// Recomputation (pcg/training_recipe.h, pcg/recompute_plan.h): a recomputed
// operator's backward also re-runs its forward (compute, or the collective
// of a parallel operator), in the DP and in the simulator alike.
//
// Sharded data parallelism (pcg/training_recipe.h, ZeroStage): from stage
// 1 a bucket is reduce-scattered instead of all-reduced, a device updates
// 1/r of each weight it holds (r: the devices holding the same block), and
// each bucket's weights, in compute precision, are all-gathered over the
// same group after the update, with nothing left to hide them behind. At
// stage 3 each compute operator all-gathers the weights it reads before
// its forward and again before its backward (use_gather_time), every such
// weight is its own bucket (sync_bucket_bytes), and gradient_sync.h's
// replay_sharded runs the gathers beside the compute, one operator ahead;
// a weight whose blocks are below the recipe's persistence threshold is
// instead kept whole, its gradients bucketed and each bucket gathered
// after the update, as at stage 2 (SyncGroup::gathered_for_use).
//
// Memory per device (memory_model.h): every weight-layout shard it holds
// (a parameter's block once, however many of its layouts hold it there)
// costs param_state_bytes per element (value, FP32 master when mixed,
// gradient, the optimizer's states: Adam's two moments), every output shard of a compute or
// parallel operator (moved copies included) is kept for the backward pass
// unless recomputed (then the largest segment's outputs count once, as
// transient), so is the copy of every activation shard a task reads from
// another device (a pipeline stage's received boundary), and a pipelined
// tensor keeps one micro-slice per micro-batch in flight. Under ZeRO a device keeps 1/r of the state its
// stage shards. Under an eager cross-entropy (pcg/cross_entropy_kernel.h)
// a softmax over the logits keeps FP32 probabilities in their place, and
// while its forward runs holds the 16-bit logits beside them (transient).
// The optimizer update streams update_words FP32 words per parameter (Adam:
// read w, g, m, v; write w, m, v: 7), plus the 2-byte compute copy it
// writes when mixed.
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/attention_kernels.h"
#include "pcgx/pcg/dropout_add_kernels.h"
#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/profile.h"
#include "pcgx/pcg/training_recipe.h"
#include "pcgx/search/collectives.h"

namespace pcgx::search {

struct RelayoutCache;  // cost_model.cpp

struct OpEfficiency {
  double compute = 0.5;   // fraction of peak FLOP/s
  double memory = 0.7;    // fraction of memory bandwidth
  double backward = 2.0;  // backward time / forward time
  bool view = false;      // no data movement at all (Reshape of a contiguous shard)
};

struct Efficiency {
  double launch = 5e-6;  // seconds per kernel
  OpEfficiency fallback;
  std::map<std::string, OpEfficiency> ops;
  const OpEfficiency& of(const std::string& op) const;
};

// data/cost/efficiency.json format (see that file); errors name the file and field.
Efficiency efficiency_from_json(const std::string& text, const std::string& source);
Efficiency load_efficiency(const std::string& path);

// How gradients are synchronized.
struct CommOptions {
  double bucket_bytes = 25.0 * 1024 * 1024;  // PyTorch DDP's bucket_cap_mb = 25
};

// Bytes of one shard of a tensor, stored as its dtype says (FP32: what a
// weight's parameters and gradients take per element).
double shard_bytes(const ParallelTensorShape& s);
// Bytes of one shard of an activation at precision `p`.
double activation_shard_bytes(const ParallelTensorShape& s, Precision p);

struct Seconds {
  double forward = 0;
  double backward = 0;
  double total() const { return forward + backward; }
};

// The gradient synchronization a weight layout needs: every group of its
// shards holding the same block all-reduces `bytes` (one shard's gradient,
// in the recipe's gradient precision); `group` is the slowest of those
// groups.
struct SyncGroup {
  GroupShape group;
  double bytes = 0;
  uint64_t key = 0;  // tells groups of different devices apart (buckets never mix them)
  std::vector<int64_t> devices;  // every device taking part (all the groups), ascending
  // ZeRO stage 3: the weight is sharded between uses, gathered before each
  // forward and backward that reads it (gathers_for_use: its blocks reach
  // the recipe's persistence threshold); otherwise, under ZeRO, its bucket
  // is gathered after the update.
  bool gathered_for_use = false;
  // How many times a step synchronizes it: under ZeRO 2 over micro-batches
  // (training_recipe.h's syncs_every_micro_batch) once per micro-batch its
  // reader runs, unless the layout is computed from the stored one
  // (computed_weight_layout): the runtime computes that once per step, so
  // its gradient exists once, after the last micro-batch. Otherwise 1.
  int64_t rounds = 1;
};

// A weight layout computed every step from the stored one (Concat,
// ScalarMul, a weight laid out twice: source_layout.h), not the Weight or
// the end of its stored chain: the runtime runs it once per step, before
// the first micro-batch, and its gradient reaches the stored weight once,
// after the last.
bool computed_weight_layout(const Graph& g, const SourceLayouts& layouts, TensorRef t);

// A weight layout holding a parameter an earlier layout holds
// (source_layout.h's parameter_copies: a tied head's transposed table):
// the layout it copies, and how each names the Weight's blocks.
struct ParameterCopy {
  TensorRef of;
  WeightCopy copy, original;
};
std::map<TensorRef, ParameterCopy> parameter_copy_map(const Graph& g, const SourceLayouts& layouts);
// Whether under `p` every shard of copy `t` sits on a device where the
// original holds the same block of the Weight: the parameter is then
// kept, updated and synchronized there once, by the original's reader
// (on other devices, or split otherwise, the copy is a parameter of its
// own there, as Megatron-LM keeps the head's copy on the last pipeline
// stage).
bool held_by_original(const Placement& p, TensorRef t, const ParameterCopy& c);

// The times per step a step synchronizes the gradient of weight layout `t`
// read first by compute node `reader` (SyncGroup::rounds).
int64_t sync_rounds(const Graph& g, const SourceLayouts& layouts, const TrainingRecipe& recipe, const Node& reader, TensorRef t);

// How many times node `n` runs per step: once per micro-slice when it
// reads or writes micro-batch slices (the most slices of its inputs and
// outputs), else once. The cost model prices, and the simulator runs, each.
int64_t node_slices(const Graph& g, const Node& n);

// What a step sends beyond pcg/step_communication.h's step_bytes (which
// counts every weight block's all-reduce, 2 (r - 1) x its bytes over its r
// holders) under each weight's ZeRO stage (the recipe's, or its group's): at stage 3 each weight block
// gathered for use is all-gathered twice and reduce-scattered once, one
// all-gather more, (r - 1) x its bytes; over micro-batches (stages 2 and
// 3) each block is reduce-scattered, and at stage 3 gathered twice, by
// every micro-batch its first compute reader runs (SyncGroup::rounds). (The runtime also
// pads each bucket to r equal blocks: runtime/execution_plan.h's
// sharded_sync_extra_bytes.)
double zero_extra_bytes(const Placement& p, const SourceLayouts& layouts, const TrainingRecipe& recipe);

// The kernels a recipe runs several of a graph's operators in, found once
// per graph (CostModel::fused_kernels) and read per operator.
struct FusedKernels {
  AttentionKernels attention;
  DropoutAddKernels dropout_add;
};

class CostModel {
 public:
  // Throws FieldError when the machine cannot price the recipe's precision.
  CostModel(Machine machine, Efficiency efficiency, Profile profile = {}, CommOptions comm = {}, TrainingRecipe recipe = {});

  const Machine& machine() const { return machine_; }
  const TrainingRecipe& recipe() const { return recipe_; }
  Precision precision() const { return recipe_.precision; }
  // One shard of activation `s` at the plan's precision.
  double activation_bytes(const ParallelTensorShape& s) const { return activation_shard_bytes(s, recipe_.precision); }
  int64_t devices() const { return machine_.num_devices(); }
  const CommOptions& comm() const { return comm_; }

  // One task of compute node `n` (without recomputation: pcg/recompute_plan.h says
  // which nodes re-run their forward in backward). Under an eager
  // cross-entropy (pcg/cross_entropy_kernel.h) a softmax over the logits
  // is priced as its passes, each over every logit element of the task at
  // the efficiency table's "EagerCrossEntropy" memory figure plus a
  // launch (a table without the entry: its default's), and picking the
  // labels' logits reads no logits; a measured profile's times for these
  // operators (pcgx's runtimes run them fused) are not used for them.
  Seconds task_time(const Graph& g, const Node& n) const;
  // One task of a FlashAttention kernel (pcg/attention_kernels.h: its
  // operators in forward order): the operators' FLOPs (the fraction a
  // causal mask leaves) and only the bytes of what it reads from outside
  // and writes at the end, at the efficiency table's "FlashAttention"
  // entry (its backward, the scores recomputed, a multiple of the
  // forward as for any operator).
  Seconds attention_kernel_time(const Graph& g, const std::vector<NodeId>& members) const;
  // The attention kernels of g under this recipe (FlashAttention's, or the
  // fused scale and softmax; none under eager).
  AttentionKernels attention_kernels(const Graph& g, const SourceLayouts& layouts) const;
  // Every kernel of several of g's operators under this recipe: its
  // attention kernels, and its dropouts fused with the sums reading them
  // (none under an eager dropout-add).
  FusedKernels fused_kernels(const Graph& g, const SourceLayouts& layouts) const;
  // One task of compute node `id` with g's kernels: its own time, its
  // attention kernel's at the kernel's first operator (a fused scale and
  // softmax: the softmax's pass), nothing at the kernel's others, nothing
  // for a transpose a FlashAttention kernel reads or writes through its
  // strides, nor for the copies of a grouped key/value head it reads by
  // strides, whose last copy's backward is the copies' gradients summed
  // (grouped_heads_time). A dropout fused with its sum has no forward
  // pass of its own: the kernel reads the dropout's input and the
  // residual and writes the sum, the bytes of the sum's own pass, which
  // the sum keeps (with a measured profile, its measured time); the
  // backward passes are each operator's own, as eager.
  Seconds operator_time(const Graph& g, const FusedKernels& kernels, NodeId id) const;
  // One task of n, the last of a grouped head's `copies` copies
  // (AttentionKernels::grouped_sum): no forward; in backward, one pass
  // reading the copies' gradients (its output's bytes) and writing the
  // head's (1/copies of them), at the table's memory figure for n's
  // operator (a Concat).
  Seconds grouped_heads_time(const Node& n, int64_t copies) const;
  // The optimizer update of `bytes` of FP32 parameters on one device.
  double update_time(double bytes) const;
  // Under GradPrecision::kFp32Cast (mixed precision), one micro-batch's
  // cast-and-add of `elements` parameters' gradients in `tensors` weight
  // tensors on one device (precision.h's cast_pass_bytes a parameter, at
  // EwAdd's memory figure, elementwise passes both, and two kernels a
  // tensor: the cast and the add); 0 otherwise.
  double cast_pass_time(double elements, int64_t tensors) const;
  // One gradient bucket of `bytes` on `group`: its gradients copied into
  // the bucket, the all-reduce (reduce-scatter under ZeRO), and the sum
  // copied back (a read and a write of every byte each way, as PyTorch DDP
  // copies gradients into its bucket views and pcgx's runtime does), one
  // after another on the sync channel.
  double bucket_time(const GroupShape& group, double bytes) const;
  // After the update under ZeRO stage 1 or 2 (or 3, for a block below the
  // persistence threshold): all-gathering the weights of a bucket of
  // `gradient_bytes` (in the recipe's gradient precision) over its group, in compute precision; 0 at
  // stage 0 and for weights gathered for use.
  double weight_gather_time(const SyncGroup& bucket, double gradient_bytes) const;
  // Under ZeRO stage 3, for a weight gathered for use: one all-gather, in
  // compute precision, of the weight whose gradient is `s.bytes` (in the recipe's gradient precision),
  // before a forward or a backward that reads it; 0 otherwise.
  double use_gather_time(const SyncGroup& s) const;
  // The bytes that close a gradient bucket holding `s`: CommOptions::
  // bucket_bytes, or for a weight gathered for use (ZeRO 3) none (each is
  // reduce-scattered on its own, as FSDP reduce-scatters each unit's
  // gradients; its key keeps it out of the other weights' buckets).
  double sync_bucket_bytes(const SyncGroup& s) const { return s.gathered_for_use ? 0.0 : comm_.bucket_bytes; }
  // The two copies alone: as a profile measured them (pcgx calibrate), else
  // at the device's memory bandwidth.
  double bucket_pack_time(double bytes) const;

  // Communication under placement `p` with every device shifted by `lo`.
  // Parallel node `n` on activations.
  Seconds parallel_time(const Placement& p, NodeId n, int64_t lo) const;
  // Parallel node `first` and its partner `second` (its sole reader, or
  // the last of the splits after a sum: pcg/relayout.h) as one step: the
  // collective within each group over the same devices (a pair), or else
  // the exchange of the pieces the runtime sends; nothing when they are
  // not a layout change.
  std::optional<Seconds> layout_change_time(const Placement& p, NodeId first, NodeId second, int64_t lo) const;
  // Tensor `in`'s layout turned into `out`'s (the same logical tensor,
  // summing groups of `sum` replica slots and copying into `copy`) as the
  // pieces the runtime sends, all posted at once; the backward pass sends
  // them the other way (pcg/relayout.h).
  Seconds relayout_time(const Placement& p, TensorRef in, TensorRef out, int64_t sum, int64_t copy, int64_t lo) const;
  // Compute node `n` receiving input shards that live elsewhere (forward)
  // and sending their gradients back (backward): the slowest device.
  Seconds input_transfer_time(const Placement& p, NodeId n, int64_t lo) const;
  // Weight layout `t` (read by compute operators): its synchronization, or
  // nothing when no two devices hold the same block. The group is the
  // slowest block's; the bytes one block's, times the most blocks one
  // device synchronizes (several where its tasks co-shard).
  std::optional<SyncGroup> sync_group(const Placement& p, TensorRef t, int64_t lo) const;
  // One tensor's share of the bucketed all-reduce (reduce-scatter) of its
  // group (a weight gathered for use: its own reduce-scatter).
  double sync_share(const SyncGroup& s) const;
  // Its share of the weights' all-gather after the update (ZeRO 1, 2), or
  // its two gathers before use (ZeRO 3; below the persistence threshold,
  // its own gather after the update).
  double gather_share(const SyncGroup& s) const;
  // Moving a tensor's shards from start `from` to start `to` (shard i from
  // device from + i to to + i).
  double move_time(const ParallelTensorShape& s, int64_t from, int64_t to) const;

  // Compute nodes of `g` whose task shapes the profile lists, of all its
  // compute nodes (the rest fall back to the roofline).
  std::pair<int64_t, int64_t> profile_coverage(const Graph& g) const;
  // What running a placed graph costs a step beyond kernels and messages,
  // as calibrated (profile.h): per node visit (once forward and backward;
  // a pipelined node once per micro-batch, a recomputed one half again for
  // its re-run forward), and per byte the busiest device holds
  // (step_communication.h's held_bytes). Zero without a profile.
  double step_overhead(const Placement& p) const;
  const Profile& profile() const { return profile_; }

  // The same model on the first n devices of the machine.
  CostModel with_devices(int64_t n) const {
    CostModel c(machine_.with_devices(n), efficiency_, profile_, comm_, recipe_);
    c.in_flight_ = in_flight_;
    return c;
  }
  // The micro-batches a device holds the activations of at once when it
  // runs a pipelined graph, for the memory checks of a mapping (a
  // pipelined tensor keeps that many of its micro-slices; 1: gradient
  // accumulation, one micro-batch at a time). A pipeline stage is searched
  // pipelined, holding the micro-batches the schedule keeps in flight
  // (search/pipeline.h); each stage plan is then checked with its exact
  // memory.
  CostModel with_micro_batches_in_flight(int64_t n) const {
    CostModel c = *this;
    c.in_flight_ = n;
    return c;
  }
  int64_t micro_batches_in_flight() const { return in_flight_; }
  // The same model with `share` of each device's memory for a mapping (a
  // pipeline chunk shares its devices with the stage's other chunks).
  CostModel with_memory_share(double share) const {
    CostModel c = *this;
    c.machine_.device.memory_capacity *= share;
    return c;
  }
  // The same model for another recipe.
  CostModel with_recipe(const TrainingRecipe& r) const {
    CostModel c(machine_, efficiency_, profile_, comm_, r);
    c.in_flight_ = in_flight_;
    return c;
  }

 private:
  Seconds single_parallel_time(const Placement& p, NodeId n, int64_t lo) const;
  Seconds local_sum_time(const Placement& p, NodeId reduce, int64_t lo) const;

  Machine machine_;
  Efficiency efficiency_;
  Profile profile_;
  CommOptions comm_;
  TrainingRecipe recipe_;
  double peak_ = 0;  // FLOP/s at the recipe's precision
  int64_t period_ = 1;  // lcm of the link spans: which link a device pair uses repeats with it
  int64_t in_flight_ = 1;  // micro-batches held at once (with_micro_batches_in_flight)
  // relayout_time's results by what they depend on (shapes, owners, bytes
  // per element), shared by the copies that keep the machine's links.
  std::shared_ptr<RelayoutCache> relayouts_;
};

// Where data/ lives: $PCGX_DATA_DIR, else the source tree's data/ (compiled in).
std::string data_dir();
// A machine by name (data/machines/NAME.json) or path; throws pcgx::Error
// listing the known machines.
Machine find_machine(const std::string& name_or_path);
std::vector<std::string> machine_names();
// The default efficiency table (data/cost/efficiency.json).
Efficiency default_efficiency();

}  // namespace pcgx::search
