#include "pcgx/search/final_ranking.h"

#include <tbb/parallel_for.h>

#include "pcgx/search/graph_hash.h"
#include "pcgx/search/simulator.h"

namespace pcgx::search {

Ranking rank_by_simulation(const std::vector<Finalist>& finalists, const MachineMapper& mapper) {
  // Each finalist is mapped, then simulated on its own (in parallel); the
  // choice is made after, in order, so it is the same whatever the threads.
  // Finalists that map to the same plan (the search often returns data
  // parallelism or the expert's plan) are simulated once: node by node the
  // same computation (deep hashes) reading the same nodes, the same
  // outputs, on the same views. At thousands of devices one simulation is
  // seconds.
  Ranking r;
  const size_t n = finalists.size();
  r.finalists.resize(n);
  std::vector<Strategy> mapped(n);
  std::vector<std::vector<uint64_t>> hashes(n);
  tbb::parallel_for(size_t{0}, n, [&](size_t i) {
    mapped[i] = mapper.map(finalists[i].graph);
    hashes[i] = deep_hashes(mapped[i].graph);
  });
  auto same_plan = [&](size_t a, size_t b) {
    const Graph &x = mapped[a].graph, &y = mapped[b].graph;
    if (hashes[a] != hashes[b] || mapped[a].views != mapped[b].views || mapped[a].estimate.feasible != mapped[b].estimate.feasible ||
        x.outputs() != y.outputs())
      return false;
    for (size_t k = 0; k < x.size(); ++k)
      if (x.node(static_cast<NodeId>(k)).inputs != y.node(static_cast<NodeId>(k)).inputs) return false;
    return true;
  };
  std::vector<size_t> same(n);  // the first finalist with the same plan
  for (size_t i = 0; i < n; ++i) {
    same[i] = i;
    for (size_t j = 0; j < i; ++j)
      if (same[j] == j && same_plan(j, i)) {
        same[i] = j;
        break;
      }
  }
  tbb::parallel_for(size_t{0}, n, [&](size_t i) {
    const Strategy& s = mapped[i];
    RankedFinalist f{finalists[i].label, s.estimate.feasible, s.estimate.time, 0};
    if (f.feasible && same[i] == i) {
      try {
        f.simulated = Simulator(s.graph, s.views, mapper.cost()).time();
      } catch (const TooManyTasks&) {  // too large to run task by task: ranked by its estimate
        f.simulated = f.estimate;
      }
    }
    r.finalists[i] = std::move(f);
  });
  for (size_t i = 0; i < n; ++i)
    if (same[i] != i) r.finalists[i].simulated = r.finalists[same[i]].simulated;
  for (size_t i = 0; i < r.finalists.size(); ++i) {
    const RankedFinalist& f = r.finalists[i];
    if (f.feasible && (r.chosen < 0 || f.simulated < r.finalists[static_cast<size_t>(r.chosen)].simulated)) r.chosen = static_cast<int>(i);
  }
  return r;
}

}  // namespace pcgx::search
