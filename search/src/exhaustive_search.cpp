// The exhaustive search (see unity_search.h): every PCG of a bounded size
// reachable by the unity search's steps, visited breadth-first.
#include <unordered_set>

#include "best_first.h"
#include "graph_splitting.h"
#include "pcgx/pcg/error.h"
#include "pcgx/search/unity_search.h"

namespace pcgx::search {
namespace {

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
        throw FieldError("SearchOptions.exhaustive_limit",
                         "more than " + std::to_string(cx.options.exhaustive_limit) + " candidate PCGs of at most " + std::to_string(bound) +
                             " nodes; the model is too large for an exhaustive search (search with unity, or lower "
                             "SearchOptions.exhaustive_max_nodes)");
    }
    frontier = std::move(next);
    cx.best_so_far = best.cost;
    cx.report(ex.evaluated);
  }
  cx.result.evaluated = ex.evaluated;
  return best;
}

}  // namespace

SearchResult exhaustive_search(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options) {
  SearchResult result;
  Context cx = make_context(rules, mapper, options, result);
  Candidate c = exhaustive(model, rules, cx);
  result.applied = std::move(c.applied);
  result.strategy = mapper.map(c.graph);
  return result;
}

}  // namespace pcgx::search
