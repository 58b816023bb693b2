#include "pcgx/verifier/audit.h"

#include "pcgx/pcg/error.h"
#include "pcgx/rulesets/numeric_check.h"

#include <algorithm>
#include <memory>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

namespace pcgx::verify {

bool AuditResult::failed() const {
  return !hash_ok || std::any_of(rules.begin(), rules.end(), [](const RuleAudit& a) { return a.verdict != "ok"; });
}

AuditResult audit_ruleset(const Ruleset& r, const AxiomSet& all_axioms, ProverOptions options, int threads,
                          const std::function<void(size_t, size_t)>& progress) {
  AuditResult out;
  out.hash_ok = !r.stored_hash.empty() && r.stored_hash == r.computed_hash;
  // Proofs may use the axioms of the ruleset's own operators only.
  const AxiomSet axioms = axioms_for(all_axioms, r);
  if (!r.axiom_digests.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, digest] : r.axiom_digests) names.push_back(name);
    try {
      out.same_axioms = axiom_digests(axioms, names) == r.axiom_digests;
    } catch (const Error&) {
      out.same_axioms = false;  // one of them is gone, or is not of the ruleset's operators
    }
  } else {
    out.same_axioms = r.axioms_hash == all_axioms.hash;  // a file from before per-axiom digests
  }
  out.verdicts = prove_all(r.rules, axioms, options, threads, progress);
  out.rules.resize(r.rules.size());
  // The stored cores, each proved alone (a second pass: it needs the
  // re-proofs' verdicts only to skip rules already failed).
  std::vector<Proof> core(r.rules.size());
  std::vector<std::vector<std::string>> value_generic(r.rules.size());
  std::vector<NumericCheck> other_values(r.rules.size(), NumericCheck{true, "", DegreeCheck::kNotRun});
  tbb::enumerable_thread_specific<std::unique_ptr<Prover>> provers;
  tbb::task_arena arena(threads > 0 ? threads : tbb::this_task_arena::max_concurrency());
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, r.rules.size(), [&](size_t i) {
      const Rule& rule = r.rules[i];
      if (!rule.proof || rule.proof->axioms.empty() || out.verdicts[i].proof.result != Result::kUnsat) return;
      auto& p = provers.local();
      if (!p) p = std::make_unique<Prover>(axioms, options);
      core[i] = p->prove_with(rule, rule.proof->axioms);
      value_generic[i] = p->value_generic(rule, rule.proof->axioms);
      // What the stored claim says, evaluated (the fresh proof's own claim
      // was evaluated by prove_all).
      if (!rule.proof->value_generic.empty()) other_values[i] = check_numerically(with_other_values(rule, rule.proof->value_generic));
    });
  });
  for (size_t i = 0; i < r.rules.size(); ++i) {
    const Rule& rule = r.rules[i];
    const Verdict& v = out.verdicts[i];
    RuleAudit& a = out.rules[i];
    auto fail = [&](std::string verdict, std::string detail) {
      a.verdict = std::move(verdict);
      a.detail = detail.empty() ? "(no reason given)" : std::move(detail);
    };
    const bool generic_now = v.check.at_degree_4 == DegreeCheck::kHolds;
    if (!rule.proof) {
      fail("no proof record", "a ruleset holds proved rules only");
    } else if (rule.proof->result != "proved") {
      fail("stored result \"" + rule.proof->result + "\"", "a ruleset holds proved rules only");
    } else if (v.proof.result != Result::kUnsat) {
      fail(std::string(to_string(v.proof.result)), v.proof.reason);
    } else if (!v.check.holds) {
      fail("proved but refuted by evaluation", v.check.counterexample);
    } else if (rule.proof->axioms.empty()) {
      fail("stored unsat core empty", "a proof uses at least one axiom");
    } else if (auto unknown = std::find_if(rule.proof->axioms.begin(), rule.proof->axioms.end(),
                                           [&](const std::string& n) {
                                             return std::find(axioms.names.begin(), axioms.names.end(), n) == axioms.names.end();
                                           });
               unknown != rule.proof->axioms.end()) {
      fail("stored unsat core names no axiom of its operators", *unknown);
    } else if (core[i].result != Result::kUnsat) {
      fail("stored unsat core does not prove it", std::string(to_string(core[i].result)) + ": " + core[i].reason);
    } else if (rule.proof->degree_generic != generic_now) {
      fail(std::string("stored degree_generic ") + (rule.proof->degree_generic ? "true" : "false"),
           generic_now ? "evaluation with degree 4 holds" : "evaluation with degree 4 does not hold (the rule is degree-specific)");
    } else if (rule.proof->value_generic != value_generic[i]) {
      auto names = [](const std::vector<std::string>& list) {
        std::string text;
        for (const std::string& x : list) text += (text.empty() ? "" : ", ") + x;
        return "[" + text + "]";
      };
      fail("stored value_generic " + names(rule.proof->value_generic),
           "the stored core passes through " + names(value_generic[i]));
    } else if (!other_values[i].holds) {
      fail("stored value_generic refuted by evaluation at other values", other_values[i].counterexample);
    } else {
      a.verdict = "ok";
    }
  }
  return out;
}

}  // namespace pcgx::verify
