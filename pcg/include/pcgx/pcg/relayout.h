#pragma once
// Changing the layout of one tensor in one step (docs/design.md "Search": a
// tensor's layout change over the same devices is the matching
// collective), shared by the runtime, which executes it, and the cost
// model, which prices it and counts its bytes.
//
// A Combine or Reduce whose only reader is a Repartition or Replicate is
// such a change: of the same degree over the same devices, Combine then
// Repartition is an all-to-all, Combine then Replicate an all-gather,
// Reduce then Repartition a reduce-scatter, Reduce then Replicate an
// all-reduce; of other degrees (a table split by columns over 64 devices
// read by 192 sample shards) it is a general exchange. It runs as pieces:
// every block of an input shard that an output shard needs goes straight
// to the output's device, and nothing of the intermediate tensor exists.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx {

// Per node, its readers (Graph::consumers()).
using Readers = std::vector<std::vector<std::pair<NodeId, int>>>;

// The Repartition or Replicate that completes a layout change started by
// node `n` (a Combine or Reduce), or nothing: n's only reader, where it is
// one. A sum that splits more than one dimension before merging (a
// Reduce, then Repartitions each the only reader of the one before, the
// last read only by Combines: the layout search's split-first sequence,
// search/layout_search.h) is one step too, completed by its last
// Repartition: every partial block goes straight to the device of the
// shard that needs it, and the Repartitions between (layout_change_inside)
// hold nothing, as the first operator does not.
std::optional<NodeId> layout_change_partner(const Graph& g, NodeId n, const Readers& consumers);
// The operators strictly between the first operator `first` of a layout
// change and its partner `last`, in order (empty for a pair).
std::vector<NodeId> layout_change_inside(const Graph& g, NodeId first, NodeId last);

// One block travelling from an input shard to an output shard.
struct Piece {
  int32_t in_shard = 0, out_shard = 0;
  std::vector<int64_t> in_offset, out_offset, extent;  // within the shards
  int64_t elements() const;
};

// The pieces that turn `from` into `to`, two layouts of the same logical
// tensor, summing groups of `sum` replica slots and copying the result into
// `copy` slots (Reduce(sum) then Replicate(copy): from.replica / sum * copy
// = to.replica): output slot c adds input slots (c / copy) sum ... +
// sum - 1. Every output shard is the sum of its pieces (placed in a zeroed
// shard); the backward pass sends each piece's gradient the other way and
// adds it.
std::vector<Piece> relayout_pieces(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum = 1,
                                   int64_t copy = 1);
// The same pieces' shards and sizes only (what pricing them needs), into
// `out`, which is cleared first.
struct PieceSize {
  int32_t in_shard = 0, out_shard = 0;
  int64_t elements = 0;
};
void relayout_piece_sizes(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum, int64_t copy,
                          std::vector<PieceSize>& out);
// The same, each piece passed to `f` in the same order instead of listed
// (at 3,072 devices a relayout can be millions of pieces).
void for_each_relayout_piece(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum, int64_t copy,
                             const std::function<void(const PieceSize&)>& f);
// The replica factors of the layout change node `first` and its partner
// `second` make: (sum, copy).
std::pair<int64_t, int64_t> relayout_factors(const Node& first, const Node& second);

}  // namespace pcgx
