#pragma once
// Series-parallel decomposition of a PCG's active nodes (internal to the
// machine mapping). Sub-sets are split, in this order of preference:
//   - into weakly connected components (a parallel composition);
//   - at the cuts of a topological order where every edge crossing the cut
//     leaves from one node or enters the next one (a series composition at
//     a dominator / post-dominator);
//   - otherwise into single nodes in topological order (a series: always a
//     valid schedule, though it gives up overlapping branches).
// Only edges inside a sub-set count, so a residual connection does not hide
// the branches it jumps over.
#include <cstdint>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx::search {

struct SPNode {
  enum Kind : uint8_t { kLeaf, kSeries, kParallel } kind = kLeaf;
  NodeId node = -1;              // kLeaf
  std::vector<int> children;     // indices into SPTree::nodes
  std::vector<NodeId> members;   // the graph nodes below, ascending
};

struct SPTree {
  std::vector<SPNode> nodes;
  int root = -1;
};

// `active[n]` selects the nodes to decompose; `readers[n]` lists the active
// nodes reading node n (any output).
SPTree decompose(const Graph& g, const std::vector<char>& active, const std::vector<std::vector<NodeId>>& readers);

}  // namespace pcgx::search
