// Loading and validating a model's PCG from JSON (parse, operator lookup,
// attribute checks, shape and degree inference for every node), against the
// bare JSON parse of the same text as the baseline. Goal: BERT-Large in
// under 50 ms.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_util.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/zoo.h"

int main(int argc, char** argv) {
  const std::vector<std::string> models = argc > 1 ? std::vector<std::string>(argv + 1, argv + argc)
                                                   : std::vector<std::string>{"bert-large", "inception-v3", "dlrm"};
  const int repeats = 21;
  std::printf("%-14s %7s %10s %12s %14s %10s %8s\n", "model", "nodes", "build ms", "json parse ms",
              "load+valid ms", "ratio", "goal");
  bool ok = true;
  for (const auto& name : models) {
    pcgx::Graph g;
    const double build = pcgx::bench::median_ms(repeats, [&] { g = pcgx::build_model(name); });
    const std::string text = pcgx::graph_to_json(g);
    size_t sink = 0;
    const double parse = pcgx::bench::median_ms(repeats, [&] { sink += nlohmann::json::parse(text).size(); });
    const double load = pcgx::bench::median_ms(repeats, [&] { sink += pcgx::graph_from_json(text, name).size(); });
    const bool pass = name != "bert-large" || load < 50.0;
    ok = ok && pass;
    std::printf("%-14s %7zu %10.2f %12.2f %14.2f %9.2fx %8s\n", name.c_str(), g.size(), build, parse, load,
                load / parse, name == "bert-large" ? (pass ? "<50ms ok" : "MISSED") : "-");
    if (sink == 0) std::printf("(empty)\n");
  }
  std::printf("ratio = load+validate time / bare JSON parse time of the same text (median of %d runs)\n", repeats);
  return ok ? 0 : 1;
}
