#pragma once
// Structural hashes of PCGs: equal for graphs that differ only in node
// numbering and names, so the search recognizes a candidate it has seen and
// the machine mapping shares sub-graph solutions across candidates.
#include <cstdint>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx::search {

// What a node computes locally: operator, attributes, input and output
// parallel shapes (not where its inputs come from).
uint64_t local_hash(const Node& n, const Graph& g);
// Per node: local_hash combined with its inputs' deep hashes (Merkle).
std::vector<uint64_t> deep_hashes(const Graph& g);
// The whole graph: the multiset of deep hashes and the outputs.
uint64_t graph_hash(const Graph& g);

}  // namespace pcgx::search
