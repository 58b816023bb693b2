// pcgx plan check: a plan validated, lowered and priced, its derived
// communication listed; pcgx plan show: the plan a strategy amounts to
// (docs/plans.md).
#include <iomanip>
#include <iostream>

#include "cli_common.h"
#include "plan_flags.h"
#include "print_reports.h"
#include "pcgx/pcg/graph_json.h"  // write_text_file_atomic
#include "pcgx/runner/plan_request.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/user_plan.h"
#include "pcgx/runner/certify.h"

namespace pcgx::cli {
namespace {

// The certificate of a strategy's PCG (verifier/certificate.h), printed:
// its verdict, what each claim stood for with `verbose`, every claim not
// proved or not claimable, and whether the operators proved are the
// model's (compared where the model is at hand; else what vouches for them).
void certify_and_print(const Graph& strategy, const Graph* model, size_t substitutions, const std::string& axioms_dir, bool verbose) {
  const runner::CertifyReport rep = runner::certify_strategy(strategy, model, substitutions, axioms_dir, [](size_t n) {
    if (n % 50 == 0) std::cerr << "certifying: " << n << " claims put to Z3\n";
  });
  const verify::Certificate& c = rep.certificate;
  int64_t proved = 0;
  for (const auto& claim : c.claims) proved += claim.proved();
  std::cout << "certificate           " << (c.verified() ? "verified" : "UNVERIFIED") << ": " << proved << " of " << c.claims.size()
            << " distinct claims proved by Z3 at the plan's shapes, standing for " << c.operators << " operators and " << c.conversions
            << " conversions (" << std::fixed << std::setprecision(2) << c.seconds << " s; axioms " << rep.axioms_hash.substr(0, 12) << ")\n";
  std::cout << "  operators           " << rep.operators << "\n";
  if (verbose)
    for (const auto& claim : c.claims) {
      std::cout << "  " << std::left << std::setw(15) << claim.rule.id << std::right << " " << (claim.proved() ? "proved " : "NOT    ") << claim.what;
      if (claim.nodes.size() > 1) std::cout << " (and " << claim.nodes.size() - 1 << " more like it)";
      std::cout << "\n";
      if (claim.proved() && !claim.proof.axioms.empty()) {
        std::cout << "                  by";
        for (const auto& a : claim.proof.axioms) std::cout << " " << a;
        std::cout << "\n";
      }
    }
  for (const auto& u : c.unverified) std::cout << "  unverified: " << u << "\n";
}

void add_check(CLI::App& cmd) {
  auto* check = cmd.add_subcommand("check", "Validate a plan against a model, lower it, and print what each rule decides, the communication "
                                             "derived between the operators, the memory and the predicted and simulated time beside data parallelism");
  static PlanFlags pf;
  static std::string out, axioms;
  static bool certify = false, verbose = false;
  check->add_option("MODEL", pf.model, "zoo model name or graph JSON file")->required();
  check->add_option("PLAN", pf.plan, "plan file (pcgx.plan JSON)")->required();
  add_plan_model_options(check, pf);
  check->add_option("-o,--output", out, "also write the strategy (as pcgx optimize --plan -o does)");
  check->add_flag("--certify", certify, "prove with Z3, operator by operator at the plan's own shapes, that the strategy computes what the model "
                                         "computes; names what cannot be proved (docs/plans.md)");
  check->add_option("--axioms", axioms, "with --certify: axiom directory (default: the shipped axioms)")->check(CLI::ExistingDirectory);
  check->add_flag("-v,--verbose", verbose, "with --certify: every claim and the axioms its proof used");
  check->callback([] {
    std::shared_ptr<const search::UserPlan> p;
    const runner::OptimizeRequest q = plan_request(pf, p);
    const std::string& plan = pf.plan;
    const runner::PlanCheck c = runner::check_plan(q);  // (its errors before any output)
    std::cout << "plan                  " << plan << (p->description.empty() ? "" : ": " + p->description) << "\n";
    for (size_t r = 0; r < p->rules.size(); ++r) {
      const int64_t k = c.decisions.per_rule[r];
      std::cout << "  rules[" << r << "]" << std::string(r < 10 ? 9 : 8, ' ') << "decides " << k << " of the " << c.decisions.operators
                << " operators" << (k == 0 ? " (later rules override it everywhere)" : "") << "\n";
    }
    const int64_t one = c.decisions.one_task;
    std::cout << "  one task            " << one << (one == 1 ? " operator" : " operators") << " (no rule, or {})\n";
    const std::vector<search::DerivedMove>& moves = c.communication;
    double total = 0;
    for (const auto& d : moves) total += d.time.total();
    std::cout << "communication derived " << moves.size() << " layout changes of activations, " << std::fixed << std::setprecision(3)
              << total * 1e3 << " ms per step in all (forward and backward, before overlap); the costliest:\n";
    for (size_t k = 0; k < moves.size() && k < 12; ++k) {
      const auto& d = moves[k];
      std::cout << "  " << std::left << std::setw(15) << d.what << std::right << " on " << d.devices << " devices, " << human_bytes(d.bytes)
                << " a device, " << std::setprecision(3) << d.time.total() * 1e3 << " ms: " << (d.from.empty() ? "?" : d.from) << " -> "
                << (d.to.empty() ? "(the step's output)" : d.to) << "\n";
    }
    if (moves.size() > 12) std::cout << "  ... and " << moves.size() - 12 << " more\n";
    print_optimize_report(std::cout, q, c.report, true);
    if (certify) certify_and_print(c.report.file.strategy.graph, &q.model, c.report.file.applied.size(), axioms, verbose);
    if (!out.empty()) {
      search::save_strategy(c.report.file, out);
      std::cerr << "wrote " << out << "\n";
    }
  });
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Plans written by hand (docs/plans.md): `plan check MODEL PLAN` validates and prices one, "
                                         "`plan show STRATEGY` prints the plan a strategy amounts to, `plan certify STRATEGY` proves it");
  cmd->require_subcommand(1);
  add_check(*cmd);
  auto* cert = cmd->add_subcommand("certify", "Prove with Z3 that a strategy file (pcgx optimize -o, or a plan's) computes what its model "
                                              "computes, operator by operator at its own shapes; names what cannot be proved");
  static std::string certified, cert_axioms;
  static bool cert_verbose = false;
  cert->add_option("STRATEGY", certified, "strategy file (pcgx optimize -o or plan check -o); exit 0 verified or not, 2 for a bad file")->required();
  cert->add_option("--axioms", cert_axioms, "axiom directory (default: the shipped axioms)")->check(CLI::ExistingDirectory);
  cert->add_flag("-v,--verbose", cert_verbose, "every claim and the axioms its proof used");
  cert->callback([] {
    const search::StrategyFile f = search::load_strategy(certified);
    std::cout << "strategy              " << certified << " (" << f.search << ", " << f.devices << " devices)\n";
    certify_and_print(f.strategy.graph, nullptr, f.applied.size(), cert_axioms, cert_verbose);
  });
  auto* show = cmd->add_subcommand("show", "The plan a strategy file amounts to, in the format `optimize --plan` reads");
  static std::string strategy, out;
  show->add_option("STRATEGY", strategy, "strategy file (pcgx optimize -o)")->required();
  show->add_option("-o,--output", out, "write the plan here instead of printing it");
  show->callback([] {
    const search::StrategyFile f = search::load_strategy(strategy);
    search::UserPlan plan = search::plan_of_strategy(f.strategy.graph);
    plan.description = "what " + strategy + " (" + f.search + ", " + std::to_string(f.devices) + " devices) runs";
    if (!f.applied.empty())
      std::cerr << "note: the strategy applies " << f.applied.size()
                << " substitution(s); a plan states how the model's own operators run, so those are not in it\n";
    // The recipe it trains with, so that fed back it trains the same way.
    plan.precision = f.recipe.precision, plan.recompute = f.recipe.recompute, plan.zero = f.recipe.zero;
    if (f.recipe.recompute_layers != kAllLayers) plan.recompute_layers = f.recipe.recompute_layers;
    if (const auto shape = search::pipeline_shape(f))
      plan.pipeline = search::pipeline_of_strategy(f.strategy.graph, f.strategy.views, f.devices, *shape);
    const std::string text = search::plan_to_json(plan);
    if (out.empty()) {
      std::cout << text;
      return;
    }
    write_text_file_atomic(out, text);
    std::cerr << "wrote " << out << " (" << plan.rules.size() << (plan.rules.size() == 1 ? " rule" : " rules") << ")\n";
  });
}

}  // namespace pcgx::cli
