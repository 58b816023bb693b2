#include "pcgx/rulesets/ruleset_compare.h"

#include <set>

#include "pcgx/pcg/graph_json.h"
#include "pcgx/rulesets/numeric_check.h"
#include "pcgx/rulesets/rule_form.h"

namespace pcgx {
namespace {

size_t ops_of(const Graph& g) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op->op_class != OpClass::kSource;
  return n;
}

}  // namespace

Ruleset load_rules(const std::string& path, RuleFormat format, LegacyDims dims, LegacyImport* legacy) {
  if (format == RuleFormat::kPcgx) return load_ruleset(path);
  LegacyImport imp = import_flexflow(read_text_file(path), path, dims);
  Ruleset r = imp.rules;
  if (legacy) *legacy = std::move(imp);
  return r;
}

RulesetStats ruleset_stats(const Ruleset& r) {
  RulesetStats s;
  s.rules = r.rules.size();
  for (const Rule& rule : r.rules) {
    ++s.sizes[{ops_of(rule.source), ops_of(rule.target)}];
    s.multi_output += rule.source.outputs().size() > 1;
    std::set<std::string> used;
    for (const Graph* g : {&rule.source, &rule.target})
      for (const Node& n : g->nodes())
        if (n.op->op_class != OpClass::kSource) used.insert(n.op->name);
    for (const auto& o : used) ++s.operators[o];
    ++s.proofs[rule.proof ? rule.proof->result : "no proof"];
    if (!rule.proof) continue;
    s.degree_generic += rule.proof->degree_generic;
    for (const std::string& v : rule.proof->value_generic) ++s.value_generic[v];
  }
  return s;
}

RulesetDiff diff_rulesets(const Ruleset& a, const Ruleset& b) {
  std::map<std::string, const Rule*> ka, kb;
  for (const Rule& r : a.rules) ka.emplace(rule_key(r, false), &r);
  for (const Rule& r : b.rules) kb.emplace(rule_key(r, false), &r);
  RulesetDiff d;
  for (const auto& [k, r] : ka)
    if (!kb.count(k)) d.only_a.push_back(r);
  for (const auto& [k, r] : kb)
    if (!ka.count(k)) d.only_b.push_back(r);
  return d;
}

RulesetCoverage coverage_of(const Ruleset& a, const Ruleset& b) {
  std::set<std::string> keys;
  for (const Rule& r : a.rules) keys.insert(rule_key(r, true));
  RulesetCoverage c;
  for (const Rule& r : b.rules) {
    if (keys.count(rule_key(r, true))) ++c.found;
    else c.missing.push_back(&r);
  }
  return c;
}

RulesetCheck check_ruleset(const Ruleset& r, const LegacyImport* legacy) {
  RulesetCheck c;
  if (legacy)
    for (const LegacyRule& lr : legacy->legacy)
      if (!lr.expressible) {
        c.inexpressible.push_back(&lr);
        ++c.reasons[lr.reason.substr(0, lr.reason.find(':') == std::string::npos ? lr.reason.size() : lr.reason.find(": ", 8))];
      }
  for (const Rule& rule : r.rules) {
    NumericCheck n = check_numerically(rule);
    (n.holds ? c.holds : c.refuted) += 1;
    c.verdicts.push_back({&rule, n.holds, std::move(n.counterexample)});
  }
  return c;
}

}  // namespace pcgx
