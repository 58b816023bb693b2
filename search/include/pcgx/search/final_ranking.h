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
#include <optional>
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

// What simulating a plan gave: its time, or why it was not simulated.
struct SimulatedTime {
  double time = 0;
  std::string not_simulated;  // non-empty: too many tasks to simulate one by one (TooManyTasks' message)
};

struct Ranking {
  std::vector<RankedFinalist> finalists;  // in the order given
  int chosen = -1;                        // the fastest feasible one in simulation (the first on a tie); -1: none
  // The chosen finalist as mapped and simulated (or refused by the
  // simulator), and the cost model it was priced by: a caller that
  // simulates the result again for its report (`pcgx optimize`) takes the
  // outcome from here for the same plan (simulated_time), since at
  // thousands of devices one simulation, or reaching the simulator's task
  // limit, is seconds.
  Strategy chosen_plan;
  const CostModel* priced_by = nullptr;  // null: nothing simulated to reuse
  TrainingRecipe recipe;                 // priced_by's, against a model at the same address since
  SimulatedTime chosen_simulation;       // refused: ranked by its estimate
};

// The same plan to simulate: node for node the same computation from the
// same named sources (deep hashes) on the same view, whatever the order of
// the nodes, and the same outputs. (Simulated alike up to the order in
// which independent tasks queue for one device, which the node order
// breaks ties by: the first finalist's time stands for both.)
bool same_plan(const Strategy& a, const Strategy& b);

// The ranking's simulation of `s` under `cost`, where `s` is the plan it
// chose and simulated (or found too large to) under that cost model;
// nothing otherwise.
std::optional<SimulatedTime> simulated_time(const Ranking& r, const Strategy& s, const CostModel& cost);

Ranking rank_by_simulation(const std::vector<Finalist>& finalists, const MachineMapper& mapper);

}  // namespace pcgx::search
