#include "pcgx/verifier/derivation.h"

#include <map>

#include "pcgx/verifier/batch.h"

namespace pcgx::verify {

Derivation derive(const Ruleset& a, const Ruleset& b, const std::vector<const Rule*>& missing, const AxiomSet& axioms) {
  Derivation d;
  std::vector<std::string> skipped;
  const AxiomSet from_a = axioms_from_rules(a, axioms, skipped);
  d.unusable = skipped.size();
  std::vector<Rule> rest;
  std::map<std::string, size_t> index_of;
  for (const Rule* r : missing) index_of[r->id] = rest.size(), rest.push_back(*r);
  const auto by_axioms = prove_all(b.rules, axioms, {}, 0);
  const auto by_a = prove_all(rest, from_a, {}, 0);
  for (size_t i = 0; i < b.rules.size(); ++i) {
    if (by_axioms[i].proof.result != Result::kUnsat) continue;
    ++d.provable;
    const auto it = index_of.find(b.rules[i].id);
    if (it == index_of.end()) ++d.in_a;
    else if (by_a[it->second].proof.result == Result::kUnsat) ++d.derived;
    else d.not_derived.push_back(&b.rules[i]);
  }
  return d;
}

}  // namespace pcgx::verify
