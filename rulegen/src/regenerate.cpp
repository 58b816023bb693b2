#include "pcgx/rulegen/regenerate.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_map>

#include "pcgx/generator/generate.h"
#include "pcgx/pcg/error.h"
#include "pcgx/rulesets/rule_form.h"

namespace pcgx::rulegen {

namespace {

// Per candidate, the unsat core of the same rule in `previous` when each
// of its axioms is open to `axioms` with the digest `previous` records
// (empty otherwise).
std::vector<std::vector<std::string>> offered_cores(const Ruleset& candidates, const Ruleset& previous, const verify::AxiomSet& axioms) {
  std::map<std::string, std::string> now, then(previous.axiom_digests.begin(), previous.axiom_digests.end());
  for (const verify::AxiomInfo& a : axioms.axioms) now[a.name] = a.digest;
  std::unordered_map<std::string, const std::vector<std::string>*> by_content;
  for (const Rule& r : previous.rules) {
    if (!r.proof || r.proof->result != "proved" || r.proof->axioms.empty()) continue;
    const bool unchanged = std::all_of(r.proof->axioms.begin(), r.proof->axioms.end(), [&](const std::string& name) {
      const auto a = now.find(name), b = then.find(name);
      return a != now.end() && b != then.end() && a->second == b->second;
    });
    if (unchanged) by_content.emplace(rule_content(r), &r.proof->axioms);
  }
  std::vector<std::vector<std::string>> out(candidates.rules.size());
  for (size_t i = 0; i < candidates.rules.size(); ++i)
    if (const auto it = by_content.find(rule_content(candidates.rules[i])); it != by_content.end()) out[i] = *it->second;
  return out;
}

}  // namespace

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
  const std::vector<std::vector<std::string>> cores = o.previous ? offered_cores(out.candidates, *o.previous, axioms)
                                                                   : std::vector<std::vector<std::string>>(out.candidates.rules.size());
  for (const auto& core : cores) out.offered += !core.empty();
  if (o.previous) say("reusing: " + std::to_string(out.offered) + " candidates are rules of the earlier ruleset whose axioms are unchanged");
  const auto verdicts = verify::prove_all(out.candidates.rules, axioms, verify::ProverOptions{o.timeout_ms}, o.threads,
                                          [&](size_t n, size_t total) { say("verifying: " + std::to_string(n) + "/" + std::to_string(total)); },
                                          &cores);
  for (const auto& v : verdicts) out.reused += v.reused && v.check.holds;
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
