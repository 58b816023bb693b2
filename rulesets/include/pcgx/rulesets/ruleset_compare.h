#pragma once
// What `pcgx ruleset stats|diff|compare|check` report, computed here (the
// CLI prints it): counts of a ruleset's rules, the rules two rulesets do
// not share, how many of one ruleset's rules another holds, and every
// rule's numeric verdict.
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/rulesets/legacy_flexflow.h"
#include "pcgx/rulesets/ruleset.h"

namespace pcgx {

// A ruleset in pcgx's format, or a legacy FlexFlow collection read with
// `dims` (its rules pcgx cannot express go to `legacy` when given).
enum class RuleFormat : uint8_t { kPcgx, kFlexflow };
Ruleset load_rules(const std::string& path, RuleFormat format, LegacyDims dims, LegacyImport* legacy = nullptr);

struct RulesetStats {
  size_t rules = 0, multi_output = 0;
  std::map<std::pair<size_t, size_t>, int> sizes;  // (source, target) compute operators -> rules
  std::map<std::string, int> operators;            // operator -> rules using it (either side)
  std::map<std::string, int> proofs;               // proof result ("no proof") -> rules
  int degree_generic = 0;                          // proofs claiming any degree (ProofRecord::degree_generic)
  std::map<std::string, int> value_generic;        // "Op.attr" -> rules whose proof claims any value there
};
RulesetStats ruleset_stats(const Ruleset& r);

// Rules of A not in B and of B not in A: the same rule up to direction
// (rule_form.h's rule_key, inputs as named).
struct RulesetDiff {
  std::vector<const Rule*> only_a, only_b;
};
RulesetDiff diff_rulesets(const Ruleset& a, const Ruleset& b);

// B's rules that A holds up to input renaming and direction, and the others.
struct RulesetCoverage {
  size_t found = 0;
  std::vector<const Rule*> missing;
};
RulesetCoverage coverage_of(const Ruleset& a, const Ruleset& b);

// check_numerically (numeric_check.h) of every rule, and the legacy rules
// that pcgx cannot express, counted by reason.
struct RulesetCheck {
  struct Verdict {
    const Rule* rule = nullptr;
    bool holds = false;
    std::string counterexample;
  };
  std::vector<Verdict> verdicts;  // in rule order
  size_t holds = 0, refuted = 0;
  std::vector<const LegacyRule*> inexpressible;
  std::map<std::string, int> reasons;  // a reason's leading words -> count
};
RulesetCheck check_ruleset(const Ruleset& r, const LegacyImport* legacy = nullptr);

}  // namespace pcgx
