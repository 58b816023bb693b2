#pragma once
// `pcgx audit` as a library: everything a ruleset file claims, checked
// again. A file can recompute its own content hash after any edit, so the
// hash proves nothing by itself: every stored field of every proof record
// is recomputed and compared too.
#include <functional>
#include <string>
#include <vector>

#include "pcgx/verifier/batch.h"

namespace pcgx::verify {

struct RuleAudit {
  std::string verdict;  // "ok", or what failed
  std::string detail;   // why (never empty for a failure)
};

struct AuditResult {
  bool hash_ok = false;        // stored content hash present and equal to the content's
  bool same_axioms = false;    // proved with the axioms given now
  std::vector<RuleAudit> rules;
  std::vector<Verdict> verdicts;  // the re-proofs, per rule
  bool failed() const;
};

// Per rule, in this order: a proof record with result "proved"; a fresh
// proof; evaluation at other shapes; the stored unsat core alone proves it
// (every name an axiom of `axioms`); the stored degree_generic equals what
// evaluation with degree 4 finds now; the stored value_generic equals what
// the stored core passes through (Prover::value_generic), and the rule
// evaluated with other values there holds. Solver times are not compared.
AuditResult audit_ruleset(const Ruleset& r, const AxiomSet& axioms, ProverOptions options, int threads,
                          const std::function<void(size_t, size_t)>& progress = nullptr);

}  // namespace pcgx::verify
