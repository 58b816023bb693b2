// Unity's search and the sequential search (see unity_search.h).
#include "pcgx/search/unity_search.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "best_first.h"
#include "graph_splitting.h"
#include "pcgx/pcg/error.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/user_plan.h"

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
    // (Seconds at thousands of devices, with nothing else to show.)
    if (options.progress)
      options.progress({"simulating " + std::to_string(finalists.size()) + " finalists to rank them", result.explored, result.evaluated, c.cost, true});
    result.ranking = rank_by_simulation(finalists, mapper);
    Finalist& f = finalists[static_cast<size_t>(std::max(result.ranking.chosen, 0))];
    best = std::move(f.graph), result.applied = std::move(f.applied);
  }
  result.strategy = mapper.map(best);
  return result;
}

namespace {

// Each stated operator of `seed` is in `found` with the same operator and
// output layouts.
void check_stated(const Graph& seed, const Graph& found, const std::set<std::string>& stated, const std::string& source) {
  std::map<std::string, const Node*> by_name;
  for (const Node& n : found.nodes())
    if (n.op->op_class == OpClass::kCompute && stated.count(n.name)) by_name[n.name] = &n;
  for (const Node& n : seed.nodes()) {
    if (n.op->op_class != OpClass::kCompute || !stated.count(n.name)) continue;
    const auto it = by_name.find(n.name);
    if (it == by_name.end() || it->second->op != n.op || it->second->outputs != n.outputs)
      throw Error(source + ": the search of the unstated operators changed " + describe(n) + ", which the plan states");
  }
}

}  // namespace

SearchResult plan_search(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options) {
  const UserPlan& plan = *options.plan;
  const int64_t devices = mapper.cost().devices();
  SearchResult result;
  Context cx = make_context(rules, mapper, options, result);
  cx.phase = "the operators " + plan.source + " does not state";
  const std::set<std::string> stated = stated_operators(model, plan, devices);
  const Explorer ex(rules, mapper, cx.degrees, 0, &stated);
  // (On a pipeline stage's part of the model a rule may select nothing.)
  Graph lowered = lower_plan(model, plan, devices, false);
  std::vector<Seed> seeds{{lowered, {}}};
  UserPlan split = plan;  // the rest data parallel: a first rule the plan's own override
  split.rules.insert(split.rules.begin(), PlanRule{PlanSelector{}, NodePlan{{kSamplesKind, devices}}});
  try {
    if (devices > 1) seeds.push_back({lower_plan(model, split, devices, false), {}});
  } catch (const Error&) {
    // The samples do not split that way (a micro-batch may hold fewer than
    // there are devices): the rest spread over every device as far as the
    // sizes allow, so that an interlaced pipeline chunk, whose operators
    // must each run on several stages' devices, starts from one that does.
    const Graph g = plan_graph(model, plan);
    std::vector<int> rule_of;
    const std::vector<NodePlan> stated_parts = plan_partitions(g, plan, devices, &rule_of, false);
    seeds.push_back({parallelize(g, [&](const Graph& gr, const Node& n) {
                       const auto k = static_cast<size_t>(n.id);
                       return rule_of[k] >= 0 ? stated_parts[k] : spread_plan(gr, n, devices);
                     }),
                     {}});
  }
  Candidate c = best_first(std::move(seeds), ex, cx, options.budget);
  result.evaluated = ex.evaluated;
  check_stated(lowered, c.graph, stated, plan.source);
  apply_plan_rewrites(model, plan, &result.applied);  // the plan's first, as a strategy records them
  for (auto& x : c.applied) result.applied.push_back(std::move(x));
  result.strategy = mapper.map(c.graph);
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
