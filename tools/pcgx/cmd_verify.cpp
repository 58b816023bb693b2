// pcgx axioms check, pcgx verify
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/rulesets/numeric_check.h"
#include "pcgx/rulesets/rule_form.h"
#include "pcgx/verifier/batch.h"

namespace pcgx::cli {

void add_axioms_command(CLI::App& app) {
  auto* ax = app.add_subcommand("axioms", "Operator axioms");
  ax->require_subcommand(1);
  static std::vector<std::string> dir;
  static int attempts = verify::kDefaultAxiomInstances;
  auto* check = ax->add_subcommand("check", "Instantiate every axiom on random shapes and evaluate both sides; exit 1 on any mismatch");
  check->add_option("--axioms", dir, kAxiomsHelp);
  check->add_option("--instances", attempts, "distinct legal instances wanted per axiom")->capture_default_str()->check(positive());
  check->callback([] {
    const verify::AxiomSet set = verify::load_axioms(verify::axiom_search_path(dir));
    const auto rows = verify::check_axioms(set, attempts, verify::kAxiomCheckSeed);
    int bad = 0, untested = 0;
    std::cout << std::left << std::setw(34) << "axiom" << std::right << std::setw(8) << "tried" << std::setw(8) << "legal"
              << "  result\n";
    for (const auto& r : rows) {
      std::string result = r.mismatches          ? "MISMATCH"
                           : !r.unencoded.empty() ? "NO OPERATOR HAS SYMBOL '" + r.unencoded + "' (declare it in the registry entry's OpDef::smt, not in an axiom file)"
                           : r.legal == 0         ? "UNTESTED (no legal instance)"
                                                  : "ok";
      bad += r.mismatches > 0;
      untested += r.legal == 0;
      std::cout << std::left << std::setw(34) << r.name << std::right << std::setw(8) << r.tried << std::setw(8) << r.legal
                << "  " << result << "\n";
      if (r.mismatches) std::cout << "    counterexample: " << r.counterexample << "\n";
    }
    std::cout << rows.size() << " axioms (hash " << set.hash.substr(0, 16) << "): " << rows.size() - static_cast<size_t>(bad + untested)
              << " ok, " << bad << " wrong, " << untested << " untested\n";
    if (bad || untested) throw CLI::RuntimeError(1);
  });
}

void add_verify_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("verify", "Prove candidates against the axioms and write the proved ones as a ruleset; exit 1 when an axiom is refuted or an operator has no SMT encoding");
  static std::string file, out, report;
  static std::vector<std::string> dirs;
  static unsigned timeout_ms = 2000;
  static int threads = 0;
  cmd->add_option("CANDIDATES", file, "candidates (or ruleset) file")->required();
  cmd->add_option("--axioms", dirs, kAxiomsHelp);
  cmd->add_option("--timeout-ms", timeout_ms, "Z3 time limit per rule")->capture_default_str();
  cmd->add_option("--threads", threads, "worker threads (default: every core)");
  cmd->add_option("--report", report, "where to write the unproved candidates (default: OUT.unproved.txt)");
  cmd->add_option("-o,--output", out, "ruleset to write")->required();
  cmd->callback([] {
    const Ruleset in = load_ruleset(file);
    // Proofs use the axioms of the candidates' own operators alone.
    const verify::AxiomSet set = verify::axioms_for(verify::load_axioms(verify::axiom_search_path(dirs)), in);
    const auto start = std::chrono::steady_clock::now();
    const auto verdicts = verify::prove_all(in.rules, set, verify::ProverOptions{timeout_ms}, threads,
                                            [](size_t n, size_t total) { std::cerr << "verifying: " << n << "/" << total << "\n"; });
    const verify::ProvedSet result = verify::collect_proved(in, verdicts, set);
    const Ruleset& outset = result.ruleset;
    const std::string& unproved = result.unproved;
    const auto& tally = result.tally;
    // The report first, then the ruleset: a failing command leaves neither.
    const std::string report_path = report.empty() ? out + ".unproved.txt" : report;
    write_text_file_atomic(report_path, unproved);
    try {
      save_ruleset(outset, out);
    } catch (...) {
      std::error_code ec;
      std::filesystem::remove(report_path, ec);
      throw;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const auto& [k, v] : tally) std::cout << "  " << std::left << std::setw(36) << k << v << "\n";
    std::cout << "cross-check of the proved rules " << verify::to_string(verify::tally_degrees(verdicts)) << "\n";
    std::cout << std::fixed << std::setprecision(1) << "verified " << in.rules.size() << " candidates in " << secs << " s; wrote "
              << out << " (" << outset.rules.size() << " rules) and " << report_path << "\n";
    if (report_unencoded(result.unencoded) || result.refuted) throw CLI::RuntimeError(1);
  });
}

}  // namespace pcgx::cli
