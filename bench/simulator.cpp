// Delta simulation against full simulation (FlexFlow reports delta 2.2 to
// 6.9x faster per proposal). Per zoo model on dgx-h100 devices, a plan
// that leaves room to move tasks (data parallelism of half the device
// count) and random single-operator machine-view changes, as mcmc
// proposes them: the time of Simulator::set_view (rebuild the affected
// tasks, re-simulate what they change) against building and simulating
// the new plan from scratch, both measured here, and the tasks each
// touches. Delta and full give the same timeline (a test checks it); this
// program checks it too on every proposal and fails if they differ.
//
// Usage: bench_simulator [--devices N] [--proposals N] [MODEL...]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"

using namespace pcgx;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  int64_t devices = 64, proposals = 40;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--devices" && i + 1 < argc) devices = std::max(2, std::atoi(argv[++i]));
    else if (a == "--proposals" && i + 1 < argc) proposals = std::max(1, std::atoi(argv[++i]));
    else if (a == "--help" || a == "-h") {
      std::printf("usage: bench_simulator [--devices N] [--proposals N] [MODEL...]\n");
      return 0;
    } else models.push_back(a);
  }
  if (models.empty()) models = {"resnext-50", "inception-v3", "bert-large", "dlrm", "xdl", "candle-uno", "mlp", "gpt", "vgg-13"};
  const Machine m = search::find_machine("dgx-h100").with_devices(devices);
  const search::CostModel cm(m, search::default_efficiency());
  const search::MachineMapper mapper(cm);
  std::printf("delta vs full simulation per proposal on %lld dgx-h100 devices, data parallelism of degree %lld, %lld proposals each\n",
              static_cast<long long>(devices), static_cast<long long>(devices / 2), static_cast<long long>(proposals));
  std::printf("%-13s %7s %9s %12s %12s %8s %14s %14s\n", "model", "nodes", "tasks", "full ms", "delta ms", "speedup", "tasks rebuilt",
              "re-simulated");
  std::mt19937_64 rng(7);
  bool same = true;
  double log_sum = 0;
  int rows = 0;
  for (const std::string& name : models) {
    const ModelSpec* spec = find_model(name);
    if (!spec) {
      std::fprintf(stderr, "error: unknown model '%s'\n", name.c_str());
      return 2;
    }
    ModelParams p;
    if (spec->defaults.count("batch")) p["batch"] = spec->defaults.at("batch") * (devices / 2);
    const Graph g = search::data_parallel(build_model(name, p), devices / 2);
    const search::Strategy st = mapper.map(g);
    if (!st.estimate.feasible) {
      std::printf("%-13s infeasible: %s\n", name.c_str(), st.estimate.infeasible.c_str());
      continue;
    }
    search::Simulator sim(g, st.views, cm);
    const Placement place(g, st.views, devices);
    std::vector<NodeId> movable;
    for (const Node& n : g.nodes())
      if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs) && st.views[static_cast<size_t>(n.id)].placed() &&
          place.tasks(n.id).tasks < devices)
        movable.push_back(n.id);
    if (movable.empty()) continue;
    double full = 0, delta = 0, touched = 0, recomputed = 0;
    for (int64_t k = 0; k < proposals; ++k) {
      const NodeId n = movable[rng() % movable.size()];
      const int64_t tasks = place.tasks(n).tasks;
      MachineView v;
      v.start = static_cast<int64_t>(rng() % static_cast<uint64_t>(devices - tasks + 1));
      auto t0 = Clock::now();
      sim.set_view(n, v);
      delta += since(t0);
      touched += static_cast<double>(sim.rebuilt());
      recomputed += static_cast<double>(sim.timeline().recomputed());
      t0 = Clock::now();
      const search::Simulator fresh(g, sim.views(), cm);
      full += since(t0);
      same = same && fresh.time() == sim.time();
    }
    const double per_full = full / static_cast<double>(proposals), per_delta = delta / static_cast<double>(proposals);
    std::printf("%-13s %7zu %9zu %12.3f %12.3f %7.1fx %14.0f %14.0f\n", name.c_str(), g.size(), sim.timeline().size(), per_full * 1e3,
                per_delta * 1e3, per_full / per_delta, touched / static_cast<double>(proposals), recomputed / static_cast<double>(proposals));
    std::fflush(stdout);
    log_sum += std::log(per_full / per_delta), ++rows;
  }
  if (rows > 0) std::printf("geometric mean speedup %.1fx\n", std::exp(log_sum / rows));
  std::printf("%s\n", same ? "delta and full simulation agreed on every proposal" : "DELTA AND FULL SIMULATION DISAGREED");
  return same ? 0 : 1;
}
