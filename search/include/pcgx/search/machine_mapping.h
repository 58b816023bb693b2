#pragma once
// Machine-mapping selection (Unity, Section 5; docs/design.md "Search"): where
// each operator of a PCG runs, chosen by dynamic programming over the
// graph's series-parallel decomposition (sp_decomposition.h).
//
// A compute operator's task i runs on device start + i (pcg/machine_view.h),
// every other shard lives with its first reader (pcg/placement.h). The
// DP assigns every sub-graph a *resource*, a contiguous range of devices
// [lo, lo + size); a node runs at the start of its resource, and a node with
// more tasks than its resource has devices cannot run there. Then
//   - a series composition runs its parts one after the other on the same
//     resource: time(A ; B) = time(A) + time(B);
//   - a parallel composition (branches with no path between them) either
//     runs its branches one after the other on the whole resource, or splits
//     the branches into two groups and the resource into two ranges (halves
//     or thirds) that run at the same time: max of the two, plus moving the
//     branch's inputs and outputs between the ranges.
// Times are per training iteration (forward + backward + optimizer update,
// cost_model.h). Gradient synchronization enters the DP as each weight's
// share of the bucketed all-reduces; the final estimate replaces those
// shares by the buckets replayed against the backward pass
// (gradient_sync.h), so only the exposed part lengthens the iteration. Results are cached by (sub-graph structure, resource), and
// the cache lives as long as the MachineMapper, so candidate PCGs that share
// sub-graphs during a search share their solutions.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/machine_view.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/param_gathers.h"
#include "pcgx/pcg/source_layout.h"

namespace pcgx::search {

struct Estimate {
  bool feasible = false;
  std::string infeasible;    // why not, when not
  double time = std::numeric_limits<double>::infinity();  // seconds per iteration
  double compute = 0;        // on the critical path (optimizer update included)
  double update = 0;         // of compute: the optimizer update
  double overhead = 0;       // of compute: running the nodes beyond their kernels, as
                             // calibrated (CostModel::step_overhead; 0 without a profile)
  double communication = 0;  // on the critical path: activations' collectives and the exposed
                             // part of the gradient synchronization
  double sync = 0;           // gradient synchronization, all buckets
  double sync_hidden = 0;    // of sync: behind the backward pass (not in time)
  int64_t buckets = 0;       // gradient buckets
  double gather = 0;         // ZeRO 1, 2: all-gathering the updated weights (in communication and once;
                             // under overlap_param_gather what the forward pass waits for them)
  std::vector<ParamGather> param_gathers;  // under overlap_param_gather: those gathers (SyncTimeline's)
  int64_t gathered_for_use = 0;  // ZeRO 3: operators that gather their weights before each use (every
                                 // stage's); 0: every block under the persistence threshold, kept whole
  double bytes = 0;          // sent between devices per step, as the runtime runs the plan
                             // (pcg/step_communication.h)
  double idle = 0;           // mean over devices of time not spent busy
  int64_t devices_used = 0;  // devices that run at least one compute task
  double backward = 0;       // of time: the backward pass's compute and communication (every
                             // micro-batch's); the rest of time - once is the forward pass's
  double once = 0;           // of time: optimizer update, exposed gradient synchronization and gather,
                             // paid once per iteration however many micro-batches
  double bubble = 0;         // of time: pipeline fill and drain (pipeline.h); a pipelined
                             // plan's sync, sync_hidden, buckets, gather and update are those
                             // of the stage whose once-per-step terms are longest
  std::vector<double> memory;  // bytes per device
  double max_memory() const;
};

struct Strategy {
  Graph graph;
  std::vector<MachineView> views;  // per node of graph
  Estimate estimate;
};

class MachineMapper {
 public:
  explicit MachineMapper(const CostModel& cost);
  // The mapper of an interlaced pipeline chunk (pcg/pipeline_schedule.h),
  // run by every stage together: with `stage_devices` > 0 a mapping that
  // leaves a compute operator's tasks on one stage's devices (stages of
  // that many consecutive devices) is infeasible, so that a search finds
  // partitions with more tasks than a stage has devices (one_stage_operator).
  MachineMapper(const CostModel& cost, int64_t stage_devices);
  ~MachineMapper();
  MachineMapper(const MachineMapper&) = delete;
  MachineMapper& operator=(const MachineMapper&) = delete;

  // The best mapping of `g` on every device of the cost model's machine;
  // infeasible (infinite time) when some operator has more tasks than
  // devices or a device runs out of memory. Thread-safe.
  Strategy map(const Graph& g) const;
  // Only the predicted time (for the search's inner loop).
  double time(const Graph& g) const;

  const CostModel& cost() const { return cost_; }
  size_t cache_size() const;

  // The graphs refused for memory since the mapper was made: whether
  // memory constrained a search, and what the closest plan needed.
  struct MemoryRefusals {
    int64_t count = 0;         // by time or map: candidates, pieces of a split graph, plans
    double smallest_need = 0;  // bytes on the fullest device, of the plans map refused (0: none)
  };
  MemoryRefusals memory_refusals() const;

 private:
  struct Impl;
  const CostModel& cost_;
  int64_t stage_devices_ = 0;  // an interlaced chunk's: every operator on several stages' devices
  std::unique_ptr<Impl> impl_;
};

// The first compute operator the runtime runs as tasks (not a weight's
// stored layout) whose tasks all sit on one stage's devices, stages of
// `stage_devices` consecutive devices; an interlaced pipeline chunk's
// operators run on several stages' devices, or they would start a staged
// chunk of their own.
std::optional<NodeId> one_stage_operator(const Placement& where, const SourceLayouts& layouts, int64_t stage_devices);
// Its refusal: "node 18 'emb_dropout' (Dropout) runs on stage 1's devices (0..1) only: ..."
// (stages counted from 1, as the pipeline search's other errors and optimize's summary).
std::string one_stage_reason(const Placement& where, NodeId id, int64_t stage_devices);

// What one device keeps through a training step, by kind, in bytes.
struct DeviceMemory {
  double weights = 0;      // parameters in compute precision (1/r from ZeRO stage 3)
  double master = 0;       // FP32 master copies (mixed precision; 1/r of them from ZeRO stage 1)
  double gradients = 0;    // FP32 gradients (1/r from ZeRO stage 2)
  double optimizer = 0;    // the optimizer's FP32 states, Adam's two moments (1/r from ZeRO stage 1)
  double activations = 0;  // outputs kept for the backward pass (pcg/saved_tensors.h)
  double transient = 0;    // the most alive at once of the outputs not kept: in the forward pass
                           // until their last reader has run, or a recomputed segment's during
                           // its backward; plus ZeRO 3's gathered weights of two consecutive operators
  // FP32 copies of the gradients the update makes from gradients kept in
  // the compute precision (mixed precision with GradPrecision::kCompute:
  // Megatron-LM's FP16 optimizer, `main_param.grad = grad.float()`, and
  // DeepSpeed's and Megatron-Core's shards alike), 4 bytes per parameter
  // updated on the device (as many as `master`'s). They exist after the
  // backward pass, when no activation does: a peak of their own.
  double update_copies = 0;
  double total() const { return weights + master + gradients + optimizer + std::max(activations + transient, update_copies); }
  // Kind by kind, as a device holding several pipeline chunks keeps them
  // (their updates run together, after every chunk's backward pass).
  DeviceMemory& operator+=(const DeviceMemory& o) {
    weights += o.weights, master += o.master, gradients += o.gradients, optimizer += o.optimizer;
    activations += o.activations, transient += o.transient, update_copies += o.update_copies;
    return *this;
  }
};

// The most any of `memory`'s devices keeps (0 for none).
inline double fullest(std::span<const DeviceMemory> memory) {
  double most = 0;
  for (const DeviceMemory& m : memory) most = std::max(most, m.total());
  return most;
}

// Memory per device of a mapped graph trained with `recipe` (what counts:
// cost_model.h); a pipelined tensor keeps `in_flight` of its micro-slices
// (a pipeline stage keeps the micro-batches in flight; 1 for gradient
// accumulation, which finishes one micro-batch before the next). A joined
// pipeline's plan is counted by the overload below.
std::vector<DeviceMemory> memory_breakdown(const Placement& p, const TrainingRecipe& recipe, int64_t in_flight = 1);
// The same for a pipelined plan under its schedule: a device of stage s
// holds, per chunk, the activation sets its stage's program keeps in
// flight (pcg/pipeline_schedule.h's activation_sets_held: 1F1B's S - s,
// GPipe's M, one for gradient accumulation; an interlaced chunk its own
// count on every stage); `chunk` per node (pcg/pipeline_chunks.h; empty:
// one chunk), by which the recipe's count of recomputed layers is per
// chunk too (pcg/recompute_plan.h). One pass over the graph. What the
// simulator counts, and optimize prints. Throws pcgx::Error where the
// devices do not split into the stages, or the chunks do not fit the
// graph and the shape.
std::vector<DeviceMemory> memory_breakdown(const Placement& p, const TrainingRecipe& recipe, const PipelineShape& shape,
                                           std::span<const int64_t> chunk);
// The first for a graph at `views` on `devices` (views missing at the end: unplaced).
std::vector<DeviceMemory> memory_breakdown(const Graph& g, const std::vector<MachineView>& views, int64_t devices,
                                           const TrainingRecipe& recipe, int64_t in_flight = 1);
// Totals of memory_breakdown.
std::vector<double> memory_per_device(const Graph& g, const std::vector<MachineView>& views, int64_t devices,
                                      const TrainingRecipe& recipe, int64_t in_flight = 1);
// The same for a placement already made (its task tables are reused).
std::vector<double> memory_per_device(const Placement& p, const TrainingRecipe& recipe, int64_t in_flight = 1);

}  // namespace pcgx::search
