// AutoDDL's coordinate descent over SBP signatures (see autoddl_search.h).
#include "pcgx/search/autoddl_search.h"

#include <tbb/parallel_for.h>

#include <limits>
#include <numeric>
#include <random>

#include "pcgx/pcg/error.h"
#include "pcgx/search/baselines.h"

namespace pcgx::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Per compute node: its signatures, [0] one task; and which of them splits
// its samples (-1: none).
struct Signatures {
  std::vector<std::vector<NodePlan>> of;  // per node of the model
  std::vector<int> sample;
};

Signatures signatures(const Graph& g, int64_t devices) {
  Signatures s;
  s.of.resize(g.size());
  s.sample.assign(g.size(), -1);
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute) continue;
    auto& out = s.of[static_cast<size_t>(n.id)];
    out.push_back({});
    if (!n.op->kinds) continue;
    const auto types = g.input_types(n);
    const auto kinds = n.op->kinds(n.attrs, types);
    const ParallelKind* sample = sample_kind(kinds);
    for (const ParallelKind& k : kinds) {
      // The largest degree dividing the devices and every split dimension.
      int64_t degree = devices;
      for (size_t i = 0; i < k.inputs.size() && i < types.size(); ++i)
        if (k.inputs[i] >= 0 && static_cast<size_t>(k.inputs[i]) < types[i].shape.size())
          degree = std::gcd(degree, types[i].shape[static_cast<size_t>(k.inputs[i])]);
      if (k.must_divide > 0) degree = std::gcd(degree, k.must_divide);
      if (degree <= 1) continue;
      if (&k == sample) s.sample[static_cast<size_t>(n.id)] = static_cast<int>(out.size());
      out.push_back({{k.name, degree}});
    }
  }
  return s;
}

// The PCG of one signature per node (`choice`: an index into each node's).
Graph assign(const Graph& g, const Signatures& sig, const std::vector<int>& choice) {
  return parallelize(g, [&](const Graph&, const Node& n) {
    const auto& options = sig.of[static_cast<size_t>(n.id)];
    return options.empty() ? NodePlan{} : options[static_cast<size_t>(choice[static_cast<size_t>(n.id)])];
  });
}

// One descent from `choice` (an index into each node's signatures), to a
// fixed point or until this start's budget runs out.
struct Descent {
  const Graph& g;
  const Signatures& sig;
  const MachineMapper& mapper;
  int64_t& budget;  // evaluations left to this start
  int64_t rounds = 0, evaluations = 0;

  double cost(const std::vector<int>& choice) {
    --budget, ++evaluations;
    try {
      return mapper.time(assign(g, sig, choice));
    } catch (const Error&) {
      return kInf;
    }
  }

  double run(std::vector<int>& choice) {
    double best = cost(choice);
    for (bool changed = true; changed && budget > 0;) {
      changed = false;
      ++rounds;
      for (const Node& n : g.nodes()) {
        const auto id = static_cast<size_t>(n.id);
        const int options = static_cast<int>(sig.of[id].size());
        int current = choice[id];
        for (int c = 0; c < options && budget > 0; ++c) {
          if (c == current) continue;
          choice[id] = c;
          if (const double t = cost(choice); t < best * (1 - 1e-12)) best = t, current = c, changed = true;
        }
        choice[id] = current;
      }
    }
    return best;
  }
};

}  // namespace

AutoddlResult autoddl_search(const Graph& model, const MachineMapper& mapper, const SearchOptions& options) {
  const Graph g = synchronized_batch_norm(model);
  const int64_t devices = mapper.cost().devices();
  const Signatures sig = signatures(g, devices);

  // Starting points: data parallelism, one task everywhere, random ones.
  std::vector<std::vector<int>> starts;
  std::vector<int> dp(g.size(), 0), one(g.size(), 0);
  for (size_t i = 0; i < g.size(); ++i) dp[i] = std::max(sig.sample[i], 0);
  starts.push_back(dp);
  starts.push_back(one);
  std::mt19937_64 rng(options.seed);
  for (int64_t r = 0; r < options.restarts; ++r) {
    std::vector<int> x(g.size(), 0);
    for (size_t i = 0; i < g.size(); ++i)
      if (!sig.of[i].empty()) x[i] = static_cast<int>(std::uniform_int_distribution<size_t>(0, sig.of[i].size() - 1)(rng));
    starts.push_back(std::move(x));
  }

  // Each start its share of the budget: the result does not depend on
  // which thread ran first.
  const int64_t share = std::max<int64_t>(1, options.evaluations / static_cast<int64_t>(starts.size()));
  std::vector<double> best(starts.size(), kInf);
  std::vector<int64_t> rounds(starts.size(), 0), evaluations(starts.size(), 0);
  tbb::parallel_for(size_t{0}, starts.size(), [&](size_t s) {
    int64_t budget = share;
    Descent d{g, sig, mapper, budget};
    best[s] = d.run(starts[s]);
    rounds[s] = d.rounds, evaluations[s] = d.evaluations;
  });

  size_t winner = 0;
  for (size_t s = 1; s < starts.size(); ++s)
    if (best[s] < best[winner]) winner = s;
  AutoddlResult r;
  r.strategy = mapper.map(assign(g, sig, starts[winner]));
  r.stats.starts = static_cast<int64_t>(starts.size());
  r.stats.rounds = std::accumulate(rounds.begin(), rounds.end(), int64_t{0});
  r.stats.evaluations = std::accumulate(evaluations.begin(), evaluations.end(), int64_t{0});
  return r;
}

}  // namespace pcgx::search
