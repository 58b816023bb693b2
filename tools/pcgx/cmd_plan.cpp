// pcgx plan check: a plan validated, lowered and priced, its derived
// communication listed; pcgx plan show: the plan a strategy amounts to
// (docs/plans.md).
#include <iostream>

#include "cli_common.h"
#include "plan_flags.h"
#include "print_plans.h"
#include "print_reports.h"
#include "pcgx/pcg/graph_json.h"  // write_text_file_atomic
#include "pcgx/runner/plan_request.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/user_plan.h"
#include "pcgx/runner/certify.h"

namespace pcgx::cli {
namespace {

// The certificate of a strategy's PCG (verifier/certificate.h), printed
// (print_certificate), with progress on standard error.
void certify_and_print(const Graph& strategy, const Graph* model, size_t substitutions, const std::vector<std::string>& axioms_dir, bool verbose,
                       const std::string& model_as = "") {
  const runner::CertifyReport rep = runner::certify_strategy(
      strategy, model, substitutions, axioms_dir,
      [](size_t n) {
        if (n % 50 == 0) std::cerr << "certifying: " << n << " claims put to Z3\n";
      },
      model_as);
  print_certificate(std::cout, rep, verbose);
}

void add_check(CLI::App& cmd) {
  auto* check = cmd.add_subcommand("check", "Validate a plan against a model, lower it, and print what each rule decides, the communication "
                                             "derived between the operators, the memory and the predicted and simulated time beside data parallelism and unity");
  static PlanFlags pf;
  static std::string out;
  static std::vector<std::string> axioms;
  static bool certify = false, verbose = false, no_unity = false;
  check->add_option("MODEL", pf.model, "zoo model name or graph JSON file")->required();
  check->add_option("PLAN", pf.plan, "plan file (pcgx.plan JSON)")->required();
  add_plan_model_options(check, pf);
  check->add_option("-o,--output", out, "also write the strategy (as pcgx optimize --plan -o does)");
  check->add_flag("--certify", certify, "prove with Z3, operator by operator at the plan's own shapes, that the strategy computes what the model "
                                         "computes; names what cannot be proved (docs/plans.md)");
  check->add_option("--axioms", axioms, std::string("with --certify: ") + kAxiomsHelp)->check(CLI::ExistingDirectory);
  check->add_flag("-v,--verbose", verbose, "with --certify: every claim and the axioms its proof used");
  check->add_flag("--no-unity", no_unity, "do not search the whole model with unity to print beside the plan (the search takes seconds to a minute "
                                          "on large models)");
  check->callback([] {
    std::shared_ptr<const search::UserPlan> p;
    const runner::OptimizeRequest q = plan_request(pf, p);
    const std::string& plan = pf.plan;
    const runner::PlanCheck c = runner::check_plan(q, !no_unity);  // (its errors before any output)
    print_plan_check(std::cout, plan, *p, c);
    print_optimize_report(std::cout, q, c.report, ReportDetail::kBelowPlanCheck);
    if (!no_unity) print_unity_beside(std::cout, c);
    if (certify) certify_and_print(c.report.file.strategy.graph, &c.planned, 0, axioms, verbose, c.planned_as);
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
  static std::string certified;
  static std::vector<std::string> cert_axioms;
  static bool cert_verbose = false;
  cert->add_option("STRATEGY", certified, "strategy file (pcgx optimize -o or plan check -o); exit 0 verified or not, 2 for a bad file")->required();
  cert->add_option("--axioms", cert_axioms, kAxiomsHelp)->check(CLI::ExistingDirectory);
  cert->add_flag("-v,--verbose", cert_verbose, "every claim and the axioms its proof used");
  cert->callback([] {
    const search::StrategyFile f = search::load_strategy(certified);
    std::cout << "strategy              " << certified << " (" << f.search << ", " << f.devices << " devices)\n";
    certify_and_print(f.strategy.graph, nullptr, f.applied.size(), cert_axioms, cert_verbose);
  });
  auto* show = cmd->add_subcommand("show", "The plan a strategy file amounts to, in the format `optimize --plan` reads");
  static std::string strategy, out;
  static std::vector<std::string> show_rulesets;
  show->add_option("STRATEGY", strategy, "strategy file (pcgx optimize -o)")->required();
  show->add_option("-o,--output", out, "write the plan here instead of printing it");
  show->add_option("--ruleset", show_rulesets, "the rulesets the strategy was searched with, where its algebraic rewrites are looked up "
                                               "(repeatable); default: every shipped ruleset")
      ->check(CLI::ExistingFile);
  show->callback([] {
    const search::StrategyFile f = search::load_strategy(strategy);
    search::RewritesLeftOut left_out;
    const search::UserPlan plan = runner::plan_of_strategy_file(f, strategy, show_rulesets, &left_out);
    if (left_out.total() > 0) {
      std::cerr << "note: of the " << f.applied.size() << " substitution(s) the strategy applies, the plan states " << plan.rewrites.size()
                << " (algebraic rules at named operators) and leaves out";
      if (left_out.parallel) std::cerr << " " << left_out.parallel << " with parallel operators (a plan derives its communication from its partitions)";
      if (left_out.unnamed) std::cerr << (left_out.parallel ? ";" : "") << " " << left_out.unnamed << " at operators without names";
      if (left_out.unknown)
        std::cerr << (left_out.parallel || left_out.unnamed ? ";" : "") << " " << left_out.unknown
                  << " whose rules are in none of the rulesets read (--ruleset: the ones it was searched with)";
      std::cerr << ": fed back, it may be priced differently\n";
    }
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
