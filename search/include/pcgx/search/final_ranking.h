#pragma once
// The last step of `--search unity` (FlexFlow, Section 5: the simulator as
// the judge): the search's best PCG and the model's baselines are mapped by
// the machine-mapping DP, each mapping is simulated task by task
// (simulator.h), and the fastest in simulation is the result. The DP adds
// times along series compositions and assumes gradient synchronization
// runs on a channel of its own; the simulator sees transfers queue on a
// port and buckets wait behind backward transfers, so where the two
// disagree about which finalist is faster, the simulator decides.
//
// What it preserves: every finalist computes the model's outputs (the
// search's best by verified rules, the baselines by construction).
#include <string>
#include <vector>

#include "pcgx/search/machine_mapping.h"

namespace pcgx::search {

struct Finalist {
  std::string label;  // "search", "data parallel", "expert"
  Graph graph;
  std::vector<std::string> applied;  // rules from the model, when it came from the search
};

struct RankedFinalist {
  std::string label;
  bool feasible = false;
  double estimate = 0, simulated = 0;  // seconds per iteration: the DP's, the simulator's
};

struct Ranking {
  std::vector<RankedFinalist> finalists;  // in the order given
  int chosen = -1;                        // the fastest feasible one in simulation (the first on a tie); -1: none
};

Ranking rank_by_simulation(const std::vector<Finalist>& finalists, const MachineMapper& mapper);

}  // namespace pcgx::search
