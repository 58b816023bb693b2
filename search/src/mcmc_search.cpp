// FlexFlow's MCMC search over PCGs and machine views (see mcmc_search.h).
#include "pcgx/search/mcmc_search.h"
#include "pcgx/search/baselines.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <random>

#include "explorer.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/search/simulator.h"

namespace pcgx::search {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kBeta = 20.0;
constexpr int kRandomPlanSteps = 6;
constexpr int kRandomPlans = 2;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool runs_tasks(const Node& n) { return n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs); }

// One state of a chain: a PCG, its views and their simulation.
struct State {
  Graph graph;
  std::vector<std::string> applied;
  std::unique_ptr<Simulator> sim;
  std::vector<NodeId> movable;       // operators whose view a proposal may change
  std::vector<int64_t> tasks;        // per node: its task count (movable ones)
  double time = 0;
};

// Maps g by the DP and simulates it; nothing when the DP finds no
// feasible mapping.
std::unique_ptr<State> make_state(Graph g, std::vector<std::string> applied, const MachineMapper& mapper) {
  const Strategy s = mapper.map(g);
  if (!s.estimate.feasible) return nullptr;
  auto st = std::make_unique<State>();
  st->graph = std::move(g);
  st->applied = std::move(applied);
  st->sim = std::make_unique<Simulator>(st->graph, s.views, mapper.cost());
  st->time = st->sim->time();
  const Placement p(st->graph, s.views, mapper.cost().devices());
  st->tasks.assign(st->graph.size(), 0);
  for (const Node& n : st->graph.nodes())
    if (runs_tasks(n) && s.views[static_cast<size_t>(n.id)].placed()) {
      st->movable.push_back(n.id);
      st->tasks[static_cast<size_t>(n.id)] = p.tasks(n.id).tasks;
    }
  return st;
}

bool fits(const State& s, const MachineMapper& mapper) {
  const double cap = mapper.cost().machine().device.memory_capacity;
  for (double x : memory_per_device(s.graph, s.sim->views(), mapper.cost().devices(), mapper.cost().recipe(), mapper.cost().micro_batches_in_flight()))
    if (x > cap) return false;
  return true;
}

// A random view for `tasks` tasks on `devices`: a stride that fits, any start.
MachineView random_view(std::mt19937_64& rng, int64_t tasks, int64_t devices) {
  std::vector<int64_t> strides{1};  // one task: any stride is the same view
  for (int64_t s = 2; tasks > 1 && (tasks - 1) * s + 1 <= devices; s *= 2) strides.push_back(s);
  MachineView v;
  v.stride = strides[rng() % strides.size()];
  const int64_t span = (tasks - 1) * v.stride + 1;
  v.start = static_cast<int64_t>(rng() % static_cast<uint64_t>(devices - span + 1));
  return v;
}

bool metropolis(std::mt19937_64& rng, double now, double proposed) {
  if (proposed <= now) return true;
  if (!std::isfinite(proposed)) return false;
  const double p = std::exp(-kBeta * (proposed - now) / now);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p;
}

}  // namespace

McmcResult mcmc_search(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options) {
  McmcResult out;
  McmcStats& st = out.stats;
  std::mt19937_64 rng(options.seed);
  const int64_t D = mapper.cost().devices();
  const Explorer ex(rules, mapper, options.degrees.empty() ? candidate_degrees(D) : options.degrees);

  // Starting points.
  std::vector<std::pair<Graph, std::vector<std::string>>> starts;
  starts.emplace_back(best_data_parallel(model, mapper), std::vector<std::string>{});
  if (auto e = tuned_expert(model, mapper)) starts.emplace_back(std::move(*e), std::vector<std::string>{});
  for (int r = 0; r < kRandomPlans; ++r) {
    Graph g = model;
    std::vector<std::string> applied;
    for (int k = 0; k < kRandomPlanSteps; ++k)
      if (auto h = ex.random_neighbour(g, rng(), applied)) g = std::move(*h);
    starts.emplace_back(std::move(g), std::move(applied));
  }

  std::unique_ptr<State> best;
  double best_time = std::numeric_limits<double>::infinity();
  std::vector<MachineView> best_views;
  const int64_t share = std::max<int64_t>(1, options.proposals / static_cast<int64_t>(starts.size()));
  for (auto& [graph, applied] : starts) {
    std::unique_ptr<State> cur = make_state(std::move(graph), std::move(applied), mapper);
    if (!cur || !fits(*cur, mapper)) continue;
    ++st.chains;
    double chain_best = cur->time;
    auto keep_if_best = [&](const State& s) {
      if (s.time < best_time) {
        best_time = s.time, best_views = s.sim->views();
        best = std::make_unique<State>();
        best->graph = s.graph, best->applied = s.applied, best->time = s.time;
      }
    };
    keep_if_best(*cur);
    int64_t since = 0;
    for (int64_t k = 0; k < share; ++k) {
      // FlexFlow's stopping rule: half the proposals without improvement.
      if (k >= share / 4 && since > k / 2) break;
      ++st.proposals, ++since;
      // An operator whose tasks fill the machine has one 1-d view: a
      // substitution is the only move it has.
      const NodeId n = cur->movable.empty() ? -1 : cur->movable[rng() % cur->movable.size()];
      if (n >= 0 && cur->tasks[static_cast<size_t>(n)] < D && rng() % 4 != 0) {
        ++st.view_proposals;
        const MachineView old = cur->sim->views()[static_cast<size_t>(n)];
        const MachineView v = random_view(rng, cur->tasks[static_cast<size_t>(n)], D);
        if (v == old) continue;
        auto t0 = Clock::now();
        cur->sim->set_view(n, v);
        st.delta_seconds += seconds_since(t0), ++st.delta_simulations;
        const double t = cur->sim->time();
        if (metropolis(rng, cur->time, t) && fits(*cur, mapper)) {
          cur->time = t, ++st.accepted;
        } else {
          t0 = Clock::now();
          cur->sim->set_view(n, old);
          st.delta_seconds += seconds_since(t0), ++st.delta_simulations;
        }
      } else {
        ++st.rewrite_proposals;
        std::vector<std::string> applied2 = cur->applied;
        auto h = ex.random_neighbour(cur->graph, rng(), applied2);
        if (!h) continue;
        const auto t0 = Clock::now();
        std::unique_ptr<State> next = make_state(std::move(*h), std::move(applied2), mapper);
        st.full_seconds += seconds_since(t0), ++st.full_simulations;
        if (!next || !metropolis(rng, cur->time, next->time) || !fits(*next, mapper)) continue;
        cur = std::move(next), ++st.accepted;
      }
      if (cur->time < chain_best) chain_best = cur->time, since = 0;
      keep_if_best(*cur);
      if (options.progress && k % 64 == 0)
        options.progress({"mcmc chain " + std::to_string(st.chains), st.proposals, st.full_simulations + st.delta_simulations, best_time});
    }
  }
  if (!best) throw Error("mcmc: no starting point has a feasible mapping on " + std::to_string(D) + " devices");
  const Simulator final_sim(best->graph, best_views, mapper.cost());
  out.strategy = Strategy{best->graph, best_views, simulated_estimate(final_sim)};
  out.applied = best->applied;
  return out;
}

}  // namespace pcgx::search
