#pragma once
// Rules lifted over a samples split (internal; see substitution.h, "Lifted
// matches").
//
// A rule is proved for its inputs' parallel states. A data-parallel graph
// holds the same computation once per block of samples: every activation
// split L more ways on dimension 0, every weight copied L more times. A
// rule read on such a graph is the rule applied to each block of samples
// alone, so it holds there as proved, provided nothing in it mixes the
// blocks. What "nothing mixes the blocks" means here, checked on both
// sides of the rule at the match:
//
// - every rule input is either a *samples* tensor (the rule states no
//   split of dimension 0; the graph's is L, outermost) or a *copies*
//   tensor (the rule states replica 1; the graph holds L equal copies: a
//   Replicate of one slot, moved by Repartition or Combine at most);
// - every compute operator reading a samples tensor has a parallel kind
//   (the registry's, proved by `pcgx ops check`) that splits each samples
//   input and its outputs on dimension 0 and copies every copies input:
//   it computes each block of samples from that block alone;
// - an operator reading only copies computes one slot in the rule (no
//   reduction split), so every copy computes the same value: every copies
//   tensor has all its slots equal, and which slot a task reads does not
//   matter;
// - no compute operator has a whole shape among its attributes (Reshape's
//   names dimension 0's extent, which a block of samples does not have);
// - parallel operators act within a block (Repartition and Combine nest
//   the rule's split inside the samples split; Replicate, Reduce and
//   AllReduce of equal slots leave equal slots), and no operator works on
//   replica slots as a sequence (Concat/Split along the replica axis) or on
//   micro-batches;
// - every operator's outputs have the rule's parallel state with L on
//   dimension 0 (samples) or on the replica degree (copies).
//
// Then each block of samples of every tensor is the rule's tensor computed
// from the inputs' blocks, on both sides; the rule equates those.
#include <cstdint>
#include <optional>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx::search {

enum class Lifted : uint8_t { kSamples, kCopies };

// The rule's state `want` (degrees mapped with `k`) lifted by `lift` as `how`.
bool lifted_state_is(const ParallelTensorShape& want, const ParallelTensorShape& have, int64_t k, int64_t lift, Lifted how);
// How `have` is `want` lifted by `lift`, if it is.
std::optional<Lifted> lifted_as(const ParallelTensorShape& want, const ParallelTensorShape& have, int64_t k, int64_t lift);

// Whether every replica slot of `t` holds the same value, as far as its
// producers show (copies of one slot; nothing summed or gathered into them).
bool all_copies(const Graph& g, TensorRef t);

// Whether graph node `at` of `g`, standing for rule node `rule_node`, keeps
// the blocks of samples apart given how its inputs are lifted (`inputs`,
// one per input); the lift of its outputs, or nothing.
std::optional<Lifted> lift_node(const Node& rule_node, const Graph& g, NodeId at, const std::vector<Lifted>& inputs, int64_t k,
                                int64_t lift);

}  // namespace pcgx::search
