// pcgx regenerate: rulegen::regenerate, then the ruleset, its unproved list
// and its manifest entry written.
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/resources.h"
#include "pcgx/rulegen/regenerate.h"

namespace pcgx::cli {

void add_regenerate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("regenerate", "Generate and verify a ruleset; write rulesets/<opset>-v<N>.json and MANIFEST.json");
  // A build regenerates its source tree's rulesets by default; an installed
  // pcgx's are pinned by content hash and are not rewritten.
  static std::string opset = "unity", ops, out_dir = installed() ? std::string() : shipped_dir(Shipped::kRulesets), reuse;
  static bool no_reuse = false;
  static std::vector<std::string> dir;
  static int max_ops = 3, version = 1, threads = 0;
  static unsigned timeout_ms = 2000;
  cmd->add_option("--opset", opset, opset_help())->capture_default_str();
  cmd->add_option("--ops", ops, "explicit operators instead of --opset (as pcgx generate takes them); writes custom-v<N>.json");
  cmd->add_option("--max-ops", max_ops, "operators per graph")->capture_default_str();
  cmd->add_option("--version", version, "ruleset version N in <opset>-v<N>.json")->capture_default_str();
  cmd->add_option("--out-dir", out_dir, "where rulesets live")->capture_default_str();
  cmd->add_option("--axioms", dir, kAxiomsHelp);
  cmd->add_option("--timeout-ms", timeout_ms, "Z3 time limit per rule")->capture_default_str();
  cmd->add_option("--threads", threads, "worker threads (default: every core); the output does not depend on it");
  cmd->add_option("--reuse", reuse,
                  "reuse the proofs of this earlier ruleset (default: the one being replaced, <out-dir>/<opset>-v<N>.json, if it exists): a "
                  "candidate that is one of its rules, whose unsat core's axioms are unchanged, is proved again with that core alone");
  cmd->add_flag("--no-reuse", no_reuse, "prove every candidate from all the axioms");
  cmd->callback([] {
    namespace fs = std::filesystem;
    if (version < 1) throw Error("--version " + std::to_string(version) + ": must be positive");
    if (out_dir.empty()) throw Error("--out-dir: required with an installed pcgx (its shipped rulesets are pinned by content hash)");
    if (!fs::is_directory(out_dir)) throw Error("--out-dir " + out_dir + ": not a directory");
    rulegen::RegenerateOptions o;
    o.opset = ops.empty() ? gen::resolve_opset(opset) : gen::parse_ops(ops);
    o.max_ops = max_ops, o.threads = threads, o.timeout_ms = timeout_ms;
    o.progress = [](const std::string& s) { std::cerr << s << "\n"; };
    const std::string base = o.opset.name + "-v" + std::to_string(version);
    const fs::path path = fs::path(out_dir) / (base + ".json");
    if (no_reuse && !reuse.empty()) throw Error("--reuse " + reuse + ": not with --no-reuse");
    std::optional<Ruleset> previous;
    try {
      if (!reuse.empty()) previous = load_ruleset(reuse);
      else if (!no_reuse && fs::exists(path)) previous = load_ruleset(path.string());
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (the ruleset whose proofs would be reused; --no-reuse proves every candidate without it)");
    }
    if (previous) o.previous = &*previous;
    rulegen::Regenerated out = rulegen::regenerate(o, verify::load_axioms(verify::axiom_search_path(dir)));
    const gen::Opset& opset_used = o.opset;
    const Ruleset& cands = out.candidates;
    const double gen_s = out.generate_seconds, ver_s = out.verify_seconds;
    verify::ProvedSet& result = out.proved;
    Ruleset& r = result.ruleset;
    r.version = version;
    const std::string& unproved = result.unproved;
    save_ruleset(r, path.string());
    write_text_file_atomic((fs::path(out_dir) / (base + ".unproved.txt")).string(), unproved);
    // The manifest: one entry per shipped ruleset.
    const fs::path manifest = fs::path(out_dir) / "MANIFEST.json";
    nlohmann::json m = fs::exists(manifest) ? nlohmann::json::parse(read_text_file(manifest.string())) : nlohmann::json::object();
    const Ruleset written = load_ruleset(path.string());
    m["format_version"] = 1;
    m["rulesets"][base] = {{"file", base + ".json"},
                           {"name", r.name},
                           {"version", version},
                           {"opset", opset_used.name},
                           {"candidates", cands.rules.size()},
                           {"rules", r.rules.size()},
                           {"content_hash", written.stored_hash},
                           {"axioms_hash", r.axioms_hash},
                           {"axioms", r.axiom_digests.size()},
                           {"generator", nlohmann::json::parse(r.generator_json)},
                           {"command", "pcgx regenerate " + (ops.empty() ? "--opset " + opset : "--ops '" + ops + "'") + " --max-ops " + std::to_string(max_ops) +
                                           " --version " + std::to_string(version)},
                           {"seconds", {{"generate", gen_s}, {"verify", ver_s}}}};
    write_text_file_atomic(manifest.string(), m.dump(2) + "\n");
    std::cout << "candidates " << cands.rules.size() << ", proved " << r.rules.size() << " (generation " << std::fixed
              << std::setprecision(1) << gen_s << " s, verification " << ver_s << " s); the proofs use " << r.axiom_digests.size() << " of the "
              << out.axioms << " axioms open to them (MANIFEST.json records those used)\nwrote " << path.string() << " ("
              << written.stored_hash << ") and " << manifest.string() << "\n";
    if (previous)
      std::cout << "reused " << out.reused << " proofs of " << (reuse.empty() ? path.string() : reuse) << " (each proved again by its stored unsat core alone; "
                << out.offered - out.reused << " of the " << out.offered << " offered needed a new proof); proved "
                << r.rules.size() - out.reused << " anew\n";
    if (report_unencoded(result.unencoded)) throw CLI::RuntimeError(1);
  });
}

}  // namespace pcgx::cli
