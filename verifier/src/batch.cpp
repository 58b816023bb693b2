#include "pcgx/verifier/batch.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "pcgx/pcg/error.h"
#include "pcgx/rulesets/rule_form.h"

namespace pcgx::verify {

namespace {

NumericCheck check_proved(const Rule& rule, const std::vector<std::string>& value_generic) {
  NumericCheck c = check_at_other_shapes(rule);
  if (!c.holds || value_generic.empty()) return c;
  // What value genericity claims is checked too: a wrong claim is a bug
  // in value_generic.h's argument or in an axiom.
  const NumericCheck other = check_numerically(with_other_values(rule, value_generic));
  if (!other.holds) {
    std::string names;
    for (const std::string& a : value_generic) names += (names.empty() ? "" : ", ") + a;
    c.holds = false;
    c.counterexample = "with other values of " + names + ": " + other.counterexample;
  }
  return c;
}

}  // namespace

std::vector<Verdict> prove_all(const std::vector<Rule>& rules, const AxiomSet& axioms, ProverOptions options,
                               int threads, const std::function<void(size_t, size_t)>& progress,
                               const std::vector<std::vector<std::string>>* cores) {
  if (cores && cores->size() != rules.size()) throw Error("prove_all: " + std::to_string(cores->size()) + " cores for " + std::to_string(rules.size()) + " rules");
  std::vector<Verdict> out(rules.size());
  tbb::enumerable_thread_specific<std::unique_ptr<Prover>> provers;
  std::atomic<size_t> done{0};
  std::mutex mu;
  auto last = std::chrono::steady_clock::now();
  tbb::task_arena arena(threads > 0 ? threads : tbb::this_task_arena::max_concurrency());
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, rules.size(), [&](size_t i) {
      auto& p = provers.local();
      if (!p) p = std::make_unique<Prover>(axioms, options);
      Proof& proof = out[i].proof;
      if (cores && !(*cores)[i].empty()) {
        proof = p->prove_with(rules[i], (*cores)[i]);
        if (proof.result == Result::kUnsat) {
          proof.axioms = (*cores)[i];
          out[i].reused = true;
        }
      }
      if (!out[i].reused) proof = p->prove(rules[i]);
      if (!out[i].reused && proof.result == Result::kUnsat) {
        // The stored core must prove the rule alone, as `pcgx audit` checks.
        // A minimal core may not: an axiom outside it can be what created a
        // term the core's instances match. Then the record names every axiom
        // the proof instantiated, with which the same saturation recurs.
        if (p->prove_with(rules[i], proof.axioms).result != Result::kUnsat) proof.axioms = proof.instantiated;
      }
      if (proof.result == Result::kUnsat) {
        proof.value_generic = p->value_generic(rules[i], proof.axioms);
        out[i].check = check_proved(rules[i], proof.value_generic);
      }
      const size_t n = ++done;
      if (!progress) return;
      std::lock_guard<std::mutex> lock(mu);
      if (std::chrono::steady_clock::now() - last > std::chrono::seconds(1)) {
        last = std::chrono::steady_clock::now();
        progress(n, rules.size());
      }
    });
  });
  return out;
}

ProvedSet collect_proved(const Ruleset& candidates, const std::vector<Verdict>& verdicts, const AxiomSet& axioms) {
  ProvedSet out;
  out.ruleset = candidates;
  out.ruleset.kind = kRulesetKind;
  out.ruleset.rules.clear();
  for (size_t i = 0; i < candidates.rules.size(); ++i) {
    const Rule& rule = candidates.rules[i];
    const Proof& p = verdicts[i].proof;
    std::string verdict(to_string(p.result));
    if (p.result == Result::kUnsat && !verdicts[i].check.holds) {
      verdict = "proved but refuted by evaluation";
      ++out.refuted;
      out.unproved += rule.id + ": PROVED BUT REFUTED (an axiom is wrong): " + verdicts[i].check.counterexample + "\n";
    } else if (p.result == Result::kUnsat) {
      Rule r = rule;
      r.proof = ProofRecord{"proved", p.seconds, p.axioms, "", verdicts[i].check.at_degree_4 == DegreeCheck::kHolds,
                            p.value_generic};
      out.ruleset.rules.push_back(std::move(r));
    } else {
      out.unproved += rule.id + ": " + verdict + ": " + p.reason + "\n    " + rule_text(rule) + "\n";
      if (!p.unencoded.empty()) ++out.unencoded[p.unencoded];
    }
    ++out.tally[verdict];
  }
  // The axioms the proofs use, by content: what the ruleset's hash depends on.
  std::vector<std::string> used;
  for (const Rule& r : out.ruleset.rules) used.insert(used.end(), r.proof->axioms.begin(), r.proof->axioms.end());
  out.ruleset.axiom_digests = axiom_digests(axioms, used);
  out.ruleset.axioms_hash = axioms_hash_of(out.ruleset.axiom_digests);
  out.ruleset.stats.push_back({"candidates", static_cast<double>(candidates.rules.size())});
  out.ruleset.stats.push_back({"proved", static_cast<double>(out.ruleset.rules.size())});
  const DegreeTally d = tally_degrees(verdicts);
  out.ruleset.stats.push_back({"proved_holding_at_degree_4", static_cast<double>(d.holds)});
  out.ruleset.stats.push_back({"proved_degree_specific", static_cast<double>(d.specific)});
  return out;
}

DegreeTally tally_degrees(const std::vector<Verdict>& verdicts) {
  DegreeTally t;
  for (const Verdict& v : verdicts) {
    if (v.proof.result != Result::kUnsat || !v.check.holds) continue;
    switch (v.check.at_degree_4) {
      case DegreeCheck::kHolds: ++t.holds; break;
      case DegreeCheck::kDegreeSpecific: ++t.specific; break;
      case DegreeCheck::kNotApplicable: ++t.not_applicable; break;
      case DegreeCheck::kNotRun: break;
    }
  }
  return t;
}

std::string to_string(const DegreeTally& t) {
  return "with every degree 2 made 4 (at 4x the shapes): " + std::to_string(t.holds) + " still hold, " +
         std::to_string(t.specific) + " are degree-specific, " + std::to_string(t.not_applicable) +
         " cannot be regraded (replica-axis Concat/Split, Reshape, or not legal)";
}

}  // namespace pcgx::verify
