#pragma once
// The communication a parallelized PCG runs between its compute operators
// (what a plan leaves to pcgx: docs/plans.md), one entry per layout change
// of an activation, as the cost model prices it: a pair of parallel
// operators over the same devices is the collective it amounts to
// (collectives.h's layout_change), any other parallel operator its own
// moves (broadcast, scatter, reduce, gather, all-reduce, copies). Weights'
// stored layouts are left out: their cost is the gradient
// synchronization, reported apart.
#include <string>
#include <vector>

#include "pcgx/pcg/placement.h"
#include "pcgx/search/cost_model.h"

namespace pcgx::search {

struct DerivedMove {
  std::string from, to;  // the compute operators it connects (a source's name, or "" for none)
  std::string what;      // "all-reduce", "all-gather", ..., "copies"
  int64_t devices = 0;   // devices taking part
  double bytes = 0;      // one device's share of the tensor moved, per step
  Seconds time;          // forward and backward, per step
};

// Costliest first (forward and backward time), ties in graph order.
std::vector<DerivedMove> derived_communication(const Placement& p, const CostModel& cost);

}  // namespace pcgx::search
