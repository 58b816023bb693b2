#pragma once
// The execution plan of a PCG on N devices: which device runs each task of
// every compute operator, which device owns every shard of every tensor, and
// how each shard-level operator (the parallel operators, replica-axis
// Concat/Split) builds its output shards from input shards ("moves").
//
// Where tasks run and shards live is the placement (pcg/placement.h): a
// compute operator's tasks run on its machine view's devices, every other
// shard lives with its first reader. The backward pass runs on the same
// devices: gradients live with the value they belong to.
//
// How each node runs, and what it sends, is pcg/step_communication.h's
// decision: the cost model counts the same bytes.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/relayout.h"
#include "pcgx/pcg/shard_moves.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/pcg/tasks.h"
#include "pcgx/pcg/training_recipe.h"

namespace pcgx::runtime {

struct NodePlan {
  using Run = NodeRun::Kind;
  Run run = Run::kDone;
  TaskTable tasks;                         // kTasks
  std::vector<int> task_device;            // kTasks: per task
  std::vector<Move> moves;                 // kMoves
  std::vector<Piece> pieces;               // kPieces: this node's input 0 -> `to`'s output 0
  std::vector<std::vector<AllReduceMember>> groups;  // kAllReduce: this node's input 0 -> `to`'s output 0
  NodeId to = -1;                          // kPieces, kAllReduce: the node whose output is written
  std::vector<std::vector<int>> owner;     // [output][shard] -> device
};

// Gradient synchronization of stored weight layouts in buckets (PyTorch
// DDP's): blocks whose copies live on the same devices share a bucket up to
// a size; each bucket is one all-reduce. Every device builds the same list.
struct SyncPart {
  TensorRef tensor;
  std::vector<int64_t> shards;  // the copies of one block
  int64_t floats = 0;           // of one copy
};
struct SyncBucket {
  std::vector<int> devices;  // sorted
  std::vector<SyncPart> parts;
  int64_t floats = 0;
  // ZeRO stage 3: one weight block alone, gathered before each use of its
  // weight rather than after the update (set_zero).
  bool gathered_for_use = false;
  // ZeRO 2 and 3 over micro-batches (training_recipe.h's syncs_every_micro_batch):
  // its weights' gradients arrive with every micro-batch (a reader runs
  // per micro-batch), so it is reduce-scattered after each; a bucket of
  // weights whose gradients arrive once per step (read only by a layout
  // computed once per step, search's computed_weight_layout) is
  // reduce-scattered once, after the last. The two never share a bucket.
  bool every_micro_batch = false;
  // The ZeRO stage of its weights (ExecutionPlan::zero_weights): a bucket
  // holds weights of one stage.
  ZeroStage zero = ZeroStage::k0;
};

inline constexpr double kDefaultBucketBytes = 25.0 * 1024 * 1024;  // DDP's bucket_cap_mb = 25

// Micro-batches (gradient accumulation and pipelining, search/pipeline.h):
// where the graph's tensors are pipelined (pcg/parallel_tensor_shape.h,
// after Pipeline(0, M)), each step runs as M passes, one micro-batch (one
// slice of every pipelined shard) at a time, forward then backward, so
// that the activations of one micro-batch exist at a time and the
// gradients of the weights add up over the M passes before the one
// synchronization and update. Kernels see the whole tensors' shapes and
// their slice's offsets, so each computes exactly its part of the
// one-batch step (a loss divides by the whole batch, dropout draws the same
// masks). What each node does in a step:
//
//   kStep        reads no pipelined tensor and nothing summed over the
//                micro-batches (the weights' layouts): forward before the
//                first micro-batch, backward after the last
//   kMicro       writes pipelined tensors: forward and backward every pass
//   kAccumulate  writes whole tensors from pipelined ones (a loss, a
//                Batch): its outputs add up over the passes
//   kAfter       reads what the passes summed (the loss's Reduce): forward
//                after the last pass, backward before the first; only
//                layout changes, whose gradient needs no forward value
//
// Without pipelined tensors every node is kMicro and a step is one pass.
enum class StepPhase : uint8_t { kStep, kMicro, kAccumulate, kAfter };

// Activation recomputation (pcg/recompute_plan.h): one segment of nodes
// whose outputs the step does not keep. Forward, they are freed after
// `last_reader` (the latest node reading one of them, or of the segment)
// has run; backward, the segment re-runs its forward just before
// `last_reader`'s backward, so its outputs exist for every gradient that
// reads them, and they are freed again after the backward of its first
// node, the last to read them. What no reverse rule reads
// (pcg/saved_tensors.h's kRecomputedPassing) is freed earlier: in the
// re-run once its last reader there has run (`passing`), and in forward
// as a FreedNode.
struct RecomputeSegment {
  std::vector<NodeId> nodes;  // ascending
  NodeId last_reader = -1;
  std::vector<std::pair<NodeId, NodeId>> passing;  // (node, its last reader in the re-run)
};

// A node whose outputs no backward pass reads (pcg/saved_tensors.h): freed
// once `last_reader` has run forward; not created again in the step unless
// a recomputed segment re-runs it.
struct FreedNode {
  NodeId node = -1;
  NodeId last_reader = -1;
};

struct ExecutionPlan {
  const Graph* graph = nullptr;
  int64_t micro_batches = 1;      // M: the slices of every pipelined tensor
  std::vector<StepPhase> phase;   // per node
  int devices = 1;
  std::vector<NodePlan> nodes;  // per node of graph
  SourceLayouts layouts;
  // Per Weight: the tensor holding its trained value (itself, or the end of
  // its stored layout, whose replica slot 0 gathers to it).
  std::vector<TensorRef> parameter;
  std::vector<SyncBucket> buckets;
  // What each bucket's devices shard (device_executor.h: ZeRO): stage 0
  // all-reduces the buckets and every copy is updated whole.
  ZeroStage zero = ZeroStage::k0;
  // At stage 3, weight blocks of fewer floats stay whole and are gathered
  // after the update, in buckets, instead of before each use
  // (TrainingRecipe::zero_persistence_threshold; set_zero).
  int64_t zero_persistence_threshold = 0;
  // The weights at another stage than `zero` (training_recipe.h's
  // ZeroWeights), by their Weight operators' names.
  ZeroWeights zero_weights;
  // What the backward pass recomputes (set_recompute); none by default.
  Recompute recompute = Recompute::kNone;
  int32_t recompute_layers = kAllLayers;  // under full: how many layers (training_recipe.h)
  std::vector<RecomputeSegment> segments;
  // What the step frees beside them (set by make_plan and set_recompute;
  // under a pipeline schedule each device keeps what it writes in one
  // chunk step and reads in another: device_executor.h).
  std::vector<FreedNode> freed;
  // The precision activations are stored in (pcg/precision.h): under
  // bf16 and fp16 every value a kernel writes is rounded to it and the
  // optimizer updates FP32 master weights (device_executor.h).
  Precision precision = kDefaultPrecision;
  // The pipeline schedule the micro-batches run under (set_pipeline): none
  // by default, each micro-batch's forward and backward through the whole
  // graph before the next's (a one-stage 1f1b).
  std::optional<PipelineShape> pipeline;
  std::vector<int64_t> chunk;  // per node, with a pipeline (pcg/pipeline_chunks.h)
  int64_t stage_devices = 1;   // with a pipeline: devices per stage (of those the strategy uses)
  int owner(TensorRef t, int64_t shard) const {
    return nodes[static_cast<size_t>(t.node)].owner[static_cast<size_t>(t.output)][static_cast<size_t>(shard)];
  }
};

// One micro-batch of a pipelined tensor: every pipelined dimension's size
// divided by its pipeline degree (the degrees kept). Micro-batch k of a
// tensor is its logical slice k along the pipelined dimensions (the last
// varying fastest), split by the degrees: so every layout of a tensor,
// whatever its degrees, agrees on which samples micro-batch k holds, and
// a layout change between micro-batch shapes runs each micro-batch alone.
ParallelTensorShape micro_batch_shape(const ParallelTensorShape& s);
// Where micro-batch k of the shard at `block_offset` (a whole shard's
// logical offset, ParallelTensorShape::block_offset) starts in the logical
// tensor, into `offset`.
void micro_batch_offset(const ParallelTensorShape& s, std::span<const int64_t> block_offset, int64_t k,
                        std::vector<int64_t>& offset);

// `views` per node (empty: every compute operator starts at device 0).
// Throws pcgx::Error when a task would run beyond the last device, naming
// the operator and the devices the strategy needs, when the graph holds
// an operator the runtime cannot execute, or when its micro-batches
// cannot run one at a time (tensors pipelined into different numbers of
// slices or along several dimensions, a pipelined loss, a Pipeline or
// Batch of a split dimension, a pipelined tensor computed from a sum over
// the micro-batches, a compute operator other than a loss summing them, a
// compute operator after that sum).
// `bucket_bytes` caps the gradient buckets.
ExecutionPlan make_plan(const Graph& g, std::span<const MachineView> views, int devices, double bucket_bytes = kDefaultBucketBytes);

// Makes `plan` recompute what `policy` says, under full only the first
// `layers` layers unless kAllLayers, of each chunk once set_pipeline has
// set the chunks (pcg/recompute_plan.h, the same nodes the cost model and
// the memory model read). Throws pcgx::Error
// naming the node where the runtime cannot: a recomputed node that runs
// once per step or sums the micro-batches, one reading a tensor another
// segment recomputes, a layout change split between kept and recomputed
// nodes, a recomputed graph output. Also sets what the step frees as no
// backward pass reads it (ExecutionPlan::freed), as make_plan does.
// Under operators, those `operators` names.
void set_recompute(ExecutionPlan& plan, Recompute policy, int32_t layers = kAllLayers, std::span<const std::string> operators = {},
                   AttentionKernel attention = AttentionKernel::kEager);

// Makes `plan` run its micro-batches under `p` (pcg/pipeline_schedule.h):
// each device runs its stage's program, one chunk's nodes per step, and
// keeps one activation set per micro-batch in flight (device_executor.h).
// A one-stage shape leaves the plan as it is (the same order). Throws
// pcgx::Error naming what does not fit: micro-batches other than the
// plan's, operators that do not fall into the shape's chunks
// (pcg/pipeline_chunks.h), a recomputed segment across two chunks or
// moving data between stages, a micro-batch tensor read beyond the next
// chunk. The stages split `devices` (the strategy's; 0: the devices its
// tasks use), each stage D / S consecutive ones; more devices run idle.
void set_pipeline(ExecutionPlan& plan, const PipelineShape& p, int64_t devices = 0);
// The chunk of every node of `plan` under `p` (pcg/pipeline_chunks.h), the
// stages splitting `devices` as set_pipeline splits them: what
// set_recompute counts some layers of each in, set before it.
std::vector<int64_t> plan_chunks(const ExecutionPlan& plan, const PipelineShape& p, int64_t devices = 0);

// What one step's gradient synchronization sends beyond the all-reduces
// pcg/step_communication.h counts: 0 at ZeRO stage 0; from stage 1 each
// bucket of r devices is padded to r equal blocks, and its reduce-scatter
// and all-gather each send the padding r - 1 times; at stage 3 each bucket
// is all-gathered twice, so one more all-gather (r - 1 padded blocks),
// unless it is kept whole (below the persistence threshold); at stage 2
// over M micro-batches each bucket reduce-scattered every micro-batch
// (SyncBucket::every_micro_batch) is reduce-scattered M - 1 times more
// (r - 1 padded blocks each); at stage 3 a bucket gathered for use is also
// gathered twice by each micro-batch: 3 (M - 1) more in all.
double sharded_sync_extra_bytes(const ExecutionPlan& plan);

// Sets the plan's ZeRO stage and regroups its buckets: up to stage 2 as
// make_plan groups them (`bucket_bytes`); at stage 3 each weight block of
// at least `persistence_threshold` floats is a bucket alone, gathered
// before each use, and the smaller blocks fill buckets of `bucket_bytes`
// per group of devices, gathered after the update as at stage 2
// (DeepSpeed gathers its persistent parameters in one coalesced
// all-gather after the step). Each weight at its own stage where `groups`
// names it (sorted here; stage 0 beside a sharded stage is a FieldError
// naming TrainOptions.zero_weights), lowered to that of a weight layout
// computed from it (pcg's weight_zero_stages), each bucket of one stage.
void set_zero(ExecutionPlan& plan, ZeroStage zero, int64_t persistence_threshold, const ZeroWeights& groups, double bucket_bytes);

// The devices a strategy needs: 1 + the highest device any task runs on.
int devices_needed(const Graph& g, std::span<const MachineView> views);

}  // namespace pcgx::runtime
