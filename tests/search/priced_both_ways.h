#pragma once
// One graph mapped and simulated under two cost models (a recipe field off
// and on): the estimate and the simulator's time each way, so that a test
// can check that the two save the same time.
#include "pcgx/pcg/graph.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"

namespace pcgx::search {

struct BothWays {
  Strategy off, on;
  double simulated_off = 0, simulated_on = 0;
};
inline BothWays both_ways(const Graph& g, const CostModel& off, const CostModel& on) {
  BothWays b{MachineMapper(off).map(g), MachineMapper(on).map(g)};
  b.simulated_off = Simulator(b.off.graph, b.off.views, off).time();
  b.simulated_on = Simulator(b.on.graph, b.on.views, on).time();
  return b;
}

}  // namespace pcgx::search
