// pcgx regenerate: flags into a rulegen::RegenerateRequest, one
// regenerate_into call, the report printed.
#include <iomanip>
#include <iostream>

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/resources.h"
#include "pcgx/rulegen/regenerate_into.h"

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
    if (out_dir.empty()) throw Error("--out-dir: required with an installed pcgx (its shipped rulesets are pinned by content hash)");
    if (no_reuse && !reuse.empty()) throw Error("--reuse " + reuse + ": not with --no-reuse");
    name_flags({{"RegenerateRequest.out_dir", "--out-dir"}, {"RegenerateRequest.version", "--version"}, {"RegenerateRequest.reuse none", "--no-reuse"}});
    rulegen::RegenerateRequest q;
    q.options.opset = ops.empty() ? gen::resolve_opset(opset) : gen::parse_ops(ops);
    q.options.max_ops = max_ops, q.options.threads = threads, q.options.timeout_ms = timeout_ms;
    q.options.progress = [](const std::string& s) { std::cerr << s << "\n"; };
    q.axiom_dirs = dir, q.out_dir = out_dir, q.version = version;
    q.reuse = no_reuse ? rulegen::RegenerateRequest::Reuse::kNone
                       : reuse.empty() ? rulegen::RegenerateRequest::Reuse::kReplaced : rulegen::RegenerateRequest::Reuse::kFile;
    q.reuse_file = reuse;
    q.command = "pcgx regenerate " + (ops.empty() ? "--opset " + opset : "--ops '" + ops + "'") + " --max-ops " + std::to_string(max_ops) +
                " --version " + std::to_string(version);
    const rulegen::RegenerateReport rep = rulegen::regenerate_into(std::move(q));
    const rulegen::Regenerated& out = rep.result;
    const Ruleset& r = out.proved.ruleset;
    std::cout << "candidates " << out.candidates.rules.size() << ", proved " << r.rules.size() << " (generation " << std::fixed
              << std::setprecision(1) << out.generate_seconds << " s, verification " << out.verify_seconds << " s); the proofs use "
              << r.axiom_digests.size() << " of the " << out.axioms << " axioms open to them (MANIFEST.json records those used)\nwrote "
              << rep.path << " (" << rep.content_hash << ") and " << rep.manifest << "\n";
    if (!rep.reused_from.empty())
      std::cout << "reused " << out.reused << " proofs of " << rep.reused_from << " (each proved again by its stored unsat core alone; "
                << out.offered - out.reused << " of the " << out.offered << " offered needed a new proof); proved "
                << r.rules.size() - out.reused << " anew\n";
    if (report_unencoded(out.proved.unencoded)) throw CLI::RuntimeError(1);
  });
}

}  // namespace pcgx::cli
