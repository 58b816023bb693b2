// A strategy's certificate (see certify.h).
#include "pcgx/runner/certify.h"

namespace pcgx::runner {

CertifyReport certify_strategy(const Graph& strategy, const Graph* model, size_t substitutions, const std::vector<std::string>& axiom_dirs,
                               const verify::CertifyProgress& progress, const std::string& model_as) {
  const verify::AxiomSet axioms = verify::load_axioms(verify::axiom_search_path(axiom_dirs));
  CertifyReport r{verify::certify(strategy, axioms, {}, progress), axioms.hash, ""};
  r.operators = "not compared with the model (a strategy file names its model, `plan check --certify` compares them)";
  if (model) {
    const std::string whose = model_as.empty() ? std::string("the model's") : "the model's, " + model_as;
    if (const auto differ = verify::same_operators(strategy, *model)) r.certificate.unverified.push_back("the operators are not " + whose + ": " + *differ);
    else r.operators = model_as.empty() ? "the model's own, each reading what it reads in the model" : whose + ", each reading what it reads there";
  } else if (substitutions > 0) {
    r.operators = "the model's after " + std::to_string(substitutions) +
                  " substitutions, which this certificate does not prove (their rules' proofs are the ruleset's: pcgx audit)";
  }
  return r;
}

}  // namespace pcgx::runner
