#pragma once
// Proving many rules on every core: one Prover (one Z3 context) per thread,
// results in rule order whatever the thread count. Each proved rule is also
// evaluated on fresh inputs, at its own shapes and at two and three times
// them, so a wrong axiom shows up as a proved rule that evaluation refutes.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pcgx/rulesets/numeric_check.h"
#include "pcgx/verifier/verifier.h"

namespace pcgx::verify {

struct Verdict {
  Proof proof;
  NumericCheck check;  // filled for proved rules
  bool reused = false;  // proved with the stored core it was offered (below)
};

// `progress(done, total)` is called about once a second.
//
// `cores`, when given, offers per rule the unsat core of an earlier proof
// (empty: none): the rule is first proved with those axioms alone (as
// `pcgx audit` re-proves a record), and the record keeps that core when
// they suffice; otherwise, or without one, it is proved from all of
// `axioms`. A stored core is thus checked, never trusted, and what a
// proved rule records is the same either way when the axioms are.
std::vector<Verdict> prove_all(const std::vector<Rule>& rules, const AxiomSet& axioms, ProverOptions options,
                               int threads, const std::function<void(size_t, size_t)>& progress = nullptr,
                               const std::vector<std::vector<std::string>>* cores = nullptr);

// What proving a candidates file yields: the proved rules as a ruleset (kind
// pcgx.ruleset, with proof records and the axiom hash), a report of the
// others with their reasons, and counts per verdict. `refuted` counts rules
// proved but refuted by evaluation: a wrong axiom.
struct ProvedSet {
  Ruleset ruleset;
  std::string unproved;
  std::map<std::string, int> tally;
  size_t refuted = 0;
  // Operators without an SMT encoding, with the candidates left unproved
  // for that alone: a gap to fill, not a verdict on the rules.
  std::map<std::string, int> unencoded;
};
ProvedSet collect_proved(const Ruleset& candidates, const std::vector<Verdict>& verdicts, const AxiomSet& axioms);

// Of the proved rules, how many still hold with every degree 2 made 4, how
// many are degree-specific, and how many cannot be regraded (see regrade()).
struct DegreeTally {
  size_t holds = 0, specific = 0, not_applicable = 0;
};
DegreeTally tally_degrees(const std::vector<Verdict>& verdicts);
std::string to_string(const DegreeTally& t);

}  // namespace pcgx::verify
