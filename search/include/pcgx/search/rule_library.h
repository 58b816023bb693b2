#pragma once
// The rules a search applies, prepared once: every rule of a ruleset in
// both directions and at ranks 2, 3 and 4 (rank_adapt.h), indexed by the
// operator at the root of its source pattern.
//
// Left out of the index, because they match everywhere and only grow the
// graph: rules whose source is a bare tensor (x => Combine(Repartition(x)),
// kept apart as *introducers*), rules made of parallel operators only
// whose target is not smaller than their source, and rules whose target is
// their source with one more single-input operator (Relu(x) =>
// Relu(Relu(x)), the reverse of an idempotence). Parallel-only rules whose target is smaller (Combine(Repartition
// x) => x) are the *simplifiers*, applied after every substitution until
// none matches.
//
// Several rulesets make one library (the shipped rulesets together, each
// generated from its own operator set): a rule stated alike in two (the
// same source, target and output map, rule_content, and the same
// degree-generic proof) is kept once, from the first.
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pcgx/rulesets/ruleset.h"
#include "pcgx/search/substitution.h"

namespace pcgx::search {

enum class RuleFilter {
  kAll,
  kAlgebraic,  // no parallel operator on either side (is_algebraic)
  kParallel,   // a parallel operator on some side
};

// No parallel operator on either side of the rule.
bool is_algebraic(const Rule& r);

class RuleLibrary {
 public:
  explicit RuleLibrary(const Ruleset& rules, RuleFilter filter = RuleFilter::kAll);
  explicit RuleLibrary(std::span<const Ruleset> rulesets, RuleFilter filter = RuleFilter::kAll);
  // Its indexes point into its own rules: moved, they still do (a
  // vector's buffer moves with it); copied, they would point into the
  // original's.
  RuleLibrary(RuleLibrary&&) = default;
  RuleLibrary& operator=(RuleLibrary&&) = default;
  RuleLibrary(const RuleLibrary&) = delete;
  RuleLibrary& operator=(const RuleLibrary&) = delete;

  const std::vector<Rule>& rules() const { return rules_; }
  // The roots (substitution.h's RuleRoot, each naming its rule) of the
  // rules whose source's first computed output comes from `op`.
  const std::vector<RuleRoot>& roots_at(const OpDef* op) const;
  const std::vector<const Rule*>& simplifiers() const { return simplifiers_; }
  // Each simplifier's root, in simplifiers()' order (nothing where every
  // output of its source is a variable): simplifying runs after every
  // substitution, and most simplifiers are ruled out by their root alone.
  const std::vector<std::optional<RuleRoot>>& simplifier_roots() const { return simplifier_roots_; }
  // Bare-source rules whose target is parallel operators only
  // (x => Combine(Repartition(x))): used at one operator input at a time.
  const std::vector<const Rule*>& introducers() const { return introducers_; }
  size_t size() const { return rules_.size(); }

  RuleLibrary filtered(RuleFilter f) const;

 private:
  RuleLibrary() = default;
  void index();
  std::vector<Rule> rules_;
  std::map<const OpDef*, std::vector<RuleRoot>> roots_;
  std::vector<const Rule*> simplifiers_;
  std::vector<std::optional<RuleRoot>> simplifier_roots_;
  std::vector<const Rule*> introducers_;
  std::vector<Rule> bare_;
  std::vector<RuleRoot> no_roots_;
};

}  // namespace pcgx::search
