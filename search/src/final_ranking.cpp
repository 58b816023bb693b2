#include "pcgx/search/final_ranking.h"

#include <tbb/parallel_for.h>

#include "pcgx/search/simulator.h"

namespace pcgx::search {

Ranking rank_by_simulation(const std::vector<Finalist>& finalists, const MachineMapper& mapper) {
  // Each finalist is mapped and simulated on its own (in parallel); the
  // choice is made after, in order, so it is the same whatever the threads.
  Ranking r;
  r.finalists.resize(finalists.size());
  tbb::parallel_for(size_t{0}, finalists.size(), [&](size_t i) {
    const Strategy s = mapper.map(finalists[i].graph);
    RankedFinalist f{finalists[i].label, s.estimate.feasible, s.estimate.time, 0};
    if (f.feasible) f.simulated = Simulator(s.graph, s.views, mapper.cost()).time();
    r.finalists[i] = std::move(f);
  });
  for (size_t i = 0; i < r.finalists.size(); ++i) {
    const RankedFinalist& f = r.finalists[i];
    if (f.feasible && (r.chosen < 0 || f.simulated < r.finalists[static_cast<size_t>(r.chosen)].simulated)) r.chosen = static_cast<int>(i);
  }
  return r;
}

}  // namespace pcgx::search
