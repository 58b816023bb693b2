// The search on the zoo models on DGX-H100 nodes (issue 5's table): per
// model and device count, the search time of `unity` and the predicted
// iteration time of `unity`, `data-parallel`, `expert` (where it applies)
// and `sequential`, with each baseline's time over unity's (> 1: unity is
// faster), the devices unity's plan computes on, the share of its
// iteration a device spends idle on average (waiting included), and which
// finalist the simulator chose as unity's result (final_ranking.h). Goals
// checked: unity's search under 60 s, unity never predicted slower than a
// baseline, a strict win over data parallelism for DLRM, XDL, CANDLE-Uno
// and the 8192-wide MLP, and no plan that leaves most devices unused
// unless it is strictly faster than data parallelism and the expert's
// plan, which use every device. A second table gives the search time against the device count.
//
// With --pipeline, a last column gives the best pipelined strategy
// (pipeline.h, unity inside every stage), stages x micro-batches, and its
// search time; pipelining is an option, not a baseline, so no goal reads it.
//
// With --mcmc, FlexFlow's MCMC (mcmc_search.h, --proposals of them) runs
// too, and both unity's plan and mcmc's are costed by the execution
// simulator (simulator.h), which is what mcmc optimizes: the columns give
// both simulated times, mcmc's search time and mcmc / unity (> 1: unity's
// plan is faster in simulation). Reported, not a goal: mcmc may win by
// placing operators the DP's resource ranges cannot express.
//
// With --autoddl, AutoDDL's coordinate descent (autoddl_search.h,
// --evaluations PCGs costed in all) runs too: its plan's DP prediction and
// simulated time, its search time, and its simulated time over unity's
// (> 1: unity's plan is faster in simulation). Reported, not a goal.
//
// With --machine NAME, another machine than dgx-h100 (the device counts
// must fit it: selene's 384 DGX A100 nodes hold 3,072 GPUs); a count above
// the machine's is refused, not skipped.
//
// With --gaps, only the small graphs where `--search exhaustive` finishes
// (the 1- and 2-layer MLPs on 2 to 8 devices): each algorithm's gap to
// the exhaustive optimum, predicted by the DP (what exhaustive and unity
// minimize) and simulated (what mcmc minimizes).
//
// Usage: bench_search [--devices 8,64,192] [--budget N] [--split K] [--pipeline]
//                     [--mcmc] [--proposals N] [--autoddl] [--evaluations N]
//                     [--gaps] [MODEL...]
// (default: the nine full-size zoo models; the batch is the zoo's per-GPU
// batch times the device count, as `pcgx optimize` does).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/runner/model_source.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/timeline.h"
#include "pcgx/search/unity_search.h"

using namespace pcgx;

namespace {

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    out.push_back(std::stoll(s.substr(at, comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

struct Run {
  double time = 0;  // predicted iteration time (s), 0 when not applicable/infeasible
  double search = 0;
  double idle = 0;  // mean time a device is not busy (s)
  int64_t used = 0;  // devices running compute tasks
  double simulated = 0;  // the plan's simulated iteration time (s), with --mcmc
  std::string chosen;    // unity: the finalist chosen by simulation (final_ranking.h)
};

Run run(const Graph& g, const search::RuleLibrary& rules, const search::MachineMapper& mapper, search::SearchOptions o,
        search::Algorithm algorithm) {
  o.algorithm = algorithm;
  try {
    const search::SearchResult r = search::optimize(g, rules, mapper, o);
    if (!r.strategy.estimate.feasible) return {0, r.seconds, 0, 0, 0, ""};
    // A plan too large to simulate task by task (timeline.h) keeps its
    // prediction; its simulated time is left out (0), not the plan.
    double sim = 0;
    try {
      sim = search::Simulator(r.strategy.graph, r.strategy.views, mapper.cost()).time();
    } catch (const search::TooManyTasks&) {
    }
    const auto& ranked = r.ranking;
    return {r.strategy.estimate.time, r.seconds, r.strategy.estimate.idle, r.strategy.estimate.devices_used, sim,
            ranked.chosen >= 0 ? ranked.finalists[static_cast<size_t>(ranked.chosen)].label : ""};
  } catch (const Error&) {
    return {};
  }
}

std::string ratio(double base, double unity) {
  if (base <= 0 || unity <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", base / unity);
  return buf;
}

std::string ms(double s) {
  if (s <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s * 1e3);
  return buf;
}

// Gaps to the exhaustive optimum on graphs small enough for it.
int gaps(const search::RuleLibrary& rules, search::SearchOptions base) {
  std::printf("gap to the exhaustive optimum (dgx-h100); DP = predicted by the machine-mapping DP, sim = simulated; microseconds\n");
  auto us = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, s > 0 ? "%.1f" : "-", s * 1e6);
    return std::string(buf);
  };
  std::printf("%-6s %5s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "model", "devs", "opt DP", "unity DP", "unity/opt",
              "autoddl DP", "ddl/opt", "opt sim", "unity sim", "mcmc sim", "ddl sim", "unity/opt", "mcmc/opt", "ddl/opt", "mcmc s");
  for (const auto& [layers, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {1, 4}, {1, 8}, {2, 2}, {2, 4}}) {
    const Graph g = build_model("mlp", {{"layers", layers}, {"batch", 64 * n}});
    const search::CostModel cm(search::find_machine("dgx-h100").with_devices(n), search::default_efficiency());
    const search::MachineMapper mapper(cm);
    const Run opt = run(g, rules, mapper, base, search::Algorithm::kExhaustive);
    const Run u = run(g, rules, mapper, base, search::Algorithm::kUnity);
    const Run mc = run(g, rules, mapper, base, search::Algorithm::kMcmc);
    const Run ad = run(g, rules, mapper, base, search::Algorithm::kAutoddl);
    std::printf("mlp%-3lld %5lld %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9.2f\n", static_cast<long long>(layers), static_cast<long long>(n),
                us(opt.time).c_str(), us(u.time).c_str(), ratio(u.time, opt.time).c_str(), us(ad.time).c_str(), ratio(ad.time, opt.time).c_str(),
                us(opt.simulated).c_str(), us(u.simulated).c_str(), us(mc.simulated).c_str(), us(ad.simulated).c_str(),
                ratio(u.simulated, opt.simulated).c_str(), ratio(mc.simulated, opt.simulated).c_str(), ratio(ad.simulated, opt.simulated).c_str(),
                mc.search);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> devices{8, 64, 192};
  search::SearchOptions base;
  std::vector<std::string> models;
  bool pipeline = false, mcmc = false, autoddl = false, gap = false;
  std::string machine_name = "dgx-h100";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--pipeline") pipeline = true;
    else if (a == "--mcmc") mcmc = true;
    else if (a == "--autoddl") autoddl = true;
    else if (a == "--gaps") gap = true;
    else if (a == "--proposals" && i + 1 < argc) base.proposals = std::stoll(argv[++i]);
    else if (a == "--evaluations" && i + 1 < argc) base.evaluations = std::stoll(argv[++i]);
    else if (a == "--devices" && i + 1 < argc) devices = parse_list(argv[++i]);
    else if (a == "--budget" && i + 1 < argc) base.budget = std::stoll(argv[++i]);
    else if (a == "--split" && i + 1 < argc) base.split_min_ops = std::stoll(argv[++i]);
    else if (a == "--machine" && i + 1 < argc) machine_name = argv[++i];
    else if (a == "--help" || a == "-h") {
      std::printf("usage: bench_search [--machine dgx-h100] [--devices 8,64,192] [--budget N] [--split K] [--pipeline] [--mcmc] [--proposals N] [--autoddl] [--evaluations N] [--gaps] [MODEL...]\n");
      return 0;
    } else models.push_back(a);
  }
  if (models.empty()) models = {"resnext-50", "inception-v3", "bert-large", "dlrm", "xdl", "candle-uno", "mlp", "gpt", "vgg-13"};
  // Every shipped ruleset, as pcgx optimize applies them by default
  // (rulesets/MANIFEST.json).
  std::vector<Ruleset> rs;
  for (const std::string& path : runner::default_rulesets()) rs.push_back(load_ruleset(path));
  const search::RuleLibrary rules(rs);
  if (gap && machine_name != "dgx-h100") {
    std::fprintf(stderr, "error: --gaps runs on dgx-h100's first devices; --machine does not apply\n");
    return 2;
  }
  if (gap) return gaps(rules, base);
  Machine full;
  try {
    full = search::find_machine(machine_name);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: --machine: %s\n", e.what());
    return 2;
  }
  for (int64_t n : devices)
    if (n < 1 || n > full.num_devices()) {
      std::fprintf(stderr, "error: --devices: %lld devices, but %s has %lld\n", static_cast<long long>(n), machine_name.c_str(),
                   static_cast<long long>(full.num_devices()));
      return 2;
    }
  const std::map<std::string, bool> must_win{{"dlrm", true}, {"xdl", true}, {"candle-uno", true}, {"mlp", true}};

  std::printf("pcgx search on %s (budget %lld, split %lld); times are predicted per-iteration ms; ratio = baseline / unity\n", machine_name.c_str(),
              static_cast<long long>(base.budget), static_cast<long long>(base.split_min_ops));
  std::printf("%-13s %5s %6s %9s %10s %10s %10s %10s %8s %8s %8s %5s %5s %-13s  %s%s%s%s\n", "model", "devs", "nodes", "search s", "unity", "data-par",
              "expert", "sequential", "dp/u", "exp/u", "seq/u", "used", "idle", "chosen", "goals", pipeline ? "  | pipeline ms (SxM, search s, dp/pipeline)" : "",
              mcmc ? "  | simulated ms: unity, mcmc (search s, mcmc/u)" : "", autoddl ? "  | autoddl ms: predicted, simulated (search s, sim ddl/u)" : "");
  bool ok = true;
  std::map<std::string, std::map<int64_t, double>> search_time;
  for (const std::string& name : models) {
    const ModelSpec* spec = find_model(name);
    if (!spec) {
      std::fprintf(stderr, "error: unknown model '%s'\n", name.c_str());
      return 2;
    }
    for (int64_t n : devices) {
      ModelParams p;
      if (spec->defaults.count("batch")) p["batch"] = spec->defaults.at("batch") * n;
      const Graph g = build_model(name, p);
      const search::CostModel cm(full.with_devices(n), search::default_efficiency());
      const search::MachineMapper mapper(cm);
      const Run u = run(g, rules, mapper, base, search::Algorithm::kUnity);
      const Run dp = run(g, rules, mapper, base, search::Algorithm::kDataParallel);
      const Run ex = search::expert_family(g).empty() ? Run{} : run(g, rules, mapper, base, search::Algorithm::kExpert);
      const Run seq = run(g, rules, mapper, base, search::Algorithm::kSequential);
      search_time[name][n] = u.search;
      std::string goals;
      auto fail = [&](const std::string& why) { goals += (goals.empty() ? "" : ", ") + why, ok = false; };
      if (u.time <= 0) fail("unity infeasible");
      if (u.search > 60) fail("search > 60 s");
      for (const Run* b : {&dp, &ex, &seq})
        if (b->time > 0 && u.time > b->time * (1 + 1e-9)) fail("slower than a baseline");
      if (must_win.count(name) && !(dp.time <= 0 || u.time < dp.time * (1 - 1e-9))) fail("no win over data parallel");
      const double idle = u.time > 0 ? u.idle / u.time : 0;
      if (u.time > 0 && 2 * u.used < n)
        for (const Run* b : {&dp, &ex})
          if (b->time > 0 && !(u.time < b->time * (1 - 1e-9))) fail("most devices unused, not faster than a baseline");
      std::string piped;
      if (pipeline) {
        try {
          const search::PipelineResult pr = search::optimize_pipeline(g, rules, cm, base, {});
          char buf[160];
          std::snprintf(buf, sizeof buf, "  | %s (%lldx%lld, %.2f s, %s)", ms(pr.search.strategy.estimate.time).c_str(),
                        static_cast<long long>(pr.stages), static_cast<long long>(pr.micro_batches), pr.search.seconds,
                        ratio(dp.time, pr.search.strategy.estimate.time).c_str());
          piped = buf;
        } catch (const Error& e) {
          piped = std::string("  | - (") + e.what() + ")";
        }
      }
      // A peer search's column: two times (ms), its search time and its
      // simulated time over unity's.
      auto peer = [&](search::Algorithm algorithm, bool predicted) {
        const Run r = run(g, rules, mapper, base, algorithm);
        char buf[160];
        std::snprintf(buf, sizeof buf, "  | %s, %s (%.2f s, %s)", ms(predicted ? r.time : u.simulated).c_str(), ms(r.simulated).c_str(), r.search,
                      ratio(r.simulated, u.simulated).c_str());
        return std::string(buf);
      };
      const std::string chain = mcmc ? peer(search::Algorithm::kMcmc, false) : "";
      const std::string ddl = autoddl ? peer(search::Algorithm::kAutoddl, true) : "";
      std::printf("%-13s %5lld %6zu %9.2f %10s %10s %10s %10s %8s %8s %8s %5lld %4.0f%% %-13s  %s%s%s%s\n", name.c_str(), static_cast<long long>(n), g.size(),
                  u.search, ms(u.time).c_str(), ms(dp.time).c_str(), ms(ex.time).c_str(), ms(seq.time).c_str(),
                  ratio(dp.time, u.time).c_str(), ratio(ex.time, u.time).c_str(), ratio(seq.time, u.time).c_str(), static_cast<long long>(u.used), 100 * idle,
                  u.chosen.empty() ? "-" : u.chosen.c_str(),
                  goals.empty() ? "ok" : goals.c_str(), piped.c_str(), chain.c_str(), ddl.c_str());
      std::fflush(stdout);
    }
  }
  std::printf("\nsearch time (s) against devices; growth = time / time at %lld devices, against devices / %lld\n",
              static_cast<long long>(devices.front()), static_cast<long long>(devices.front()));
  std::printf("%-13s", "model");
  for (int64_t n : devices) std::printf(" %9lld", static_cast<long long>(n));
  std::printf("   growth (devices x%lld)\n", static_cast<long long>(devices.back() / devices.front()));
  for (const auto& [name, times] : search_time) {
    std::printf("%-13s", name.c_str());
    for (int64_t n : devices) std::printf(" %9.2f", times.count(n) ? times.at(n) : 0.0);
    const double first = times.begin()->second, last = times.rbegin()->second;
    std::printf("   %.1fx\n", first > 0 ? last / first : 0.0);
  }
  std::printf("%s\n", ok ? "all goals met" : "some goals missed (see the goals column)");
  return ok ? 0 : 1;
}
