#pragma once
// From fingerprinted graphs to candidate substitutions. Graphs with equal
// fingerprints form a class, and every two members of a class are a raw
// pair. A pair whose side with fewer operators reads an input the other
// does not (sides of one size: reads other inputs) is no substitution, since
// matching its source binds no tensor to that input; only functions that
// ignore an input pair so (MSELoss(x, x) and MSELoss(y, y), both 0). Then
// three pruning stages drop redundant pairs, each counted:
//   1. common subgraph: the sides share an identical operator (it can be
//      cut out and replaced by an input), or every output is the same
//      operator applied to inputs that are equal by fingerprint, or the
//      sides fall apart into independent pieces that pair up on their own;
//   2. renaming: the same pair up to renaming inputs of one kind (x1<->x2)
//      and swapping the two sides;
//   3. implied: taking pairs smallest first (fewest operators, then fewest
//      input references, then those that only reorder the same operators),
//      a pair is dropped
//      when its sides are already known equal through the pairs of its class
//      kept or dropped so far, or when up to two rewrites with strictly
//      smaller kept candidates turn one side into a graph known equal to the
//      other.
//      What is kept connects every class with its smallest pairs.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/generator/enumerator.h"

namespace pcgx::gen {

struct CandidatePair {
  SmallGraph source;  // the side with more operators
  SmallGraph target;
  std::vector<std::pair<int, int>> output_map;  // source output -> target output
};

struct StageCounts {
  uint64_t graphs = 0;
  uint64_t fingerprints = 0;      // distinct fingerprints
  uint64_t classes = 0;           // fingerprints shared by two or more graphs
  uint64_t raw_pairs = 0;         // every pair within a class
  uint64_t after_common_subgraph = 0;
  uint64_t after_renaming = 0;
  uint64_t after_implied = 0;
};

// `records`: the graphs whose fingerprint is shared (Enumerator::run).
std::vector<CandidatePair> find_candidates(const Enumerator& e, std::vector<GraphRecord> records, StageCounts& counts);

}  // namespace pcgx::gen
