// How `pcgx plan check` and `pcgx plan certify` print their reports (print_plans.h).
#include "print_plans.h"

#include <iomanip>

#include "cli_common.h"

namespace pcgx::cli {

void print_plan_check(std::ostream& out, const std::string& path, const search::UserPlan& plan, const runner::PlanCheck& c) {
  out << "plan                  " << path << (plan.description.empty() ? "" : ": " + plan.description) << "\n";
  for (size_t r = 0; r < plan.rules.size(); ++r) {
    const int64_t k = c.decisions.per_rule[r];
    out << "  rules[" << r << "]" << std::string(r < 10 ? 9 : 8, ' ') << "decides " << k << " of the " << c.decisions.operators
              << " operators"
              << (k > 0                                       ? ""
                  : c.decisions.whole_batch_norm_parts.at(r) ? " (it selects statistics parts of BatchNorms that run whole)"
                                                              : " (later rules override it everywhere)")
              << "\n";
  }
  const int64_t one = c.decisions.one_task, rest = c.decisions.unstated;
  auto ops = [](int64_t n) { return std::to_string(n) + (n == 1 ? " operator" : " operators"); };
  if (c.report.file.search == "unity")
    out << "  searched            " << ops(rest) << " (no rule selects them: unity chose how they run)\n"
        << "  one task            " << ops(one - rest) << " ({})\n";
  else
    out << "  one task            " << ops(one) << " (no rule, or {})\n";
  const std::vector<search::DerivedMove>& moves = c.communication;
  double total = 0;
  for (const auto& d : moves) total += d.time.total();
  out << "communication derived " << moves.size() << " layout changes of activations, " << std::fixed << std::setprecision(3)
            << total * 1e3 << " ms per step in all (forward and backward, before overlap); the costliest:\n";
  for (size_t k = 0; k < moves.size() && k < 12; ++k) {
    const auto& d = moves[k];
    out << "  " << std::left << std::setw(15) << d.what << std::right << " on " << d.devices << " devices, " << human_bytes(d.bytes)
              << " a device, " << std::setprecision(3) << d.time.total() * 1e3 << " ms: " << (d.from.empty() ? "?" : d.from) << " -> "
              << (d.to.empty() ? "(the step's output)" : d.to) << "\n";
  }
  if (moves.size() > 12) out << "  ... and " << moves.size() - 12 << " more\n";
  const auto& relaid = c.report.result.search.relaid;
  if (relaid.empty()) return;
  out << "layout search         " << relaid.size() << (relaid.size() == 1 ? " conversion" : " conversions")
      << " rewritten as a cheaper sequence of parallel operators (forward and backward, as the cost model prices them"
      << (c.report.pipelined ? "; each on its chunk's whole batch at once, kept where the chunk in its micro-batches runs faster" : "")
      << "):\n";
  for (size_t k = 0; k < relaid.size() && k < 12; ++k) {
    const auto& r = relaid[k];
    out << "  " << r.from << " -> " << r.to << ": " << r.after << " (" << std::setprecision(3) << r.after_time.total() * 1e3 << " ms) for "
        << r.before << " (" << r.before_time.total() * 1e3 << " ms; sending every block straight: " << r.naive_time.total() * 1e3 << " ms)\n";
  }
  if (relaid.size() > 12) out << "  ... and " << relaid.size() - 12 << " more\n";
}

void print_unity_beside(std::ostream& out, const runner::PlanCheck& c) {
  if (!c.unity) {
    out << "unity                 no plan: " << c.unity_error << "\n";
    return;
  }
  const search::Estimate& plan = c.report.result.search.strategy.estimate;
  out << "unity                 " << std::fixed << std::setprecision(3) << c.unity_time * 1e3 << " ms" << (c.unity_simulated ? " simulated" : "")
      << " (the whole model searched in " << std::setprecision(2) << c.unity_seconds << " s)";
  if (plan.feasible) out << "; the plan takes " << plan.time / c.unity_time << "x unity's time";
  out << "\n";
}

void print_certificate(std::ostream& out, const runner::CertifyReport& rep, bool verbose) {
  const verify::Certificate& c = rep.certificate;
  int64_t proved = 0;
  for (const auto& claim : c.claims) proved += claim.proved();
  out << "certificate           " << (c.verified() ? "verified" : "UNVERIFIED") << ": " << proved << " of " << c.claims.size()
            << " distinct claims proved by Z3 at the plan's shapes, standing for " << c.operators << " operators and " << c.conversions
            << " conversions (" << std::fixed << std::setprecision(2) << c.seconds << " s; axioms " << rep.axioms_hash.substr(0, 12) << ")\n";
  out << "  operators           " << rep.operators << "\n";
  if (verbose)
    for (const auto& claim : c.claims) {
      out << "  " << std::left << std::setw(15) << claim.rule.id << std::right << " " << (claim.proved() ? "proved " : "NOT    ") << claim.what;
      if (claim.nodes.size() > 1) out << " (and " << claim.nodes.size() - 1 << " more like it)";
      out << "\n";
      if (claim.proved() && !claim.proof.axioms.empty()) {
        out << "                  by";
        for (const auto& a : claim.proof.axioms) out << " " << a;
        out << "\n";
      }
    }
  for (const auto& u : c.unverified) out << "  unverified: " << u << "\n";
}

}  // namespace pcgx::cli
