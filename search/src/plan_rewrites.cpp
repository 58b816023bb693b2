// The algebraic rewrites a plan states (see user_plan.h's PlanRewrite).
#include <algorithm>
#include <map>

#include "pcgx/pcg/error.h"
#include "pcgx/search/applied_rule.h"
#include "pcgx/search/common_subexpressions.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/substitution.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::search {
namespace {

std::map<std::string, const Rule*> by_id(const RuleLibrary& rules) {
  std::map<std::string, const Rule*> out;
  for (const Rule& r : rules.rules()) out.emplace(r.id, &r);
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

void resolve_plan_rewrites(UserPlan& plan, const RuleLibrary& algebraic) {
  if (plan.rewrites.empty()) return;
  const auto rules = by_id(algebraic);
  for (size_t i = 0; i < plan.rewrites.size(); ++i) {
    PlanRewrite& w = plan.rewrites[i];
    const auto it = rules.find(library_id(w.rule));
    if (it == rules.end())
      throw FileError(plan.source, "rewrites[" + std::to_string(i) + "].rule",
                      "'" + w.rule + "' is no algebraic rule of the rulesets searched (a rule with a parallel operator is the plan's partitions' to state)");
    w.resolved = std::make_shared<const Rule>(*it->second);
  }
}

Graph apply_plan_rewrites(const Graph& model, const UserPlan& plan, std::vector<std::string>* applied) {
  Graph g = model;
  for (size_t i = 0; i < plan.rewrites.size(); ++i) {
    const PlanRewrite& w = plan.rewrites[i];
    const std::string where = plan.source + ": rewrites[" + std::to_string(i) + "] (" + w.rule + " at " + joined(w.at) + ")";
    if (!w.resolved) throw Error(where + ": not resolved against a ruleset");
    // Another pipeline stage's (a stage is lowered on its part of the model).
    if (std::none_of(g.nodes().begin(), g.nodes().end(), [&](const Node& n) { return std::ranges::find(w.at, n.name) != w.at.end(); }))
      continue;
    std::optional<Graph> next;
    for (const Match& m : find_matches(g, *w.resolved)) {
      if (matched_names(g, m) != w.at) continue;
      next = apply_match(g, m);
      if (next) break;
    }
    if (!next) throw Error(where + ": the rule does not apply at those operators of '" + model.name() + "'");
    // As the search does after each rewrite (explorer.h's simplify): an
    // operator computed twice from the same inputs, once (for rewrites of
    // algebraic rules, all a plan states, its simplifiers never apply).
    if (auto merged = merge_common_subexpressions(*next)) next = std::move(merged);
    g = std::move(*next);
    if (applied) applied->push_back(w.rule + " at " + joined(w.at));
  }
  return g;
}

std::vector<PlanRewrite> plan_rewrites_of(std::span<const std::string> applied, const RuleLibrary& algebraic, size_t* left_out) {
  const auto rules = by_id(algebraic);
  std::vector<PlanRewrite> out;
  size_t others = 0;
  for (const std::string& label : applied) {
    AppliedRule a = parse_applied(label);
    const auto it = rules.find(library_id(a.rule));
    if (it == rules.end() || a.at.empty()) {
      ++others;
      continue;
    }
    out.push_back({std::move(a.rule), std::move(a.at), std::make_shared<const Rule>(*it->second)});
  }
  if (left_out) *left_out = others;
  return out;
}

}  // namespace pcgx::search
