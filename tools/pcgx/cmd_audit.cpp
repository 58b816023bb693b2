// pcgx audit: re-check a rule database: its content hash, a proof of every
// rule, and evaluation of every rule; or classify a legacy database.
#include <iomanip>
#include <iostream>
#include <map>

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/rulesets/legacy_flexflow.h"
#include "pcgx/rulesets/rule_form.h"
#include "pcgx/verifier/audit.h"

namespace pcgx::cli {

void add_audit_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("audit", "Check a ruleset's hash, re-prove and re-evaluate every rule; exit 1 if anything fails");
  static std::string file, format = "pcgx", dims = "forward";
  static std::vector<std::string> dir;
  static unsigned timeout_ms = 2000;
  static int threads = 0;
  static bool list = false;
  cmd->add_option("RULESET", file, "ruleset file (or a legacy FlexFlow file with --format flexflow)")->required();
  cmd->add_option("--format", format, "pcgx or flexflow")->capture_default_str();
  cmd->add_option("--axioms", dir, kAxiomsHelp);
  cmd->add_option("--dims", dims, "legacy dimension numbering: forward or reversed")->capture_default_str();
  cmd->add_option("--timeout-ms", timeout_ms, "Z3 time limit per rule")->capture_default_str();
  cmd->add_option("--threads", threads, "worker threads (default: every core)");
  cmd->add_flag("--list", list, "print every rule's verdict");
  cmd->callback([] {
    const RuleFormat rule_format = parse_rule_format(format);
    const LegacyDims legacy_dims = parse_dims(dims);
    const verify::AxiomSet axioms = verify::load_axioms(verify::axiom_search_path(dir));
    auto progress = [](size_t n, size_t total) { std::cerr << "auditing: " << n << "/" << total << "\n"; };
    std::map<std::string, int> tally;
    bool failed = false;
    if (rule_format == RuleFormat::kPcgx) {
      const Ruleset r = load_ruleset(file);
      const verify::AuditResult a = verify::audit_ruleset(r, axioms, verify::ProverOptions{timeout_ms}, threads, progress);
      std::cout << "content hash   " << (a.hash_ok ? "ok" : "MISMATCH: stored " + r.stored_hash + ", content " + r.computed_hash) << "\n";
      std::cout << "axioms         " << (a.same_axioms ? "the ones it was proved with" : "changed since it was proved (re-proving now)") << "\n";
      failed = a.failed();
      const auto& verdicts = a.verdicts;
      for (size_t i = 0; i < r.rules.size(); ++i) {
        const verify::RuleAudit& ra = a.rules[i];
        ++tally[ra.verdict];
        if (ra.verdict != "ok") {
          std::cout << "FAIL " << r.rules[i].id << ": " << ra.verdict << ": " << ra.detail << "\n    " << rule_text(r.rules[i]) << "\n";
        } else if (list) {
          const auto d = verdicts[i].check.at_degree_4;
          std::cout << "ok   " << r.rules[i].id << " (" << verdicts[i].proof.axioms.size() << " axioms"
                    << (d == DegreeCheck::kHolds ? "; holds at degree 4" : d == DegreeCheck::kDegreeSpecific ? "; degree-specific" : "")
                    << ")  " << rule_text(r.rules[i]) << "\n";
        }
      }
      std::cout << "cross-check " << verify::to_string(verify::tally_degrees(verdicts)) << "\n";
    } else {
      const LegacyImport li = import_flexflow(read_text_file(file), file, legacy_dims);
      const auto verdicts = verify::prove_all(li.rules.rules, axioms, verify::ProverOptions{timeout_ms}, threads, progress);
      for (const LegacyRule& lr : li.legacy) {
        std::string verdict, detail;
        if (!lr.expressible) {
          verdict = "not expressible", detail = lr.reason;
        } else {
          const Rule& rule = li.rules.rules[static_cast<size_t>(lr.index)];
          const auto& v = verdicts[static_cast<size_t>(lr.index)];
          const NumericCheck check = v.proof.result == verify::Result::kUnsat ? v.check : check_numerically(rule);
          if (!check.holds) {
            verdict = "refuted", detail = check.counterexample + "\n    " + rule_text(rule);
          } else if (v.proof.result == verify::Result::kUnsat) {
            verdict = "proved", detail = std::to_string(v.proof.axioms.size()) + " axioms";
          } else {
            verdict = "holds numerically, not proved", detail = v.proof.reason + "\n    " + rule_text(rule);
          }
        }
        ++tally[verdict];
        failed = failed || verdict != "proved";
        if (list || verdict == "refuted") std::cout << lr.name << ": " << verdict << ": " << detail << "\n";
      }
    }
    std::cout << "\nsummary\n";
    for (const auto& [k, v] : tally) std::cout << "  " << std::left << std::setw(34) << k << v << "\n";
    if (failed) throw CLI::RuntimeError(1);
  });
}

}  // namespace pcgx::cli
