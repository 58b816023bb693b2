#pragma once
// One rule application as a strategy records it (strategy_json.h's
// "applied"): the rule's id as the search's library names it ("~" read
// right to left, "@4d" at another rank, "@kN" for the degree its 2 stood
// for), then, where every compute operator its source matched had a name,
// " at " and those names in the rule's order:
//
//   unity-c01643~ at layers0.self_attn.query, layers0.self_attn.key
//
// The names are what lets a plan state the same rewrite (user_plan.h's
// PlanRewrite, written by pcgx plan show).
#include <functional>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/search/substitution.h"

namespace pcgx::search {

struct AppliedRule {
  std::string rule;             // the id, with its suffixes
  std::vector<std::string> at;  // empty: a compute operator had no name, or there was none
};

// The names of the compute operators `m` matched in `g`, in the rule's
// order; empty where one has none.
std::vector<std::string> matched_names(const Graph& g, const Match& m);
// How the search labels applying `m` in `g` (the graph it matched in).
std::string applied_label(const Graph& g, const Match& m);
AppliedRule parse_applied(const std::string& label);
std::string format_applied(const AppliedRule& a);
// `label` with the names after " at " mapped by `rename` (a searched
// piece's canonical names to the model's, graph_splitting.h); without the
// names where one maps to none.
std::string renamed_applied(const std::string& label, const std::function<std::string(const std::string&)>& rename);
// The id without the degree ("@kN"), as a rule library names the rule.
std::string library_id(const std::string& rule);

}  // namespace pcgx::search
