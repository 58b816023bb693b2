#pragma once
// FlexFlow's search (Jia et al. 2019, Section 6), on PCGs: Markov chain
// Monte Carlo over strategies, each costed by the execution simulator
// (simulator.h).
//
// A state is a PCG and a machine view per operator. Chains start from
// data parallelism, the expert strategy (when the model has one) and
// random plans (the model after a few random substitutions), each mapped
// by the machine-mapping DP, and share the proposal budget. A proposal is
//   - with probability 3/4, a new machine view for one random operator
//     (start and stride, anywhere its tasks fit): re-simulated by delta
//     simulation, and undone the same way when rejected (an operator whose
//     tasks fill the machine has no other view: it gets the other move); or
//   - a random substitution at a random match (explorer.h's steps: a rule,
//     or an introducer and a rule, which is how an operator's parallel
//     degrees change in a PCG), mapped by the DP and simulated in full.
// It is accepted with the Metropolis rule on the simulated time t:
// always when faster, else with probability exp(-beta (t' - t) / t)
// (beta = 20: a 5% slower state is taken about one time in three), and
// only when every device's memory fits. A chain stops at its share of the
// budget or, past a quarter of it, when it has gone half of its proposals
// without improving its best (FlexFlow's stopping rule).
#include <cstdint>
#include <string>
#include <vector>

#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/search.h"

namespace pcgx::search {

struct McmcStats {
  int64_t chains = 0;
  int64_t proposals = 0, accepted = 0;
  int64_t view_proposals = 0, rewrite_proposals = 0;
  double delta_seconds = 0;  // spent in delta simulation (view proposals and their undo)
  double full_seconds = 0;   // spent building and simulating rewritten PCGs in full
  int64_t full_simulations = 0, delta_simulations = 0;
};

struct McmcResult {
  Strategy strategy;  // the best state; its estimate is its simulation (simulated_estimate)
  std::vector<std::string> applied;
  McmcStats stats;
};

// options.proposals and options.seed steer it; options.progress reports.
McmcResult mcmc_search(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options);

}  // namespace pcgx::search
