#pragma once
// Which rules of B one ruleset A derives (`pcgx ruleset compare --derive`):
// of B's rules the axioms prove, those A holds outright and those A's
// rules, taken as the only axioms, prove.
#include <cstddef>
#include <string>
#include <vector>

#include "pcgx/rulesets/ruleset.h"
#include "pcgx/verifier/verifier.h"

namespace pcgx::verify {

struct Derivation {
  size_t provable = 0;  // B's rules the axioms prove
  size_t in_a = 0;      // of those, rules A holds (not in `missing`)
  size_t derived = 0;   // of those, the missing ones A's rules prove
  std::vector<const Rule*> not_derived;  // provable, missing and not derived from A
  size_t unusable = 0;  // A's rules that could not serve as axioms
};

// `missing`: B's rules that A does not hold (ruleset_compare.h's coverage_of).
Derivation derive(const Ruleset& a, const Ruleset& b, const std::vector<const Rule*>& missing, const AxiomSet& axioms);

}  // namespace pcgx::verify
