#pragma once
// From fingerprinted graphs to candidate substitutions. Graphs with equal
// fingerprints form a class; every member pairs with the class's smallest
// member (every other equality in the class follows by transitivity). Then
// three pruning stages drop redundant pairs, each counted:
//   1. common subgraph: the sides share an identical operator (it can be
//      cut out and replaced by an input), or every output is the same
//      operator applied to inputs that are equal by fingerprint, or the
//      sides fall apart into independent pieces that pair up on their own;
//   2. renaming: the same pair up to renaming inputs of one kind (x1<->x2)
//      and swapping the two sides;
//   3. implied: one application of a smaller kept candidate turns one side
//      into the other, or into a smaller member of the same class.
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
  uint64_t star_pairs = 0;        // each member with its class's smallest member
  uint64_t after_common_subgraph = 0;
  uint64_t after_renaming = 0;
  uint64_t after_implied = 0;
};

// `records`: the graphs whose fingerprint is shared (Enumerator::run).
std::vector<CandidatePair> find_candidates(const Enumerator& e, std::vector<GraphRecord> records, StageCounts& counts);

}  // namespace pcgx::gen
