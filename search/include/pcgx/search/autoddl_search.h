#pragma once
// AutoDDL's search (Chen et al., "AutoDDL: Automatic Distributed Deep
// Learning with Near-Optimal Bandwidth Cost", Sections 3-4),
// in pcgx's terms, beside unity's and FlexFlow's:
//
//   - SBP states. A tensor is split along one of its dimensions over the
//     devices (S(d)), or its replica slots hold copies (B) or partial sums
//     (P): pcgx's parallel tensor shapes over one mesh of all the devices.
//   - Signatures. What an operator may run as is what its registry entry
//     says: one of its parallel kinds (ParallelKind: "batch0", "out",
//     "reduce", ...) at the largest degree dividing both the device count
//     and every dimension the kind splits, or one task. The kind fixes the
//     SBP state of each input (S(d), B for kCopy, P for kSum) and of each
//     output (S(d), or P for kPartial).
//   - Transitions. Between a producer's state and the state a reader
//     needs, baselines.h's parallelize() inserts the parallel operators
//     (P->B all-reduce, P->S reduce-scatter, S->B all-gather, S(i)->S(j)
//     all-to-all), which the cost model prices with collectives.h, as it
//     prices every other plan.
//   - Objective. The machine-mapping DP's predicted iteration time of the
//     resulting PCG (machine_mapping.h); a signature that leaves a device
//     short of memory is infeasible, so never chosen.
//   - Coordinate descent. For every compute operator in graph order, the
//     best signature with all others fixed; rounds until one changes
//     nothing. From several starting points: data parallelism (each
//     operator's sample kind), every operator as one task, and random
//     assignments (`restarts` of them, from `seed`); the best fixed point
//     is the result. Starts run in parallel, each with an equal share of
//     the evaluation budget, so the result is the same on any machine.
//
// BatchNorm is first put in its statistics form (synchronized_batch_norm),
// so that it can split samples as data parallelism does.
//
// What it preserves: every PCG it builds computes the model's outputs
// (parallelize inserts only layout changes, each an identity).
#include <cstdint>

#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/search.h"

namespace pcgx::search {

struct AutoddlStats {
  int64_t starts = 0, rounds = 0, evaluations = 0;
};

struct AutoddlResult {
  Strategy strategy;
  AutoddlStats stats;
};

AutoddlResult autoddl_search(const Graph& model, const MachineMapper& mapper, const SearchOptions& options);

}  // namespace pcgx::search
