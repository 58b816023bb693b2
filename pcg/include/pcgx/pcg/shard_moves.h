#pragma once
// How a shard-level operator (the parallel operators, replica-axis
// Concat/Split) builds its output shards from input shards. Output shard j
// is the sum of its moves; a move takes one input shard and copies it,
// cuts a block out of it (Repartition), or places it as a block of the
// output (Combine). Each is linear, and its transpose is the backward move:
// copy <-> copy, cut <-> place. Reduce is several copies into one shard;
// Replicate one shard copied into several.
//
// The runtime executes moves; the placement (placement.h) and the cost
// model read them to know which shards travel where.
#include <cstdint>
#include <span>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx {

struct Move {
  enum class Kind : uint8_t { kCopy, kCut, kPlace };
  int32_t output = 0, out_shard = 0;
  int32_t input = 0, in_shard = 0;
  Kind kind = Kind::kCopy;
  std::vector<int64_t> offset;  // kCut: where in the input; kPlace: where in the output
};

// The moves of shard-level node `n` whose inputs have shapes `in`, in
// output-shard order. Throws pcgx::Error for an operator without a rule.
std::vector<Move> shard_moves(const Node& n, std::span<const ParallelTensorShape> in);

}  // namespace pcgx
