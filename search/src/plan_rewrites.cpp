// The algebraic rewrites a plan states (see user_plan.h's PlanRewrite).
#include <algorithm>
#include <map>
#include <optional>
#include <set>

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

// The id a ruleset states a library rule under: before "~" and "@".
std::string stated_id(const std::string& rule) { return rule.substr(0, rule.find_first_of("~@")); }

// `g` with every source unpartitioned (degrees 1, replica 1).
Graph unpartitioned(const Graph& g) {
  Graph out(g.name());
  for (const Node& n : g.nodes()) {
    Attributes a = n.attrs;
    if (n.op->op_class == OpClass::kSource) {
      if (a.has("degrees")) a.set("degrees", IntList(a.get_ints("degrees").size(), 1));
      if (a.has("replica")) a.set("replica", int64_t{1});
    }
    std::vector<TensorRef> in(n.inputs.begin(), n.inputs.end());
    out.add(*n.op, a, in, n.name);
  }
  for (const TensorRef& o : g.outputs()) out.add_output(o);
  return out;
}

// An algebraic rule (no parallel operator) stated on partitioned tensors,
// as the search records it on its partitioned graph (a degree "@kN", or a
// rule proved at degree 2: Linear and Relu fused over data-parallel
// shards), on whole ones: both sides are the same operators run task by
// task, each on its shards, so the identity holds on whole tensors too,
// which is what a plan rewrites before it partitions them. Nothing where
// the rule has no parallel state (it is its own form) or its sides do not
// infer unpartitioned.
std::optional<Rule> unpartitioned_form(const Rule& r) {
  bool partitioned = false;
  for (const Node& n : r.source.nodes())
    if (n.op->op_class == OpClass::kSource && (n.outputs[0].replica > 1 || n.outputs[0].num_shards() > 1)) partitioned = true;
  if (!partitioned) return std::nullopt;
  try {
    Rule u = r;
    u.source = unpartitioned(r.source), u.target = unpartitioned(r.target);
    return u;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

void resolve_plan_rewrites(UserPlan& plan, const RuleLibrary& algebraic, const std::set<std::string>& rule_ids) {
  if (plan.rewrites.empty()) return;
  const auto rules = by_id(algebraic);
  for (size_t i = 0; i < plan.rewrites.size(); ++i) {
    PlanRewrite& w = plan.rewrites[i];
    const auto it = rules.find(library_id(w.rule));
    if (it == rules.end())
      throw FileError(plan.source, "rewrites[" + std::to_string(i) + "].rule",
                      rule_ids.contains(stated_id(w.rule))
                          ? "'" + w.rule + "' is no algebraic rule of the rulesets: it has a parallel operator (the plan's partitions state that, and "
                                           "the communication is derived), or no such direction or rank"
                          : "no rule '" + stated_id(w.rule) + "' in the rulesets (pcgx ruleset show lists their ids; --ruleset names others)");
    w.resolved = std::make_shared<const Rule>(*it->second);
  }
}

Graph apply_plan_rewrites(const Graph& model, const UserPlan& plan, std::vector<std::string>* applied, bool a_part) {
  Graph g = model;
  std::map<std::string, size_t> replaced;  // an operator's name -> the rewrite that replaced it
  std::set<std::string> seen;              // the model's names and those rewrites made
  for (const Node& n : model.nodes()) seen.insert(n.name);
  for (size_t i = 0; i < plan.rewrites.size(); ++i) {
    const PlanRewrite& w = plan.rewrites[i];
    const std::string label = format_applied({w.rule, w.at});
    const std::string where = plan.source + ": rewrites[" + std::to_string(i) + "] (" + label + ")";
    if (!w.resolved) throw Error(where + ": not resolved against a ruleset");
    // Another pipeline stage's (a stage is lowered on its part of the model).
    if (a_part && std::none_of(w.at.begin(), w.at.end(), [&](const std::string& x) { return seen.contains(x); })) continue;
    std::set<std::string> here;
    for (const Node& n : g.nodes()) here.insert(n.name);
    for (const std::string& x : w.at) {
      if (here.contains(x)) continue;
      if (const auto r = replaced.find(x); r != replaced.end())
        throw Error(where + ": '" + x + "' was replaced by rewrites[" + std::to_string(r->second) + "]");
      throw Error(where + ": '" + x + "' is no operator of '" + model.name() + "'" +
                  (seen.contains(x) ? "" : a_part ? " (nor one an earlier rewrite makes, in the part of the model lowered: a rewrite spans one pipeline stage)"
                                                  : " (nor one an earlier rewrite makes)"));
    }
    std::optional<Graph> next;
    auto apply_at_names = [&](const Rule& rule) {
      for (const Match& m : find_matches(g, rule)) {
        if (matched_names(g, m) != w.at) continue;
        next = apply_match(g, m);
        if (next) return;
      }
    };
    apply_at_names(*w.resolved);
    if (!next)
      if (const auto whole = unpartitioned_form(*w.resolved)) apply_at_names(*whole);
    if (!next) throw Error(where + ": the rule does not apply at those operators, in that order");
    // As the search does after each rewrite (explorer.h's simplify): an
    // operator computed twice from the same inputs, once (for rewrites of
    // algebraic rules, all a plan states, its simplifiers never apply).
    if (auto merged = merge_common_subexpressions(*next)) next = std::move(merged);
    std::set<std::string> after;
    for (const Node& n : next->nodes()) after.insert(n.name), seen.insert(n.name);
    for (const std::string& x : here)
      if (!after.contains(x)) replaced[x] = i;
    g = std::move(*next);
    if (applied) applied->push_back(label);
  }
  return g;
}

std::vector<PlanRewrite> plan_rewrites_of(std::span<const std::string> applied, const RuleLibrary& algebraic, const std::set<std::string>& rule_ids,
                                          RewritesLeftOut* left_out) {
  const auto rules = by_id(algebraic);
  std::vector<PlanRewrite> out;
  RewritesLeftOut others;
  for (const std::string& label : applied) {
    AppliedRule a = parse_applied(label);
    const auto it = rules.find(library_id(a.rule));
    if (it == rules.end() || !is_algebraic(*it->second)) {
      ++(it != rules.end() || rule_ids.contains(stated_id(a.rule)) ? others.parallel : others.unknown);
      continue;
    }
    if (a.at.empty()) {
      ++others.unnamed;
      continue;
    }
    out.push_back({std::move(a.rule), std::move(a.at), std::make_shared<const Rule>(*it->second)});
  }
  if (left_out) *left_out = others;
  return out;
}

std::set<std::string> rule_ids(std::span<const Ruleset> rulesets) {
  std::set<std::string> ids;
  for (const Ruleset& r : rulesets)
    for (const Rule& x : r.rules) ids.insert(x.id);
  return ids;
}

}  // namespace pcgx::search
