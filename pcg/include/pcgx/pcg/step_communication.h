#pragma once
// How each node of a placed PCG runs in a training step, and what the step
// sends between devices: one decision shared by the runtime, which executes
// it (runtime/execution_plan.h), and the cost model, which counts its bytes
// (a plan's predicted bytes per step equal what `pcgx run` measures).
//
//   kTasks      compute operators: their tasks; an input shard living on
//               another device travels there, and its gradient back
//   kSliced     layouts of a source made of value-preserving parallel
//               operators (source_layout.h): filled from the source where
//               they live, never moved; a stored weight layout's copies
//               all-reduce their gradients once per step
//   kAllReduce  a layout change (relayout.h) that sums groups of slots and
//               copies the sums back onto the same devices (Reduce then
//               Replicate, AllReduce): the communicator's all-reduce in
//               each group, forward and backward
//   kPieces     any other layout change: its pieces, each straight to its
//               device (the second operator is kDone)
//   kMoves      other shard-level operators: moves (shard_moves.h)
//   kDone       sources, and the operators after the first of a layout
//               change (its partner, and the splits between: relayout.h)
//
// Bytes are counted as the runtime stores shards: 4 per element, whatever
// the element type; an all-reduce of n bytes among k devices sends
// 2 (k - 1) n in all (the communicator's ring, or its reduce then broadcast).
#include <cstdint>
#include <vector>

#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/relayout.h"
#include "pcgx/pcg/source_layout.h"

namespace pcgx {

struct RecomputePlan;

// One group of an all-reduce: per member, its device, the input shard it
// contributes and the output shard it receives.
struct AllReduceMember {
  int device = 0;
  int32_t in_shard = 0, out_shard = 0;
};

struct NodeRun {
  enum class Kind : uint8_t { kTasks, kMoves, kSliced, kPieces, kAllReduce, kDone };
  Kind kind = Kind::kDone;
  NodeId to = -1;                                     // kPieces, kAllReduce: the node whose output 0 is written;
                                                      // kDone inside a layout change: its partner
  std::vector<Piece> pieces;                          // kPieces: input 0 -> to's output 0
  std::vector<std::vector<AllReduceMember>> groups;   // kAllReduce
};

// How much of each run node_runs builds: kPieces every layout change's
// blocks (what the runtime executes: offsets and extents per piece), kKinds
// only the kinds, partners and all-reduce groups (what counting bytes and
// placing tasks need; step_bytes counts a kPieces run's pieces from their
// sizes either way). At 3,072 devices a plan's pieces are millions of
// small vectors, built and freed for nothing where only bytes are asked.
enum class RunDetail : uint8_t { kPieces, kKinds };

// Per node of p's graph.
std::vector<NodeRun> node_runs(const Placement& p, const SourceLayouts& layouts, RunDetail detail = RunDetail::kPieces);
// Per node: 1 for the first operator of a layout change run in one step
// (a Combine or Reduce whose partner completes it, relayout.h) and for
// the splits between the two where there are some, which hold nothing of
// their own: the runtime gives their outputs no buffer and the memory
// model keeps none. node_runs' r.to names the partner.
std::vector<char> layout_change_heads(const Graph& g, const SourceLayouts& layouts);
// Per node: the partner completing the layout change when it is such a
// first operator or a split between (its output written at the first
// operator's turn), else -1.
std::vector<NodeId> layout_change_partners(const Graph& g, const SourceLayouts& layouts);

// Per Weight: the tensor holding its trained value (itself, or the end of
// its stored layout, whose replica slot 0 gathers to it); {-1, 0} elsewhere.
std::vector<TensorRef> parameter_tensors(const Graph& g, const SourceLayouts& layouts);

// The bytes one training step sends between devices (forward, backward,
// gradient synchronization, the loss to device 0).
double step_bytes(const Placement& p, const SourceLayouts& layouts, const std::vector<NodeRun>& runs);
// The same for a graph with its machine views on `devices` devices.
double step_bytes(const Graph& g, std::span<const MachineView> views, int64_t devices);
// What `plan`'s re-run forward passes send between devices again, beside
// step_bytes: each recomputed node's forward messages and collectives;
// with `kept_inputs` (a pipeline schedule's runtime keeps what a compute
// task received), only the layout changes and collectives
// (recompute_plan.h's recompute_step_bytes, which makes the plan itself).
double recompute_step_bytes(const Placement& p, const std::vector<NodeRun>& runs, const RecomputePlan& plan, bool kept_inputs);

// The bytes of the tensor shards `device` owns (every node's outputs, as
// stored): what a step clears and rewrites there beside its kernels, as
// values and gradients. The most any device owns bounds the step.
double held_bytes(const Placement& p, int64_t device);
double max_held_bytes(const Placement& p);

}  // namespace pcgx
