// Unity's search: best-first substitution selection, graph splitting, the
// baselines and the exhaustive search (see unity_search.h).
#include "pcgx/search/unity_search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <unordered_set>

#include "explorer.h"
#include "graph_splitting.h"
#include "pcgx/pcg/error.h"
#include "pcgx/search/autoddl_search.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/graph_hash.h"
#include "pcgx/search/mcmc_search.h"

namespace pcgx::search {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Context {
  const RuleLibrary& rules;
  const RuleLibrary* algebraic;  // for the algebraic seed; null: none
  const MachineMapper& mapper;
  const SearchOptions& options;
  std::vector<int64_t> degrees;
  SearchResult& result;
  std::string phase;
  double best_so_far = kInf;

  void report(int64_t evaluated) const {
    if (options.progress) options.progress({phase, result.explored, evaluated, best_so_far});
  }
};

// One best-first search from one seed. Candidates within alpha x the best
// found from this seed are explored cheapest first; those beyond it are
// deferred, and explored (cheapest first) only when none within it is left
// and budget remains: the way from a rewrite to its payoff often passes
// through a slower graph (x·(A + B) is parallelized in two steps, and the
// first one costs more than the alternatives). Returns the best found and
// the budget used.
std::pair<Candidate, int64_t> best_first_from(Candidate seed, const Explorer& ex, Context& cx, int64_t budget,
                                              std::unordered_set<uint64_t>& seen) {
  std::vector<Candidate> store;
  auto cmp = [&](size_t a, size_t b) { return store[a].cost > store[b].cost; };
  using Queue = std::priority_queue<size_t, std::vector<size_t>, decltype(cmp)>;
  Queue queue(cmp), deferred(cmp);
  Candidate best = seed;
  store.push_back(std::move(seed));
  queue.push(0);
  int64_t explored = 0;
  while (explored < budget) {
    size_t i;
    if (!queue.empty()) {
      i = queue.top();
      queue.pop();
      if (store[i].cost > cx.options.alpha * best.cost) {
        deferred.push(i);
        continue;
      }
    } else if (!deferred.empty()) {
      i = deferred.top();
      deferred.pop();
    } else {
      break;
    }
    ++explored, ++cx.result.explored;
    const double before = best.cost;
    for (Candidate& ch : ex.expand(store[i], seen)) {
      if (ch.cost < best.cost) best = ch;
      store.push_back(std::move(ch));
      (store.back().cost < cx.options.alpha * best.cost ? queue : deferred).push(store.size() - 1);
    }
    // The step that set a new best is tried again elsewhere in the graph
    // (Explorer::repeat); the result is one more candidate.
    if (best.cost < before && best.step.rule) {
      Candidate r = ex.repeat(best, seen);
      if (r.cost < best.cost) {
        best = r;
        store.push_back(std::move(r));
        queue.push(store.size() - 1);
      }
    }

    cx.best_so_far = std::min(cx.best_so_far, best.cost);
    cx.report(ex.evaluated);
  }
  return {best, explored};
}

}  // namespace

Graph best_data_parallel(const Graph& g, const MachineMapper& mapper) {
  const int64_t n = mapper.cost().devices();
  Graph whole = data_parallel(g, n);
  if (!has_unsampled(g)) return whole;
  Graph split = data_parallel(g, n, true);
  return mapper.time(split) < mapper.time(whole) ? split : whole;
}

std::optional<Graph> tuned_expert(const Graph& g, const MachineMapper& mapper) {
  const Machine& m = mapper.cost().machine();
  const int64_t n = mapper.cost().devices();
  std::optional<Graph> best;
  double best_time = kInf;
  for (int64_t t : expert_tensor_degrees(m, n, expert_family(g))) {
    auto e = expert(g, m, n, t);
    if (!e) return std::nullopt;
    const double time = mapper.time(*e);
    if (!best || time < best_time) best = std::move(e), best_time = time;
  }
  return best;
}

namespace {

struct Seed {
  Graph graph;
  std::vector<std::string> applied;  // rules that led to it from the model
};

Candidate best_first(std::vector<Seed> seeds, const Explorer& ex, Context& cx, int64_t budget) {
  std::unordered_set<uint64_t> seen;
  std::vector<Candidate> starts;
  for (Seed& s : seeds) {
    Candidate c = ex.make(std::move(s.graph), std::move(s.applied));
    if (seen.insert(c.hash).second) starts.push_back(std::move(c));
  }
  cx.best_so_far = kInf;
  Candidate best;
  best.cost = kInf;
  int64_t left = budget;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t share = std::max<int64_t>(1, left / static_cast<int64_t>(starts.size() - k));
    auto [c, used] = best_first_from(std::move(starts[k]), ex, cx, share, seen);
    left -= used;
    if (best.graph.size() == 0 || c.cost < best.cost) best = std::move(c);
  }
  return best;
}

// The graph and, for `unity`, the baselines built from it (a baseline that
// cannot be built on a piece, e.g. for its boundary layout, is left out).
// With `algebraic`, also the best PCG the algebraic rules alone reach
// (the first phase of `sequential`) and its data-parallel form: the path
// from the model to a rewritten and then parallelized graph often passes
// through candidates slower than a parallelized original, which alpha
// pruning drops (x·A + x·B = x·(A + B) before splitting A + B by columns).
std::vector<Seed> seeds_for(const Graph& g, const Explorer& ex, Context& cx, bool with_baselines, bool algebraic = false) {
  std::vector<Seed> seeds{{g, {}}};
  if (!with_baselines) return seeds;
  auto add_baselines = [&](const Graph& from, const std::vector<std::string>& applied) {
    try {
      seeds.push_back({ex.simplify(best_data_parallel(from, cx.mapper)), applied});
    } catch (const Error&) {
    }
    try {
      if (auto e = tuned_expert(from, cx.mapper)) seeds.push_back({ex.simplify(*e), applied});
    } catch (const Error&) {
    }
    // Data parallelism over fewer devices than the machine's: the mapping
    // DP then runs parallel branches side by side, one group of devices
    // each (branch parallelism across groups, data parallelism inside).
    // The fastest such degree is the seed.
    std::optional<Graph> grouped;
    double grouped_time = kInf;
    for (int64_t d : cx.degrees) {
      if (d >= cx.mapper.cost().devices()) continue;
      try {
        Graph dp = data_parallel(from, d);
        if (const double t = cx.mapper.time(dp); t < grouped_time) grouped = std::move(dp), grouped_time = t;
      } catch (const Error&) {
      }
    }
    if (grouped) seeds.push_back({ex.simplify(std::move(*grouped)), applied});
  };
  add_baselines(g, {});
  if (algebraic && cx.algebraic && cx.algebraic->size() > 0) {
    const Explorer ax(*cx.algebraic, cx.mapper, cx.degrees);
    Candidate a = best_first({{g, {}}}, ax, cx, cx.options.budget);
    ex.evaluated += ax.evaluated.load();
    if (!a.applied.empty()) {
      seeds.push_back({a.graph, a.applied});
      add_baselines(a.graph, a.applied);
    }
  }
  return seeds;
}

// Searches `g` (whole, or piece by piece when large) and returns the best PCG.
Candidate search_graph(const Graph& g, const RuleLibrary& rules, Context& cx, bool with_baselines, bool layouts) {
  const Explorer ex(rules, cx.mapper, cx.degrees);
  const auto pieces = split(g, rules, cx.options.split_min_ops);
  cx.result.pieces = static_cast<int64_t>(pieces.size());
  if (pieces.size() == 1) {
    cx.phase = "search";
    Candidate c = best_first(seeds_for(g, ex, cx, with_baselines, true), ex, cx, cx.options.budget);
    cx.result.evaluated = ex.evaluated;
    return c;
  }
  // Boundary layouts: unpartitioned and the sample dimension split by each degree.
  // To bound the work, the layouts are unpartitioned, split by the whole
  // machine, and by one eighth of it.
  std::vector<int64_t> degrees{1};
  const int64_t devs = cx.mapper.cost().devices();
  if (layouts && devs > 1) {
    if (devs % 8 == 0 && devs / 8 > 1) degrees.push_back(devs / 8);
    degrees.push_back(devs);
  }
  const size_t L = degrees.size();
  std::map<std::pair<uint64_t, int64_t>, Candidate> solved;  // (piece hash, degree) -> best
  std::vector<std::vector<const Candidate*>> best(pieces.size(), std::vector<const Candidate*>(L, nullptr));
  std::vector<std::vector<PieceGraph>> graphs(pieces.size());
  for (size_t p = 0; p < pieces.size(); ++p) {
    for (size_t l = 0; l < L; ++l) {
      const int64_t d = degrees[l];
      const Piece& pc = pieces[p];
      const TensorRef boundary = pc.in.node >= 0 ? pc.in : pc.out;
      if (d > 1 && g.shape(boundary).dims.empty()) break;
      const int64_t din = pc.in.node >= 0 ? d : 1, dout = pc.out.node >= 0 ? d : 1;
      if ((pc.in.node >= 0 && g.shape(pc.in).dims.at(0).size % d) || (pc.out.node >= 0 && g.shape(pc.out).dims.at(0).size % d)) {
        graphs[p].push_back({});
        continue;
      }
      graphs[p].push_back(piece_graph(g, pc, din, dout));
      const uint64_t h = graph_hash(graphs[p].back().graph);
      auto it = solved.find({h, d});
      if (it == solved.end()) {
        cx.phase = "piece " + std::to_string(p + 1) + "/" + std::to_string(pieces.size()) + " layout " + std::to_string(d);
        std::vector<Seed> seeds = seeds_for(graphs[p].back().graph, ex, cx, with_baselines, true);
        it = solved.emplace(std::make_pair(h, d), best_first(std::move(seeds), ex, cx, cx.options.budget)).first;
      }
      best[p][l] = &it->second;
    }
  }
  cx.result.evaluated = ex.evaluated;
  // Chain DP over layouts: piece costs plus the layout change between pieces.
  std::vector<std::vector<double>> dp(pieces.size(), std::vector<double>(L, kInf));
  std::vector<std::vector<size_t>> from(pieces.size(), std::vector<size_t>(L, 0));
  auto piece_cost = [&](size_t p, size_t l) { return l < best[p].size() && best[p][l] ? best[p][l]->cost : kInf; };
  auto change = [&](size_t p, size_t a, size_t b) {
    if (a == b) return 0.0;
    const TensorRef bt = pieces[p].out;
    const ParallelTensorShape s = g.shape(bt);
    // The boundary re-laid from one split to the other over the same first
    // devices: an all-to-all, forward and backward (each member sends what
    // the others need of its share).
    const CostModel& cm = cx.mapper.cost();
    const int64_t k = std::max(degrees[a], degrees[b]);
    const double share = static_cast<double>(s.total_bytes()) / static_cast<double>(std::min(degrees[a], degrees[b]));
    return 2 * collective_time(cm.machine(), Collective::kAllToAll, strided_group(cm.machine(), 0, 1, k), share);
  };
  for (size_t l = 0; l < L; ++l) dp[0][l] = piece_cost(0, l);
  for (size_t p = 1; p < pieces.size(); ++p)
    for (size_t l = 0; l < L; ++l)
      for (size_t q = 0; q < L; ++q) {
        const double v = dp[p - 1][q] + change(p - 1, q, l) + piece_cost(p, l);
        if (v < dp[p][l]) dp[p][l] = v, from[p][l] = q;
      }
  size_t l = static_cast<size_t>(std::min_element(dp.back().begin(), dp.back().end()) - dp.back().begin());
  if (dp.back()[l] == kInf) throw Error("search: no feasible layout for some piece of the model");
  std::vector<size_t> chosen(pieces.size());
  for (size_t p = pieces.size(); p-- > 0;) chosen[p] = l, l = from[p][l];

  // Join the pieces' best graphs.
  std::vector<JoinPart> parts;
  std::vector<std::string> applied;
  for (size_t p = 0; p < pieces.size(); ++p) {
    const Candidate& c = *best[p][chosen[p]];
    for (const auto& a : c.applied) applied.push_back(a);
    parts.push_back({&c.graph, &graphs[p][chosen[p]]});
  }
  Graph joined = join_pieces(g.name(), parts);
  Candidate out = ex.make(std::move(joined), std::move(applied));
  // Whole-model baselines are in the space too (the split may not reach them).
  if (with_baselines)
    for (Seed& s : seeds_for(g, ex, cx, true)) {
      Candidate c = ex.make(std::move(s.graph), std::move(s.applied));
      if (c.cost < out.cost) out = std::move(c);
    }
  cx.result.evaluated = ex.evaluated;
  return out;
}

Candidate exhaustive(const Graph& g, const RuleLibrary& rules, Context& cx) {
  int64_t sources = 0;
  for (const Node& n : g.nodes()) sources += is_source(n);
  const int64_t bound = cx.options.exhaustive_max_nodes > 0 ? cx.options.exhaustive_max_nodes : static_cast<int64_t>(g.size()) + sources + 1;
  const Explorer ex(rules, cx.mapper, cx.degrees, static_cast<size_t>(bound));
  std::unordered_set<uint64_t> seen;
  std::vector<Candidate> frontier;
  for (Seed& s : seeds_for(g, ex, cx, true)) {
    Candidate c = ex.make(std::move(s.graph), std::move(s.applied));
    if (seen.insert(c.hash).second) frontier.push_back(std::move(c));
  }
  Candidate best = frontier.front();
  for (const Candidate& c : frontier)
    if (c.cost < best.cost) best = c;
  while (!frontier.empty()) {
    std::vector<Candidate> next;
    for (const Candidate& c : frontier) {
      ++cx.result.explored;
      for (Candidate& ch : ex.expand(c, seen)) {
        if (ch.cost < best.cost) best = ch;
        next.push_back(std::move(ch));
      }
      if (static_cast<int64_t>(seen.size()) > cx.options.exhaustive_limit)
        throw Error("--search exhaustive: more than " + std::to_string(cx.options.exhaustive_limit) +
                    " candidate PCGs of at most " + std::to_string(bound) +
                    " nodes; the model is too large for an exhaustive search (use --search unity, or lower --max-nodes)");
    }
    frontier = std::move(next);
    cx.best_so_far = best.cost;
    cx.report(ex.evaluated);
  }
  cx.result.evaluated = ex.evaluated;
  return best;
}

}  // namespace

std::vector<int64_t> candidate_degrees(int64_t devices) {
  std::vector<int64_t> out;
  for (int64_t d = 2; d <= devices; d *= 2)
    if (devices % d == 0) out.push_back(d);
  if (devices > 1 && (out.empty() || out.back() != devices)) out.push_back(devices);
  return out;
}

std::vector<std::vector<NodeId>> split_points(const Graph& g, const RuleLibrary& rules, int64_t min_ops) {
  std::vector<std::vector<NodeId>> out;
  for (const Piece& p : split(g, rules, min_ops)) out.push_back(p.nodes);
  return out;
}

SearchResult optimize(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options) {
  const auto t0 = Clock::now();
  SearchResult result;
  Context cx{rules, nullptr, mapper, options, options.degrees.empty() ? candidate_degrees(mapper.cost().devices()) : options.degrees, result, "", kInf};
  Graph best;
  const std::string& a = options.algorithm;
  if (a == "data-parallel") {
    best = best_data_parallel(model, mapper);
  } else if (a == "expert") {
    auto e = tuned_expert(model, mapper);
    if (!e) throw Error("--search expert: no expert strategy for '" + model.name() + "' (it covers transformers, recommendation models and plain MLPs)");
    best = std::move(*e);
  } else if (a == "unity") {
    // Start the joint search from the best the algebraic rules alone reach on
    // the whole model: rewrites across piece boundaries (which the pieces'
    // own algebraic seeds cannot see) are then in place, and the joint
    // search can still undo any of them. Without this, `sequential` (which
    // does exactly that and then parallelizes) beat unity on CANDLE-Uno.
    // When the unpartitioned model does not fit a device (Inception-v3's
    // batch at 64 GPUs), no algebraic candidate is feasible, so there is
    // nothing to compare: the joint search starts from the model.
    const RuleLibrary algebraic = rules.filtered(RuleFilter::kAlgebraic);
    cx.algebraic = &algebraic;
    Candidate pre;
    try {
      pre = search_graph(model, algebraic, cx, false, false);
    } catch (const Error&) {
      pre.cost = kInf;
    }
    // Per-piece algebraic seeds repeat what the whole-model phase did, cost
    // a search per piece and layout, and thin every seed's share of the
    // budget (with them unity lost to `sequential` on CANDLE-Uno at 64 and
    // 192 GPUs); they stay only when that phase found nothing feasible.
    if (pre.cost == kInf) pre = Candidate{model, kInf, {}, 0};
    else cx.algebraic = nullptr;
    Candidate c = search_graph(pre.graph, rules, cx, true, true);
    if (!pre.applied.empty()) {  // the model's own baselines stay candidates
      const Explorer ex(rules, mapper, cx.degrees);
      for (Seed& s : seeds_for(model, ex, cx, true)) {
        Candidate m = ex.make(std::move(s.graph), std::move(s.applied));
        if (m.cost < c.cost) c = std::move(m), pre.applied.clear();
      }
    }
    best = std::move(c.graph);
    result.applied = std::move(pre.applied);
    for (auto& x : c.applied) result.applied.push_back(std::move(x));
    if (options.rank == SearchOptions::Rank::kSimulation) {
      std::vector<Finalist> finalists{{"search", std::move(best), std::move(result.applied)}};
      try {
        finalists.push_back({"data parallel", best_data_parallel(model, mapper), {}});
      } catch (const Error&) {
      }
      try {
        if (auto e = tuned_expert(model, mapper)) finalists.push_back({"expert", std::move(*e), {}});
      } catch (const Error&) {
      }
      result.ranking = rank_by_simulation(finalists, mapper);
      Finalist& f = finalists[static_cast<size_t>(std::max(result.ranking.chosen, 0))];
      best = std::move(f.graph), result.applied = std::move(f.applied);
    }
  } else if (a == "sequential") {
    const RuleLibrary algebraic = rules.filtered(RuleFilter::kAlgebraic);
    const RuleLibrary parallel = rules.filtered(RuleFilter::kParallel);
    Candidate c = search_graph(model, algebraic, cx, false, false);
    Candidate d = search_graph(c.graph, parallel, cx, true, true);
    best = std::move(d.graph);
    result.applied = std::move(c.applied);
    for (auto& x : d.applied) result.applied.push_back(std::move(x));
  } else if (a == "exhaustive") {
    Candidate c = exhaustive(model, rules, cx);
    best = std::move(c.graph), result.applied = std::move(c.applied);
  } else if (a == "mcmc") {
    // Its views are its own (chosen by proposals, costed by simulation).
    McmcResult r = mcmc_search(model, rules, mapper, options);
    result.strategy = std::move(r.strategy), result.applied = std::move(r.applied);
    result.explored = r.stats.proposals, result.evaluated = r.stats.full_simulations + r.stats.delta_simulations;
    result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return result;
  } else if (a == "autoddl") {
    AutoddlResult r = autoddl_search(model, mapper, options);
    result.strategy = std::move(r.strategy);
    result.explored = r.stats.rounds, result.evaluated = r.stats.evaluations;
    result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return result;
  } else {
    throw Error("--search: unknown algorithm '" + a + "' (unity, data-parallel, expert, sequential, exhaustive, mcmc, autoddl)");
  }
  result.strategy = mapper.map(best);
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return result;
}

}  // namespace pcgx::search
