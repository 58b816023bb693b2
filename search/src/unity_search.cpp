// Unity's search and the sequential search (see unity_search.h).
#include "pcgx/search/unity_search.h"

#include <algorithm>

#include "best_first.h"
#include "graph_splitting.h"
#include "pcgx/pcg/error.h"
#include "pcgx/search/baselines.h"

namespace pcgx::search {
SearchResult unity_search(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options) {
  SearchResult result;
  Context cx = make_context(rules, mapper, options, result);
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
  Graph best = std::move(c.graph);
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
  result.strategy = mapper.map(best);
  return result;
}

SearchResult sequential_search(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options) {
  SearchResult result;
  Context cx = make_context(rules, mapper, options, result);
  const RuleLibrary algebraic = rules.filtered(RuleFilter::kAlgebraic);
  const RuleLibrary parallel = rules.filtered(RuleFilter::kParallel);
  Candidate c = search_graph(model, algebraic, cx, false, false);
  Candidate d = search_graph(c.graph, parallel, cx, true, true);
  result.applied = std::move(c.applied);
  for (auto& x : d.applied) result.applied.push_back(std::move(x));
  result.strategy = mapper.map(d.graph);
  return result;
}

std::vector<std::vector<NodeId>> split_points(const Graph& g, const RuleLibrary& rules, int64_t min_ops) {
  std::vector<std::vector<NodeId>> out;
  for (const Piece& p : split(g, rules, min_ops)) out.push_back(p.nodes);
  return out;
}

}  // namespace pcgx::search
