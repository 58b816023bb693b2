#include "pcgx/search/final_ranking.h"

#include "pcgx/search/simulator.h"

namespace pcgx::search {

Ranking rank_by_simulation(const std::vector<Finalist>& finalists, const MachineMapper& mapper) {
  Ranking r;
  for (size_t i = 0; i < finalists.size(); ++i) {
    const Strategy s = mapper.map(finalists[i].graph);
    RankedFinalist f{finalists[i].label, s.estimate.feasible, s.estimate.time, 0};
    if (f.feasible) {
      f.simulated = Simulator(s.graph, s.views, mapper.cost()).time();
      if (r.chosen < 0 || f.simulated < r.finalists[static_cast<size_t>(r.chosen)].simulated) r.chosen = static_cast<int>(i);
    }
    r.finalists.push_back(std::move(f));
  }
  return r;
}

}  // namespace pcgx::search
