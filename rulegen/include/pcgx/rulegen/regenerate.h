#pragma once
// Candidates generated from an opset and proved with the axioms of its own
// operators (ruleset.h, "What the hashes promise"), as `pcgx regenerate`
// ships them; and the same for one operator's parallel forms, as
// `pcgx ops check` reports them.
#include <functional>
#include <string>

#include "pcgx/generator/opset.h"
#include "pcgx/verifier/batch.h"
#include "pcgx/verifier/verifier.h"

namespace pcgx::rulegen {

struct RegenerateOptions {
  gen::Opset opset;
  int max_ops = 3;
  int ndims = 0;     // 0: the opset's own
  int threads = 0;   // 0: every core; the result does not depend on it
  unsigned timeout_ms = 2000;
  std::function<void(const std::string&)> progress;
  // An earlier ruleset whose proofs may be reused: a candidate that is one
  // of its rules (rule_content) takes that rule's unsat core when every
  // axiom in it is still open to the opset's proofs with the digest the
  // ruleset records, and the core alone proves it again (prove_all); the
  // rest are proved from every axiom. With every axiom open to the proofs
  // unchanged, the result is what proving everything gives; where others
  // were added or changed, a proof from all of them might have found
  // another core, so the file may differ from one proved from scratch
  // (both sound: each core proves its rule).
  const Ruleset* previous = nullptr;
};

struct Regenerated {
  Ruleset candidates;
  verify::ProvedSet proved;  // proved.ruleset is the ruleset to ship
  size_t axioms = 0;         // open to its proofs, all of them checked first
  double generate_seconds = 0, verify_seconds = 0;
  size_t offered = 0;        // candidates given a core of `previous`
  size_t reused = 0;         // of those, proved by it again
};

// Throws pcgx::Error, generating nothing, when an axiom open to the opset's
// proofs fails `pcgx axioms check` (one wrong axiom proves anything), and
// when a rule is proved but refuted by evaluation.
Regenerated regenerate(const RegenerateOptions& options, const verify::AxiomSet& all);

// The operators every family is generated with: one operator's parallel
// forms are its two-operator candidates with these.
inline constexpr const char* kParallelOperators = "Repartition,Combine,Replicate,Reduce";

struct ParallelForms {
  std::string not_generated;  // why the family could not be generated (an attribute needs values), or empty
  size_t candidates = 0, proved = 0;
  std::string unproved;       // the unproved ones with their reasons
};

// `op` (a registry name, or a choice such as "Pool2D(kernel_h=2,kernel_w=2)")
// with the parallel operators, at most two operators, proved.
ParallelForms prove_parallel_forms(const std::string& op, const verify::AxiomSet& all, int threads = 0);

}  // namespace pcgx::rulegen
