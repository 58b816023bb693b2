#include "pcgx/rulegen/regenerate.h"

#include <chrono>

#include "pcgx/generator/generate.h"
#include "pcgx/pcg/error.h"

namespace pcgx::rulegen {

Regenerated regenerate(const RegenerateOptions& o, const verify::AxiomSet& all) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  const verify::AxiomSet axioms = verify::restrict_to(all, o.opset.operators());
  say("checking the " + std::to_string(axioms.names.size()) + " axioms of its operators (of " + std::to_string(all.names.size()) + " in " +
      axioms.dir + "; pcgx axioms check)");
  if (const auto failure = verify::axiom_check_failure(axioms))
    throw Error(*failure + "; nothing was generated (see pcgx axioms check)");
  gen::GeneratorConfig c;
  c.opset = o.opset;
  c.max_ops = o.max_ops;
  c.ndims = o.ndims > 0 ? o.ndims : o.opset.default_ndims;
  c.threads = o.threads;
  Regenerated out;
  out.axioms = axioms.names.size();
  gen::GenerateReport report;
  const auto t0 = std::chrono::steady_clock::now();
  out.candidates = gen::generate(c, report, o.progress);
  const auto t1 = std::chrono::steady_clock::now();
  const auto verdicts = verify::prove_all(out.candidates.rules, axioms, verify::ProverOptions{o.timeout_ms}, o.threads,
                                          [&](size_t n, size_t total) { say("verifying: " + std::to_string(n) + "/" + std::to_string(total)); });
  out.generate_seconds = std::chrono::duration<double>(t1 - t0).count();
  out.verify_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  out.proved = verify::collect_proved(out.candidates, verdicts, axioms);
  if (out.proved.refuted)
    throw Error(std::to_string(out.proved.refuted) + " rules were proved but refuted by evaluation: an axiom is wrong (run `pcgx axioms check`)");
  return out;
}

ParallelForms prove_parallel_forms(const std::string& op, const verify::AxiomSet& all, int threads) {
  ParallelForms out;
  RegenerateOptions o;
  o.opset = gen::parse_ops(op + "," + kParallelOperators);
  o.opset.name = "parallel-forms";
  o.max_ops = 2;
  o.threads = threads;
  try {
    for (const gen::OpChoice& choice : o.opset.ops) gen::check_enumerable(choice);
  } catch (const Error& e) {
    out.not_generated = e.what();
    return out;
  }
  const Regenerated r = regenerate(o, all);
  out.candidates = r.candidates.rules.size();
  out.proved = r.proved.ruleset.rules.size();
  out.unproved = r.proved.unproved;
  return out;
}

}  // namespace pcgx::rulegen
