#pragma once
// Which forward values a training step keeps for its backward pass: one
// answer, read alike by the memory model (search's memory_breakdown) and
// the runtime (runtime/device_executor.h), which frees the rest.
//
// A node output is kept when a reverse rule reads it (the registry's
// backward_reads, operator.h: its producer's as an output, a compute
// reader's as an input), when a recomputed reader re-runs from it in
// backward, and always for sources, their layouts (source_layout.h) and
// the graph's outputs; and all of a node's outputs when one of them is
// kept (a Split: the runtime frees a node's outputs together). Everything
// else is freed once its last forward
// reader has run: a Linear's output read only by a Reshape, a row-parallel
// Linear's partial sums read only by their reduce-scatter, a Dropout's
// output read only by a residual add. A recomputed segment's re-run in
// backward frees the same way what no reverse rule reads, so it holds only
// what its backward needs, as autograd does under Megatron-LM's full
// recomputation. Parallel operators read no value in
// backward (their duals move gradients), so a layout change keeps its
// input only when something else reads it.
//
// What stays (Korthikanti et al. 2022, section 4, count the same way):
// per GPT layer without recomputation, 24 s b h + 4 a s^2 b bytes in 16-bit
// precision: their 34 s b h + 5 a s^2 b less the three dropout masks
// (s b h each for the two after the projections, a s^2 b after the
// softmax, at one byte per element; pcgx draws a mask again from its seed)
// and the GeLU's input (8 s b h; pcgx's Linear with a fused GeLU computes
// the product again in backward).
#include <cstdint>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/source_layout.h"

namespace pcgx {

enum class OutputLife : uint8_t {
  kKept,   // through the backward pass
  kFreed,  // after its last forward reader: no backward pass reads it
  // Recomputed (recompute_plan.h): freed in forward once its segment's
  // last reader has run, created again by the segment's re-run in
  // backward and held until the segment's backward is done: a reverse
  // rule reads it.
  kRecomputed,
  // Recomputed, but no reverse rule reads it: freed in forward after its
  // last reader, and again in the re-run after its last reader there
  // (rerun_last_reader), as autograd frees what no backward saves.
  kRecomputedPassing,
};

struct OutputLives {
  std::vector<std::vector<OutputLife>> of;  // [node][output]
  // Per node: the latest node reading one of its outputs (itself when none does).
  std::vector<NodeId> last_reader;
  // Per recomputed node: the latest node of its own segment reading it (itself when none does).
  std::vector<NodeId> rerun_last_reader;
  OutputLife at(TensorRef t) const { return of[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]; }
};

// The lives of g's outputs under recomputation plan `rp` (plan_recompute
// on the same graph and layouts).
OutputLives output_lives(const Graph& g, const SourceLayouts& layouts, const RecomputePlan& rp);

}  // namespace pcgx
