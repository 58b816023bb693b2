#pragma once
// Single-tensor cuts of a graph: the places where a model is a chain. Graph
// splitting cuts its pieces there (search/), a pipeline its stages, and full
// recomputation keeps only the tensors crossing them (recompute_plan.h).
#include <cstddef>
#include <utility>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx {

// Positions in `order` (the non-source nodes of g in graph order, or any
// topological subset of them: tensors of nodes outside it never count as
// crossing) after which exactly one tensor crosses, and that tensor.
std::vector<std::pair<size_t, TensorRef>> valid_cuts(const Graph& g, const std::vector<NodeId>& order);

}  // namespace pcgx
