#pragma once
// Where a graph's dropouts run as one kernel with the sum reading them,
// under training_recipe.h's DropoutAddKernel::kFused
// (dropout_add_kernel.h): found once per graph, read alike by the cost
// model and the simulator, which price the kernel's forward pass as the
// sum's own pass and nothing at the dropout.
#include <cstddef>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/source_layout.h"

namespace pcgx {

// A kernel is a
// dropout (OpDef::dropout_add kDropout) whose output is read by one
// operator alone, once, and not a graph output, that operator a sum
// (kSum) whose other input is an activation of the same shard shape and
// not itself a dropout fused there (of a sum of two dropouts, the first
// runs in the sum's pass, the second alone). The
// graph may be a model or a parallelized strategy (its operators' shards:
// a parallel operator between the two, or a shard-level copy of either,
// leaves both eager).
struct DropoutAddKernels {
  // Per node (empty: none): the other operator of its kernel, -1 for none.
  std::vector<NodeId> partner;
  bool fused(NodeId n) const { return !partner.empty() && partner[static_cast<size_t>(n)] >= 0; }
  NodeId partner_of(NodeId n) const { return partner.empty() ? -1 : partner[static_cast<size_t>(n)]; }
  // How many dropouts run fused.
  size_t count() const;
};

DropoutAddKernels find_dropout_add_kernels(const Graph& g, const SourceLayouts& layouts);

}  // namespace pcgx
