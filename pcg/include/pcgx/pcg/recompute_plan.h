#pragma once
// Which operators a recomputation policy re-runs in backward
// (training_recipe.h says what each policy means): one plan, read alike by
// the cost model and the simulator (which charge a recomputed operator's
// forward again in its backward), the memory model (which does not keep
// its outputs through the step, but holds the outputs of one segment at a
// time while that segment's backward runs: search's
// DeviceMemory::transient) and the runtime (which frees them after their
// last forward reader and re-runs the segment before its backward:
// runtime/device_executor.h).
#include <cstdint>
#include <vector>

#include <span>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/training_recipe.h"

namespace pcgx {

struct RecomputePlan {
  // Per node: its outputs are recomputed, not kept (sources and layouts never).
  std::vector<char> recomputed;
  // Per node: the segment re-run together (its outputs live at once during
  // that segment's backward); -1 for nodes not recomputed.
  std::vector<int32_t> segment;
  int32_t segments = 0;
  // Per node (empty: none): recomputed inside a FlashAttention kernel's
  // backward (training_recipe.h's AttentionKernel::kFlash), which re-runs
  // the scores itself: the cost model charges no separate re-run.
  std::vector<char> in_kernel;
  bool recomputed_in_kernel(NodeId n) const { return !in_kernel.empty() && in_kernel[static_cast<size_t>(n)]; }
  // Per node (empty: none): a FlashAttention kernel's inner operator,
  // whatever recomputes it (the kernel, or a layer re-run whole): its
  // outputs never reach memory, the kernel holding a block at a time.
  std::vector<char> unwritten;
  bool never_written(NodeId n) const { return !unwritten.empty() && unwritten[static_cast<size_t>(n)]; }
};

// The plan of `policy` on `g` (any PCG: a model or a parallelized strategy),
// whose source layouts are `layouts`; under full, only `layers` of its
// segments when `layers` is not kAllLayers: the first in forward order of
// those whose re-run frees memory (a transformer's layers), then of the
// rest (a segment whose outputs no backward reads, as GPT's position
// embedding: recomputing it frees nothing). With `chunk` (per node, a
// pipelined graph's chunks: pipeline_chunks.h), `layers` of each chunk, so
// that a joined pipeline recomputes what each chunk planned alone does
// (Megatron-LM's --recompute-num-layers counts per pipeline stage's chunk);
// a segment belongs to the chunk of its first node, and a parallel operator
// reading another chunk's tensor is kept (its re-run would move data
// between the chunks' devices). A layout change run in one step (relayout.h's partner pair)
// is recomputed whole or kept whole. Under gathers and full+gathers, each
// sequence-parallel gather that nothing else recomputes (its readers
// compute operators, none recomputed) re-runs alone, a segment each, after
// full's; with `chunk`, not one that reads or feeds another chunk.
//
// Under operators, the nodes `operators` names (those `g` has; never a
// source or a layout, a loss or a graph output, which the step reads
// after its backward pass, a node another chunk reads, or, in a graph
// with micro-batches, one that reads and writes none: it runs once per
// step) and every parallel operator whose input one of them computes
// (through parallel operators) and whose readers are all recomputed: a
// layout change between two named operators re-runs with them.
// Recomputed nodes that read one another form one segment (within a
// chunk, since no recomputed node is read across chunks).
//
// Under `attention` flash, each FlashAttention kernel (attention_kernels.h)
// the policy leaves whole has its inner operators (all but the weighted
// sum) recomputed, a segment per kernel, marked in_kernel: the kernel
// keeps none of them and its backward re-runs them; the policy's own
// choices come first (full's layers re-run the kernel whole, and selective
// then finds nothing left of attention to take).
RecomputePlan plan_recompute(const Graph& g, const SourceLayouts& layouts, Recompute policy, int32_t layers = kAllLayers,
                             std::span<const int64_t> chunk = {}, std::span<const std::string> operators = {},
                             AttentionKernel attention = AttentionKernel::kEager);
// Whether a pipelined graph's plan is made with its chunks (`chunk` above),
// as the runtime, the simulator and the predicted bytes all make it: a
// count of layers (per chunk), operators (never one another chunk reads),
// or any layers with interlaced chunks (whose boundaries cross stages).
bool plans_per_chunk(Recompute policy, int32_t layers, const PipelineShape& p);

// The recipe's policy, layer count and operators.
RecomputePlan plan_recompute(const Graph& g, const SourceLayouts& layouts, const TrainingRecipe& recipe, std::span<const int64_t> chunk = {});

// The bytes a step's re-run forward passes send between devices again
// under `policy`, for g with its machine views on `devices` devices: the
// recomputed nodes' forward messages and collectives, beside what
// step_communication.h's step_bytes counts (the runtime measures both).
// `kept_inputs`: a re-run compute task reads the inputs it received in the
// forward pass, which are not sent again (the runtime under a pipeline
// schedule, pipeline_schedule.h), so only layout changes and collectives
// send again.
double recompute_step_bytes(const Graph& g, std::span<const MachineView> views, int64_t devices, Recompute policy,
                            bool kept_inputs = false, int32_t layers = kAllLayers, std::span<const int64_t> chunk = {},
                            std::span<const std::string> operators = {}, AttentionKernel attention = AttentionKernel::kEager);

}  // namespace pcgx
