#include "pcgx/search/final_ranking.h"

#include <tbb/parallel_for.h>

#include <algorithm>

#include "pcgx/pcg/stable_hash.h"
#include "pcgx/search/graph_hash.h"
#include "pcgx/search/simulator.h"

namespace pcgx::search {
namespace {

// A plan's identity whatever the order of its nodes: each node's deep hash
// (what it computes from which named sources) beside its view, sorted, and
// the outputs' deep hashes in order. The baselines build the plan a search
// returns with its nodes in another order (GPT's data parallelism places
// the positions' input before the word table), and node by node those
// would compare unequal.
struct PlanKey {
  std::vector<std::pair<uint64_t, size_t>> nodes;  // (deep hash, node), sorted
  std::vector<uint64_t> outputs;
  const Strategy* plan = nullptr;
};

uint64_t view_hash(const MachineView& v) {
  uint64_t h = hash_mix(static_cast<uint64_t>(v.start), static_cast<uint64_t>(v.stride));
  for (int64_t s : v.strides) h = hash_mix(h, static_cast<uint64_t>(s));
  return h;
}

PlanKey plan_key(const Strategy& s) {
  PlanKey k;
  k.plan = &s;
  const std::vector<uint64_t> deep = deep_hashes(s.graph);
  k.nodes.reserve(deep.size());
  for (size_t i = 0; i < deep.size(); ++i)
    k.nodes.emplace_back(hash_mix(deep[i], i < s.views.size() ? view_hash(s.views[i]) : 0), i);
  std::sort(k.nodes.begin(), k.nodes.end());
  for (const TensorRef& o : s.graph.outputs()) k.outputs.push_back(hash_mix(deep[static_cast<size_t>(o.node)], static_cast<uint64_t>(o.output)));
  return k;
}

bool same_key(const PlanKey& a, const PlanKey& b) {
  if (a.outputs != b.outputs || a.nodes.size() != b.nodes.size() || a.plan->views.size() != b.plan->views.size()) return false;
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    if (a.nodes[i].first != b.nodes[i].first) return false;
    // The views themselves, not only their hashes.
    const size_t x = a.nodes[i].second, y = b.nodes[i].second;
    if (x < a.plan->views.size() && !(a.plan->views[x] == b.plan->views[y])) return false;
  }
  return true;
}

}  // namespace

Ranking rank_by_simulation(const std::vector<Finalist>& finalists, const MachineMapper& mapper) {
  // Each finalist is mapped, then simulated on its own (in parallel); the
  // choice is made after, in order, so it is the same whatever the threads.
  // Finalists that map to the same plan (the search often returns data
  // parallelism or the expert's plan) are simulated once (same_plan). At
  // thousands of devices one simulation is seconds.
  Ranking r;
  const size_t n = finalists.size();
  r.finalists.resize(n);
  std::vector<Strategy> mapped(n);
  std::vector<PlanKey> keys(n);
  tbb::parallel_for(size_t{0}, n, [&](size_t i) {
    mapped[i] = mapper.map(finalists[i].graph);
    keys[i] = plan_key(mapped[i]);
  });
  std::vector<size_t> same(n);  // the first finalist with the same plan
  for (size_t i = 0; i < n; ++i) {
    same[i] = i;
    for (size_t j = 0; j < i; ++j)
      if (same[j] == j && mapped[j].estimate.feasible == mapped[i].estimate.feasible && same_key(keys[j], keys[i])) {
        same[i] = j;
        break;
      }
  }
  std::vector<std::string> refused(n);  // the simulator's reason, where it refused one
  tbb::parallel_for(size_t{0}, n, [&](size_t i) {
    const Strategy& s = mapped[i];
    RankedFinalist f{finalists[i].label, s.estimate.feasible, s.estimate.time, 0};
    if (f.feasible && same[i] == i) {
      try {
        f.simulated = Simulator(s.graph, s.views, mapper.cost()).time();
      } catch (const TooManyTasks& e) {  // too large to run task by task: ranked by its estimate
        f.simulated = f.estimate;
        refused[i] = e.what();
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
  // (The chosen one is the first of its plan, so simulated or refused: a
  // later one ties with it.)
  if (r.chosen >= 0) {
    const auto c = static_cast<size_t>(r.chosen);
    r.chosen_plan = std::move(mapped[c]);
    r.priced_by = &mapper.cost(), r.recipe = mapper.cost().recipe();
    r.chosen_simulation = {r.finalists[c].simulated, std::move(refused[c])};
  }
  return r;
}

bool same_plan(const Strategy& a, const Strategy& b) { return same_key(plan_key(a), plan_key(b)); }

std::optional<SimulatedTime> simulated_time(const Ranking& r, const Strategy& s, const CostModel& cost) {
  if (r.priced_by != &cost || !(r.recipe == cost.recipe()) || !same_plan(r.chosen_plan, s)) return std::nullopt;
  return r.chosen_simulation;
}

}  // namespace pcgx::search
