#pragma once
// A certificate for a parallel strategy (`pcgx plan check --certify`): Z3
// proofs, at the strategy's own shapes, that its PCG computes what the
// unpartitioned model computes. The PCG is cut into local claims that
// compose, each proved against the operator axioms like a rule (Prover):
//
//   - every compute operator, run on its inputs' shards, gives the shards
//     of its unpartitioned result. Its inputs are laid out as copies of a
//     logical value u, conv(u) (Repartition per split dimension, then
//     Replicate for the replica slots), so the claim is
//         op(conv_in(u)) = conv_out(op(u)),
//     or, where its output's replica slots hold partial sums (a Linear
//     split along its reduction),
//         Reduce(r)(op(conv_in(u))) = conv_out(op(u)) at replica 1;
//   - every conversion between operators (a chain of parallel operators:
//     the communication the plan derived), and from an operator to a graph
//     output, takes the producer's layout of a value to the reader's:
//     C(conv_p(u)) = conv_c(u); from partial sums the chain must begin by
//     summing them (Reduce or AllReduce of all the slots), which the claim
//     replaces by its result. A graph output must hold copies, but for a
//     loss's partial sums, which the trainer sums.
//
// With every claim proved, substituting them from the inputs forward turns
// the strategy into its own operators run unpartitioned: the plan computes
// what they compute at these shapes, for any values. That they are the
// model's is a separate check (same_operators below; a search's
// substitutions are proved by its ruleset, `pcgx audit`). Sources are
// taken as copies of their value in the layout they state (what the
// runtime loads). Identical claims (repeated layers) are proved once.
// Pipeline and Batch change when a slice is computed, not what, and are
// left out of the claims.
//
// What cannot be claimed (an operator reading partial sums directly, a
// conversion joining several producers) or not proved is named; the
// strategy is then unverified, not refused.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/verifier/verifier.h"

namespace pcgx::verify {

enum class ClaimKind : uint8_t { kOperator, kConversion };
std::string_view to_string(ClaimKind k);

struct CertifiedClaim {
  ClaimKind kind = ClaimKind::kOperator;
  std::string what;                // "Linear 'fc1': f32[64/4, 16] x f32[16, 32/2] -> f32[64/4, 32/2]"
  std::vector<std::string> nodes;  // the strategy's nodes it stands for (the consumer's, for a conversion)
  bool partial = false;            // the operator's output replicas are partial sums
  Rule rule;                       // the claim, source = the unpartitioned side
  Proof proof;
  bool proved() const { return proof.result == Result::kUnsat; }
};

struct Certificate {
  std::vector<CertifiedClaim> claims;   // distinct claims, in graph order
  std::vector<std::string> unverified;  // one line per claim not proved or step not claimable
  int64_t operators = 0;                // compute operators of the strategy covered
  int64_t conversions = 0;              // conversions between them covered
  double seconds = 0;
  bool verified() const { return unverified.empty(); }
};

// Progress: the distinct claims put to the prover so far.
using CertifyProgress = std::function<void(size_t claims)>;

// Certifies `strategy` (a PCG with parallel degrees; machine views do not
// matter) against `axioms`. A claim that cannot be built is named in
// `unverified`, not thrown.
Certificate certify(const Graph& strategy, const AxiomSet& axioms, const ProverOptions& options = {},
                    const CertifyProgress& progress = {});

// Whether `strategy`'s compute operators are `model`'s, read through its
// parallel operators: the same names, operators and attributes, each
// reading what its namesake reads. Nothing when they are; else the first
// difference, in a line. (A plan lowers the model without rewriting it; a
// search's substitutions make them differ.)
std::optional<std::string> same_operators(const Graph& strategy, const Graph& model);

}  // namespace pcgx::verify
