#pragma once
// How `pcgx ruleset` prints what rulesets/ruleset_compare.h and
// verifier/derivation.h compute.
#include <ostream>
#include <string>

#include "pcgx/rulesets/ruleset_compare.h"
#include "pcgx/verifier/derivation.h"

namespace pcgx::cli {

// The header (kind, name, opset, hash, generator, stats) and at most
// `limit` rules (0: all) with their proof results.
void print_ruleset(std::ostream& out, const Ruleset& r, int limit);
void print_stats(std::ostream& out, const RulesetStats& s);
void print_diff(std::ostream& out, const RulesetDiff& d, const std::string& a, const std::string& b);
void print_coverage(std::ostream& out, const RulesetCoverage& c, size_t rules_b, const std::string& a, const std::string& b);
void print_derivation(std::ostream& out, const verify::Derivation& d);
// Refutations always, every verdict with `list`; `legacy`: the counts of
// rules a FlexFlow file holds that pcgx cannot express.
void print_check(std::ostream& out, const RulesetCheck& c, bool legacy, bool list);

}  // namespace pcgx::cli
