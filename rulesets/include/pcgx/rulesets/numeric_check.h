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

}  // namespace pcgx
