#pragma once
// Unity's joint optimization (Unity, Sections 4-6; DESIGN.md "Search"):
// substitution selection by best-first search over PCGs, each candidate
// costed by the machine-mapping DP (machine_mapping.h).
//
// `unity` first runs the algebraic rules alone on the whole model (as
// `sequential` does) and starts the joint search below from the result, so
// rewrites that span graph-splitting pieces are not lost; the model's own
// baselines remain candidates.
//
// Best-first search. Start from each seed PCG in turn (the model, and for
// `unity` also the data-parallel and expert baselines, which lie in its
// search space anyway), each with a share of the budget. Repeatedly take the cheapest unexplored candidate,
// apply every rule of the library at every match (a degree-generic rule
// whose source fixes no degree is tried with every candidate degree),
// also apply two-rule steps (an introducer such as x => Combine(Repartition
// x) at one operator input, then a rule at that operator: the shipped rules
// state parallelization relative to an already partitioned input),
// simplify (rule_library.h), and keep each new PCG whose predicted time is
// below alpha x the best so far. Stops after `budget` candidates have been
// explored or when none is left. When an exploration sets a new best, the
// step that made it (one rule at one match, or an introducer and a rule at
// one operator input) is applied again at its best place, round after
// round, while the PCG gets faster, and the result joins the candidates:
// repeated layers need the same rewrite once each, and one exploration per
// layer would spend the budget on the first few (a 16-layer MLP reached
// data parallelism's time at budget 12 without it, 1.90x faster with it).
// These rounds are costed but not counted against the budget.
//
// Graph splitting. A model with more than 2k compute operators is cut into
// sequential pieces of at least k, at tensors every later operator reaches
// only through them, preferring cuts that block the fewest rule matches.
// Each piece is searched once per boundary layout (unpartitioned, or the
// sample dimension split by all devices or by one eighth of them; replica
// degree 1), with
// the same layout on both sides; a chain DP then picks one layout per
// piece, paying for the parallel operators that change layout between
// pieces. Identical pieces (the layers of a transformer) are searched once.
//
// What it preserves: every candidate computes the model's outputs (each
// step is a verified rule or a layout change that is an identity).
#include <chrono>
#include <cstdint>
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include "pcgx/search/final_ranking.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/rule_library.h"

namespace pcgx::search {

struct SearchProgress {
  std::string phase;      // "piece 3/12", "search", ...
  int64_t explored = 0;   // candidates expanded so far
  int64_t evaluated = 0;  // candidates costed so far
  double best = 0;        // best predicted time so far (seconds)
};

struct SearchOptions {
  std::string algorithm = "unity";  // unity, data-parallel, expert, sequential, exhaustive, mcmc, autoddl
  double alpha = 1.05;
  int64_t budget = 12;              // candidates explored per search (per piece and layout), shared by the seeds
  int64_t split_min_ops = 10;       // k of graph splitting
  std::vector<int64_t> degrees;     // empty: powers of two below the device count, and the count
  int64_t exhaustive_limit = 5000;  // candidates the exhaustive search may visit
  int64_t proposals = 2000;         // mcmc: proposals in all (mcmc_search.h)
  int64_t evaluations = 3000;       // autoddl: PCGs costed in all, shared by its starts (autoddl_search.h)
  int64_t restarts = 4;             // autoddl: random starting points beside data parallelism and one task each
  uint64_t seed = 1;                // mcmc: random seed
  int64_t exhaustive_max_nodes = 0; // its space: PCGs of at most this many nodes (0: see optimize)
  // unity: how the result is chosen among the search's best and the
  // model's baselines (final_ranking.h): by simulation, or by the DP's
  // estimate alone (the search itself always costs candidates by the DP).
  enum class Rank : uint8_t { kSimulation, kEstimate };
  Rank rank = Rank::kSimulation;
  std::function<void(const SearchProgress&)> progress;
};

struct SearchResult {
  Strategy strategy;
  std::vector<std::string> applied;  // rule ids, in order (pieces concatenated)
  int64_t explored = 0;
  int64_t evaluated = 0;
  int64_t pieces = 1;
  double seconds = 0;
  Ranking ranking;  // unity with Rank::kSimulation: the finalists and the chosen one
};

// The data-parallel baseline (baselines.h), with operators that cannot
// split their samples run whole or split otherwise, whichever `mapper`
// predicts faster.
Graph best_data_parallel(const Graph& g, const MachineMapper& mapper);

// The expert strategy (baselines.h) with its fastest tensor-parallel
// degree; nothing for a model of no family it covers.
std::optional<Graph> tuned_expert(const Graph& g, const MachineMapper& mapper);

// The degrees tried for a free degree on `devices` devices.
std::vector<int64_t> candidate_degrees(int64_t devices);

// Runs options.algorithm on `model` (unpartitioned). Throws pcgx::Error
// for an unknown algorithm, an exhaustive search over its limit, or an
// expert strategy for a model of no family it covers.
SearchResult optimize(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper,
                      const SearchOptions& options);

// The exhaustive search's space: every PCG reachable from the model and
// the baselines by steps of the unity search (one rule, or an introducer
// and a rule, then simplification) that has at most
// options.exhaustive_max_nodes nodes, by default the model's nodes plus
// one per input or weight plus one (room for the data-parallel strategy:
// a parallel operator on every source and a Reduce of the loss). Without
// a bound the space is infinite (introducers grow a graph without end),
// and each extra node multiplies it: for a 2-layer MLP on 2 devices the
// default 12 holds 117 PCGs, 13 about 5,000. It visits the space
// breadth-first and throws if it holds more than options.exhaustive_limit
// PCGs.

// The pieces graph splitting cuts `g` into (node ids of g per piece, in
// order), for tests and reports.
std::vector<std::vector<NodeId>> split_points(const Graph& g, const RuleLibrary& rules, int64_t min_ops);

}  // namespace pcgx::search
