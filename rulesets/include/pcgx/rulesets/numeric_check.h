#pragma once
// Checks a rule by evaluation: both sides run in the reference interpreter
// on random inputs (every shard drawn independently), exactly modulo p and
// in float, and the mapped outputs are compared. A mismatch is a concrete
// counterexample; agreement is evidence, not a proof.
#include <string>

#include "pcgx/rulesets/ruleset.h"

namespace pcgx {

// Whether a rule stated for degree 2 also holds with every degree 2 made 4.
// Degrees are part of a rule's statement (Reduce(2) of Replicate(2) is x + x,
// not 4x), so a degree-specific rule is not a wrong one; the count of rules
// that carry over is evidence that the proofs are not artefacts of one degree.
enum class DegreeCheck { kNotRun, kHolds, kDegreeSpecific, kNotApplicable };

struct NumericCheck {
  bool holds = false;
  std::string counterexample;  // when it does not hold
  DegreeCheck at_degree_4 = DegreeCheck::kNotRun;
};

NumericCheck check_numerically(const Rule& r, int trials = 2);

// The rule with every input extent multiplied by `factor` (Split sizes and
// index ranges scaled alike; degrees kept): the same rule at other shapes.
// Throws pcgx::Error when the scaled graphs are not legal.
Rule rescale(const Rule& r, int64_t factor);

// The rule at `to`-times its shapes with every degree `from` (of inputs and
// parallel operators) made `to`. Throws pcgx::Error when that is not a legal
// rule, or when the rule has a replica-axis Concat or Split (whose replica
// degrees are fixed by the operator).
Rule regrade(const Rule& r, int64_t from, int64_t to);

// The rule with each value attribute named in `attrs` ("Op.attr", as
// ProofRecord::value_generic names them) given another value, the same new
// value wherever the rule had the same old one (a float v becomes
// v / 2 + 0.25, an integer v + 7): what a value-generic rule claims too.
Rule with_other_values(const Rule& r, const std::vector<std::string>& attrs);

// check_numerically at the rule's own shapes and at twice and three times
// them, where legal: fingerprint collisions and axiom gaps surface here. It
// also evaluates the rule regraded from degree 2 to 4 (`at_degree_4`), which
// informs but does not decide `holds`.
NumericCheck check_at_other_shapes(const Rule& r, int trials = 2);

}  // namespace pcgx
