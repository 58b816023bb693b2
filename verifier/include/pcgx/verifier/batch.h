#pragma once
// Proving many rules on every core: one Prover (one Z3 context) per thread,
// results in rule order whatever the thread count. Each proved rule is also
// evaluated on fresh inputs, at its own shapes and at two and three times
// them, so a wrong axiom shows up as a proved rule that evaluation refutes.
#include <functional>
#include <vector>

#include "pcgx/rulesets/numeric_check.h"
#include "pcgx/verifier/verifier.h"

namespace pcgx::verify {

struct Verdict {
  Proof proof;
  NumericCheck check;  // filled for proved rules
};

// `progress(done, total)` is called about once a second.
std::vector<Verdict> prove_all(const std::vector<Rule>& rules, const AxiomSet& axioms, ProverOptions options,
                               int threads, const std::function<void(size_t, size_t)>& progress = nullptr);

}  // namespace pcgx::verify
