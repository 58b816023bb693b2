#pragma once
// Checks a rule by evaluation: both sides run in the reference interpreter
// on random inputs (every shard drawn independently), exactly modulo p and
// in float, and the mapped outputs are compared. A mismatch is a concrete
// counterexample; agreement is evidence, not a proof.
#include <string>

#include "pcgx/rulesets/ruleset.h"

namespace pcgx {

struct NumericCheck {
  bool holds = false;
  std::string counterexample;  // when it does not hold
};

NumericCheck check_numerically(const Rule& r, int trials = 2);

// The rule with every input extent multiplied by `factor` (Split sizes and
// index ranges scaled alike; degrees kept): the same rule at other shapes.
// Throws pcgx::Error when the scaled graphs are not legal.
Rule rescale(const Rule& r, int64_t factor);

// check_numerically at the rule's own shapes and at twice and three times
// them, where legal: fingerprint collisions and axiom gaps surface here.
NumericCheck check_at_other_shapes(const Rule& r, int trials = 2);

}  // namespace pcgx
