#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli_common.h"
#include "pcgx/generator/generate.h"
#include "pcgx/pcg/error.h"

namespace pcgx::cli {

namespace {

std::vector<int64_t> parse_degrees(const std::string& list) {
  std::vector<int64_t> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_int(item, "--degrees " + list + ":"));
  return out;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Enumerate small PCGs, fingerprint them and write candidate substitutions");
  static std::string opset = "unity", ops, degrees = "2", out;
  static int max_ops = 3, ndims = 0, threads = 0;
  static uint64_t seed = 1;
  cmd->add_option("--opset", opset, opset_help())->capture_default_str();
  cmd->add_option("--ops", ops, "explicit operators instead of --opset, e.g. 'Linear(activation=none|relu),Relu,Repartition'");
  cmd->add_option("--max-ops", max_ops, "operators per graph (0-4)")->capture_default_str();
  cmd->add_option("--degrees", degrees, "parallel degrees, comma-separated")->capture_default_str();
  cmd->add_option("--ndims", ndims, "rank of the activation tensors (default: the opset's, 3; conv 4)")->check(positive());
  cmd->add_option("--threads", threads, "worker threads (default: every core); the output does not depend on it");
  cmd->add_option("--seed", seed, "seed of the fingerprint inputs")->capture_default_str();
  cmd->add_option("-o,--output", out, "candidates file to write")->required();
  cmd->callback([] {
    gen::GeneratorConfig c;
    c.opset = ops.empty() ? gen::resolve_opset(opset) : gen::parse_ops(ops);
    c.max_ops = max_ops;
    c.degrees = parse_degrees(degrees);
    c.ndims = ndims > 0 ? ndims : c.opset.default_ndims;
    if (threads < 0) throw Error("--threads " + std::to_string(threads) + ": must not be negative");
    if (threads > 1024) throw Error("--threads " + std::to_string(threads) + ": at most 1024");
    c.threads = threads;
    c.seed = seed;
    gen::GenerateReport rep;
    const Ruleset r = gen::generate(c, rep, [](const std::string& s) { std::cerr << s << "\n"; });
    save_ruleset(r, out);
    const auto& k = rep.counts;
    std::cout << "opset " << c.opset.name << ", max-ops " << c.max_ops << ", degrees " << degrees << ", ndims " << c.ndims
              << ", dimension size " << c.base_size() << "\n";
    auto row = [](const std::string& what, uint64_t n) {
      std::cout << "  " << std::left << std::setw(40) << what << std::right << std::setw(12) << n << "\n";
    };
    row("graphs enumerated", k.graphs);
    row("distinct fingerprints", k.fingerprints);
    row("fingerprints shared by 2+ graphs", k.classes);
    row("raw pairs", k.raw_pairs);
    row("after pruning common subgraphs", k.after_common_subgraph);
    row("after pruning input renamings", k.after_renaming);
    row("after pruning implied candidates", k.after_implied);
    std::printf("time: enumeration %.1f s, pairing and pruning %.1f s; peak RSS %.0f MiB\n", rep.enumerate_seconds,
                rep.prune_seconds, static_cast<double>(rep.peak_rss_kb) / 1024.0);
    std::cout << "wrote " << out << " (" << r.rules.size() << " candidates)\n";
  });
}

}  // namespace pcgx::cli
