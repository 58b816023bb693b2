#pragma once
// Readable and canonical forms of rules.
//
// rule_text: "Relu(Repartition[d0,2](x)) => Repartition[d0,2](Relu(x))".
// rule_key: a string equal for two rules exactly when they are the same rule
// up to the order of operators, the direction of the rule, and (with
// `rename_inputs`) a renaming of the inputs. Inputs are identified by their
// parallel state (rank, degrees, replica degree, dtype), not their sizes, so
// rules over different tensor sizes compare equal.
#include <string>

#include "pcgx/rulesets/ruleset.h"

namespace pcgx {

std::string graph_text(const Graph& g);
std::string rule_text(const Rule& r);
std::string rule_key(const Rule& r, bool rename_inputs);
// The rule's two graphs and output map exactly (its id and proof aside):
// equal for two records of the same rule.
std::string rule_content(const Rule& r);

}  // namespace pcgx
