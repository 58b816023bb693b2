#pragma once
// Gradient synchronization replayed against the backward pass, as PyTorch
// DDP on NCCL runs it (Li et al., "PyTorch Distributed", VLDB 2020, Section
// 3.2.3): gradients are assigned to buckets in the order the backward pass
// produces them, a bucket's all-reduce starts once its last gradient is
// ready (and the communication channel is free), and buckets of different
// process groups never mix. One channel serves every bucket, in the order
// they become ready, beside the backward pass; what runs past the end of
// the backward pass is exposed, the rest is hidden behind it. On devices
// that do not overlap communication (DeviceSpec::overlaps_communication,
// pcgx's CPU runtime), and without TrainingRecipe::overlap_grad_reduce
// (Megatron-LM's local DDP before 2023, DeepSpeed's pipeline engine), the
// buckets run after the backward pass. Under ZeRO
// stage 1 or 2 each bucket's weights are all-gathered after the update
// (CostModel::weight_gather_time), all of it exposed; with
// TrainingRecipe::overlap_param_gather, beside the next step's forward
// pass instead (replay_param_gathers).
#include <cstdint>
#include <vector>

#include "pcgx/search/cost_model.h"
#include "pcgx/search/param_gathers.h"

namespace pcgx::search {

struct ReadyGradient {
  double ready = 0;  // seconds after the backward pass starts
  SyncGroup sync;
  // The micro-batch whose backward made it, where each micro-batch's
  // gradients are synchronized (ZeRO 2, training_recipe.h): buckets never
  // mix micro-batches, and the weights are gathered once, after the
  // update, for the last micro-batch's buckets only.
  int32_t micro_batch = 0;
  // When the first forward pass reading it starts (the first
  // micro-batch's), in seconds after the step starts: when its bucket's
  // weights must have arrived under overlap_param_gather.
  double needed = 0;
};

struct SyncTimeline {
  double total = 0;    // every bucket's all-reduce (and ZeRO 3's gathers before use)
  double exposed = 0;  // past the end of the backward pass (and ZeRO 3's waits in the forward)
  double gather = 0;   // ZeRO 1, 2 (3: the weights kept whole): the buckets' weight all-gathers after the update (exposed: all of them, or under overlap_param_gather what the forward pass waits for them)
  double hidden() const { return total - exposed; }
  int64_t buckets = 0;
  // Under overlap_param_gather: the gathers `gather` waits for, `needed`
  // counted from the first forward pass's start (a pipeline replays them
  // from its stage's, pipeline.h).
  std::vector<ParamGather> param_gathers;
};

// `gradients` in any order; `backward` is when the backward pass ends
// (with several micro-batches' gradients: when the last one's ends, every
// time counted from the same origin). A bucket costs
// CostModel::bucket_time (packing, all-reduce, unpacking).
//
// The backward pass's own messages (a tensor-parallel all-reduce, an
// input's gradient sent back) share the links with the buckets, as two
// NCCL streams share an NVLink: they go first, and a bucket runs only
// while none of them is on a link level its group crosses (the simulator's
// background tasks, timeline.h). `busy` lists them, in seconds after the
// backward pass starts, ascending and disjoint.
struct LinkBusy {
  double start = 0, end = 0;
  uint32_t levels = 0;  // bit l: link level l (Machine::links) is crossed
};
SyncTimeline replay_buckets(const CostModel& cost, std::vector<ReadyGradient> gradients, double backward, double bucket_bytes,
                            const std::vector<LinkBusy>& busy = {});

// Whether the gradient buckets run beside the backward pass: the recipe's
// overlap_grad_reduce, on devices that overlap communication. Otherwise
// the devices reduce them after their backward pass, all of it exposed
// (replay_buckets). A step that gathers any weight before use (ZeRO 3)
// is replayed by replay_sharded, which follows the machine alone: every
// bucket beside the pass where the devices overlap communication.
inline bool buckets_beside_backward(const CostModel& cost) {
  return cost.recipe().overlap_grad_reduce && cost.machine().device.overlaps_communication;
}

// Whether the weights gathered after the update (ZeRO 1 and 2, and 3's
// blocks kept whole) are gathered beside the next forward pass instead:
// the recipe's overlap_param_gather, on devices that overlap communication.
inline bool gathers_beside_forward(const CostModel& cost) {
  return cost.recipe().overlap_param_gather && cost.recipe().zero != ZeroStage::k0 && cost.machine().device.overlaps_communication;
}

// ZeRO stage 3 as FSDP runs it (Zhao et al., "PyTorch FSDP", VLDB 2023,
// Section 3.3). Each operator that reads weights it synchronizes
// all-gathers them before its forward and again before its backward, on a
// gather channel of its own (FSDP and DeepSpeed issue the all-gathers on a
// stream apart from the reduce-scatters). Over the step's sequence of such
// visits (forward in model order, then backward in reverse), the first two
// gathers are issued at the start and the (j+2)-th once the j-th visit is
// done, so at most two operators' weights are held (the one computing, the
// one arriving); the gathers run in that order. A weight below the
// recipe's persistence threshold is not gathered for use: its gradients
// fill buckets per group (CostModel::sync_bucket_bytes), each
// reduce-scattered once the operator that fills it is done (what is left
// after the last) and gathered after the update (SyncTimeline::gather), as
// at stage 2. In the backward pass each other operator's gradients are
// reduce-scattered once it is done (one bucket per weight). The buckets run
// on the sync channel, in the order they are issued, beside the passes:
// the gathers and the operators' own messages (each at the end of its
// visit, as replay_buckets places them) go first on the link levels they
// cross, and a bucket takes the time they leave. The simulator builds the
// same tasks in the same order (simulator.h). Exposed: the time the compute
// waits for gathers plus the channels' run past the end of the backward
// pass; on devices that do not overlap communication, all of it.
struct ShardedStep {
  double forward = 0, backward = 0;  // the operator's compute and messages
  double messages_forward = 0, messages_backward = 0;  // of those, its own messages (Problem::comm)
  uint32_t levels = 0;               // the link levels those cross (LinkBusy::levels)
  bool gathers = false;              // it reads weights it gathers for use (a gathering operator)
  double gather = 0;                 // CostModel::use_gather_time of those weights, once (per visit: 1/rounds of those gathered once per step)
  std::vector<SyncGroup> grads;      // its weights' gradients
  int64_t rounds = 1;                // its visits per step: once per micro-batch (node_slices), or once
};
// `ops` in model order; `forward` and `backward` are the critical path's
// passes (every micro-batch's), to which the operators' times are scaled.
// With `micro` micro-batches (one stage: each micro-batch's forward, then
// its backward) every visit above repeats per micro-batch for the
// operators that run per micro-batch (ShardedStep::rounds), each at 1/M
// of its time, gathering again (its first two gathers issued as it
// starts: none is prefetched across a micro-batch's end), and each
// micro-batch's gradients that come with every micro-batch
// (SyncGroup::rounds) are reduce-scattered in its own backward; the
// others, with the last micro-batch's. A weight gathered once per step
// (rounds 1) is charged 1/rounds of its gather at each visit.
SyncTimeline replay_sharded(const CostModel& cost, const std::vector<ShardedStep>& ops, double forward, double backward, int64_t micro = 1);

}  // namespace pcgx::search
