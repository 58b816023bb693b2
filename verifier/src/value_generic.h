#pragma once
// Which value attributes (AttrRole::kValue: a norm's epsilon, a dropout's
// rate and seed) a proof holds for at every value.
//
// A proof is a set of ground instances of axioms whose equalities imply the
// rule's (the prover's saturation, then Z3 on equalities alone). Take an
// attribute whose SMT arguments every axiom of the proof binds to a
// variable of its own, used nowhere else in the axiom (not in its
// precondition, not as another argument): replacing the attribute's value
// by another one, consistently wherever it occurs, maps each instance to an
// instance of the same axiom, and the equalities imply the rule's as
// before. The attribute's shapes and degrees cannot change under it (that
// is what kValue states), so neither can the instances admitted. Such a
// rule holds with any value there.
#include <string>
#include <vector>

#include "pcgx/rulesets/ruleset.h"
#include "terms.h"

namespace pcgx::verify {

// "Op.attr" of every value attribute set on an operator of `rule`, sorted.
std::vector<std::string> value_attributes(const Rule& rule);

// Whether `axiom` passes value attribute `op_attr` ("Op.attr") through
// unchanged (above). An axiom that does not use the operator does. A value
// coded as a fraction (two integers) is never claimed.
bool passes_through(const Axiom& axiom, const std::string& op_attr);

}  // namespace pcgx::verify
