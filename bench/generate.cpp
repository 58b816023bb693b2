// `pcgx generate --opset unity --max-ops 3`: graphs per second and total
// time, on every core and on one (the baseline, same run), and the output
// compared byte for byte. Goal: under 60 s on this 2-core machine.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "pcgx/generator/generate.h"

int main(int argc, char** argv) {
  const int max_ops = argc > 1 ? std::atoi(argv[1]) : 3;
  auto run = [&](int threads, std::string& json) {
    pcgx::gen::GeneratorConfig c;
    c.opset = pcgx::gen::find_opset("unity");
    c.max_ops = max_ops;
    c.threads = threads;
    pcgx::gen::GenerateReport rep;
    const auto t0 = std::chrono::steady_clock::now();
    const pcgx::Ruleset r = pcgx::gen::generate(c, rep);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    json = pcgx::ruleset_to_json(r);
    std::printf("threads %-3s graphs %9llu  enumeration %6.1f s  pruning %6.1f s  total %6.1f s  %9.0f graphs/s  candidates %zu\n",
                threads == 0 ? "all" : std::to_string(threads).c_str(), static_cast<unsigned long long>(rep.counts.graphs),
                rep.enumerate_seconds, rep.prune_seconds, secs, static_cast<double>(rep.counts.graphs) / rep.enumerate_seconds,
                r.rules.size());
    return secs;
  };
  std::printf("unity opset, max-ops %d, degree 2, ndims 3\n", max_ops);
  std::string all_json, one_json;
  const double all = run(0, all_json);
  const double one = run(1, one_json);
  std::printf("speedup all cores / one core: %.2fx; outputs identical: %s\n", one / all, all_json == one_json ? "yes" : "NO");
  std::printf("goal: under 60 s -> %s (%.1f s)\n", all < 60.0 ? "met" : "MISSED", all);
  std::printf("peak RSS %.0f MiB\n", static_cast<double>(pcgx::gen::peak_rss_kb()) / 1024.0);
  return all_json == one_json ? 0 : 1;
}
