#include "print_rulesets.h"

#include <iomanip>

#include "pcgx/rulesets/rule_form.h"

namespace pcgx::cli {
namespace {

double pct(size_t n, size_t d) { return d == 0 ? 100.0 : 100.0 * static_cast<double>(n) / static_cast<double>(d); }

}  // namespace

void print_ruleset(std::ostream& out, const Ruleset& r, int limit) {
  out << "kind         " << r.kind << "\nname         " << r.name << " (version " << r.version << ")\n"
      << "opset        " << r.opset << "\nrules        " << r.rules.size() << "\n"
      << "content hash " << r.stored_hash << (r.stored_hash == r.computed_hash ? " (matches)" : " (DOES NOT MATCH the content)")
      << "\ngenerator    " << r.generator_json << "\n";
  for (const auto& [k, v] : r.stats) out << "  " << std::left << std::setw(24) << k << static_cast<int64_t>(v) << "\n";
  int n = 0;
  for (const Rule& rule : r.rules) {
    if (limit > 0 && n++ >= limit) break;
    out << rule.id << ": " << rule_text(rule);
    if (rule.proof) out << "   [" << rule.proof->result << "]";
    out << "\n";
  }
}

void print_stats(std::ostream& out, const RulesetStats& s) {
  out << s.rules << " rules, " << s.multi_output << " with several outputs\n\noperators (source, target) count\n";
  for (const auto& [k, v] : s.sizes) out << "  (" << k.first << ", " << k.second << ")  " << v << "\n";
  out << "\nrules using each operator\n";
  for (const auto& [k, v] : s.operators) out << "  " << std::left << std::setw(14) << k << v << "\n";
  out << "\nproofs\n";
  for (const auto& [k, v] : s.proofs) out << "  " << std::left << std::setw(14) << k << v << "\n";
  out << "\nrules that hold at any degree (degree_generic): " << s.degree_generic << "\n";
  if (!s.value_generic.empty()) {
    out << "rules that hold at any value of an attribute (value_generic)\n";
    for (const auto& [k, v] : s.value_generic) out << "  " << std::left << std::setw(14) << k << v << "\n";
  }
}

void print_diff(std::ostream& out, const RulesetDiff& d, const std::string& a, const std::string& b) {
  for (const Rule* r : d.only_a) out << "- " << r->id << ": " << rule_text(*r) << "\n";
  for (const Rule* r : d.only_b) out << "+ " << r->id << ": " << rule_text(*r) << "\n";
  out << d.only_a.size() << " rules only in " << a << ", " << d.only_b.size() << " only in " << b << "\n";
}

void print_coverage(std::ostream& out, const RulesetCoverage& c, size_t rules_b, const std::string& a, const std::string& b) {
  out << std::fixed << std::setprecision(1) << c.found << " of " << rules_b << " rules of " << b << " are in " << a << " ("
      << pct(c.found, rules_b) << "%)\n";
}

void print_derivation(std::ostream& out, const verify::Derivation& d) {
  out << std::fixed << std::setprecision(1) << d.provable << " of B's rules are proved by the axioms; of those " << d.in_a
      << " are in A and " << d.derived << " more are derived from A's rules: " << d.in_a + d.derived << " covered ("
      << pct(d.in_a + d.derived, d.provable) << "%)\n";
  if (d.unusable > 0) out << d.unusable << " of A's rules could not serve as axioms\n";
}

void print_check(std::ostream& out, const RulesetCheck& c, bool legacy, bool list) {
  if (list)
    for (const LegacyRule* lr : c.inexpressible) out << lr->name << ": not expressible: " << lr->reason << "\n";
  for (const RulesetCheck::Verdict& v : c.verdicts) {
    if (!v.holds) out << v.rule->id << ": REFUTED: " << rule_text(*v.rule) << "\n    " << v.counterexample << "\n";
    else if (list) out << v.rule->id << ": holds: " << rule_text(*v.rule) << "\n";
  }
  out << c.holds << " hold, " << c.refuted << " refuted";
  if (legacy) out << ", " << c.inexpressible.size() << " not expressible in pcgx";
  out << " (of " << c.holds + c.refuted + c.inexpressible.size() << ")\n";
  for (const auto& [k, v] : c.reasons) out << "  not expressible, " << v << "x: " << k << "\n";
}

}  // namespace pcgx::cli
