#pragma once
// `pcgx plan certify` and `plan check --certify`'s driver: a strategy's
// certificate (verifier/certificate.h) against the shipped axioms or a
// directory's, and what vouches that the operators it proves are the
// model's: a comparison where the model is at hand, else a statement of
// what is not compared.
#include <cstddef>
#include <string>

#include "pcgx/pcg/graph.h"
#include "pcgx/verifier/certificate.h"

namespace pcgx::runner {

struct CertifyReport {
  verify::Certificate certificate;  // a difference from the model's operators is one of its unverified lines
  std::string axioms_hash;          // of the axiom set proved against
  std::string operators;            // whether the operators are the model's, in a line
};

// `model`: the unpartitioned model the strategy lowers (null: not at hand),
// or the model as a plan states it, `model_as` saying how in words;
// without a model, `substitutions`: how many rewrites a search applied to
// it.
CertifyReport certify_strategy(const Graph& strategy, const Graph* model, size_t substitutions, const std::vector<std::string>& axiom_dirs,
                               const verify::CertifyProgress& progress = {}, const std::string& model_as = "");

}  // namespace pcgx::runner
