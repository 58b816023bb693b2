#pragma once
// Single-tensor cuts of a graph: the places where a model is a chain. Graph
// splitting cuts its pieces there (search/), a pipeline its stages, and full
// recomputation keeps only the tensors crossing them (recompute_plan.h).
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx {

// Positions in `order` (the non-source nodes of g in graph order, or any
// topological subset of them: tensors of nodes outside it never count as
// crossing) after which exactly one tensor crosses, and that tensor.
std::vector<std::pair<size_t, TensorRef>> valid_cuts(const Graph& g, const std::vector<NodeId>& order);

// A gap's shape (the nodes between two cuts): its operators, their output
// layouts and their text attributes (an activation's kind) in order, so
// that two layers of a model compare equal: not the names, nor the
// numbers, which a layer's own dropout seed makes differ (dimensions and
// degrees show in the layouts).
uint64_t gap_signature(const Graph& g, std::span<const NodeId> nodes);

// A model's layers among the gaps between its cuts: the longest stretch
// of gaps repeating with the smallest period P > 1 (a transformer layer
// spans two gaps, attention and feed-forward). Layer i is gaps
// start + i P .. start + (i + 1) P - 1; none (period 1) when nothing repeats.
struct RepeatingGaps {
  size_t start = 0, length = 0, period = 1;
  size_t layers() const { return period > 1 ? length / period : 0; }
};
RepeatingGaps repeating_gaps(const std::vector<uint64_t>& gaps);

}  // namespace pcgx
