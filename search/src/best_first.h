#pragma once
// The best-first search and its seeds (internal; see unity_search.h), shared
// by the unity, sequential and exhaustive searches.
#include <limits>
#include <string>
#include <vector>

#include "explorer.h"
#include "pcgx/search/search.h"

namespace pcgx::search {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// One search's state: its rules, options, degrees, result so far and progress.
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

// A context for one search of `options` (its degrees: options.degrees, or
// candidate_degrees of the mapper's devices), reporting into `result`.
inline Context make_context(const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options, SearchResult& result) {
  return Context{rules, nullptr, mapper, options, options.degrees.empty() ? candidate_degrees(mapper.cost().devices()) : options.degrees,
                 result, "", kInf};
}

struct Seed {
  Graph graph;
  std::vector<std::string> applied;  // rules that led to it from the model
};

// Best-first search from every seed in turn, each with a share of `budget`
// (candidates explored); returns the best found, and in `best_start` (when
// given) the cheapest seed.
Candidate best_first(std::vector<Seed> seeds, const Explorer& ex, Context& cx, int64_t budget, Candidate* best_start = nullptr);

// The graph and, with `with_baselines`, the baselines built from it (a
// baseline that cannot be built on a piece, e.g. for its boundary layout, is
// left out). With `algebraic`, also the best PCG the algebraic rules alone
// reach (the first phase of `sequential`) and its data-parallel form: the
// path from the model to a rewritten and then parallelized graph often
// passes through candidates slower than a parallelized original, which
// alpha pruning drops (x·A + x·B = x·(A + B) before splitting A + B by
// columns).
std::vector<Seed> seeds_for(const Graph& g, const Explorer& ex, Context& cx, bool with_baselines, bool algebraic = false);

// Searches `g` (whole, or piece by piece when large: graph splitting with a
// chain DP over boundary layouts when `layouts`) and returns the best PCG.
Candidate search_graph(const Graph& g, const RuleLibrary& rules, Context& cx, bool with_baselines, bool layouts);

}  // namespace pcgx::search
