// Training speed of the CPU runtime (issue 6's table), all in one run:
//   1. single-device training steps per second of pcgx and of PyTorch
//      (CPU, float32, SGD with momentum, the same number of threads each
//      (--threads, default 1), same model and batch) for an MLP and a post-LN
//      transformer encoder block, and their ratio (> 1: pcgx faster); PyTorch
//      runs bench/runtime_torch.py with Debian's python3-torch and is skipped,
//      saying so, without it;
//   2. strong scaling of the in-process backend: the MLP data parallel on
//      1, 2 and 4 virtual devices, steps per second and speedup over one;
//   3. the in-process backend's all-reduce as a step meets it: 2 devices,
//      1 KiB, 20 us of work between calls, 3,000 calls: median, tail and
//      mean (a step pays the mean; goal: mean within 1.5x the median).
//
// Usage: bench_runtime [--steps N] [--threads N] [--only
// mlp|block|scaling|exchange]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>

#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/search.h"

using namespace pcgx;

namespace {

constexpr int kWarmup = 3;

// Steps per second after the warm-up steps.
double pcgx_steps_per_second(const Graph &g, std::span<const MachineView> views,
                             int devices, int steps, int threads) {
  runtime::TrainOptions o;
  o.steps = steps + kWarmup, o.optimizer.lr = 0.01, o.batches = 1,
  o.threads = threads;
  const runtime::TrainResult r = runtime::train(g, views, devices, o);
  const double s = std::accumulate(r.step_seconds.begin() + kWarmup,
                                   r.step_seconds.end(), 0.0);
  return steps / s;
}

struct Torch {
  std::map<std::string, double> steps_per_second;
  std::string blas;
};

// PyTorch with `threads` threads of its own and `blas` for its BLAS.
Torch torch_run(int steps, int threads, int blas) {
  Torch out;
  const std::string cmd = "/usr/bin/python3 " + std::string(PCGX_SOURCE_DIR) +
                          "/bench/runtime_torch.py --steps " +
                          std::to_string(steps) + " --threads " +
                          std::to_string(threads) + " --blas-threads " +
                          std::to_string(blas) +
                          " --mlp 64 256 4 --block 8 64 128 4 512 2>/dev/null";
  FILE *p = popen(cmd.c_str(), "r");
  if (!p)
    return out;
  char name[64], text[512];
  while (std::fscanf(p, "%63s %511s", name, text) == 2) {
    if (std::string(name) == "blas")
      out.blas = text;
    else
      out.steps_per_second[name] = std::atof(text);
  }
  pclose(p);
  return out;
}

// On more than one thread, PyTorch's best of two ways to share them: its
// own threads and OpenBLAS's pthreads both N oversubscribe the cores
// (measured on 2 cores: 2-5x slower than one thread), so either PyTorch's
// operators or its BLAS get the N threads and the other runs on one.
Torch torch_steps_per_second(int steps, int threads) {
  if (threads == 1)
    return torch_run(steps, 1, 1);
  Torch best = torch_run(steps, threads, 1);
  const Torch blas = torch_run(steps, 1, threads);
  for (const auto &[name, v] : blas.steps_per_second)
    if (v > best.steps_per_second[name])
      best.steps_per_second[name] = v;
  return best;
}

// Whether PyTorch's BLAS (the library file its products loaded) is an
// optimized one. Debian's python3-torch calls whatever libblas.so.3 the
// system's alternatives point at: the reference BLAS unless OpenBLAS (or
// BLIS, MKL, ATLAS) is installed, and a ratio against the reference BLAS
// measured pcgx at 14.9x PyTorch where OpenBLAS gave 1.0-1.3x.
bool optimized_blas(const std::string &path) {
  for (const char *name : {"openblas", "blis", "mkl", "atlas"})
    if (path.find(name) != std::string::npos)
      return true;
  return false;
}

// Microseconds each all-reduce call took, every call of every device.
std::vector<double> all_reduce_calls(int calls, double work_us) {
  using Clock = std::chrono::steady_clock;
  runtime::InProcessWorld world(2);
  std::vector<std::vector<double>> took(2);
  world.run([&](runtime::Communicator &c) {
    std::vector<float> data(256, 1.0f);
    const int group[] = {0, 1};
    auto &mine = took[static_cast<size_t>(c.rank())];
    mine.reserve(static_cast<size_t>(calls));
    volatile double sink = 0;
    for (int i = 0; i < calls; ++i) {
      const auto start = Clock::now();
      while (std::chrono::duration<double, std::micro>(Clock::now() - start)
                 .count() < work_us)
        sink = sink + 1;
      const auto a = Clock::now();
      c.all_reduce(group, data, 2 * (i % 8) + 1);  // as a step's 8 collectives reuse their tags
      mine.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - a).count());
    }
  });
  took[0].insert(took[0].end(), took[1].begin(), took[1].end());
  return took[0];
}

} // namespace

int main(int argc, char **argv) {
  int steps = 30, threads = 1;
  std::string only; // one part, for profiling
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc)
      threads = std::max(1, std::atoi(argv[++i]));
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else {
      std::printf("usage: bench_runtime [--steps N] [--threads N] [--only "
                  "mlp|block|scaling|exchange]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  const Graph mlp =
      build_model("mlp", {{"batch", 64}, {"hidden", 256}, {"layers", 4}});
  const Graph blk = encoder_block_regression(
      "block", 8, 64, 128, 4, 512); // as bench/runtime_torch.py (no dropout)
  const Torch t =
      only.empty() ? torch_steps_per_second(steps, threads) : Torch{};
  const auto &torch = t.steps_per_second;
  const bool fair = !torch.empty() && optimized_blas(t.blas);

  if (only.empty() || only == "mlp" || only == "block") {
    std::printf("single device, %d thread%s, %d steps after %d warm-up "
                "(steps/s; ratio = pcgx / PyTorch)\n",
                threads, threads == 1 ? "" : "s", steps, kWarmup);
    std::printf("%-34s %10s %10s %8s\n", "model", "pcgx", "PyTorch", "ratio");
    for (const auto &[name, g, desc] :
         {std::tuple{"mlp", &mlp, "MLP 4 x 256, batch 64"},
          std::tuple{"block", &blk, "encoder block h128 s64 b8"}}) {
      if (!only.empty() && only != name)
        continue;
      const double ours = pcgx_steps_per_second(*g, {}, 1, steps, threads);
      if (torch.count(name) && fair) {
        std::printf("%-34s %10.1f %10.1f %7.2fx\n", desc, ours, torch.at(name),
                    ours / torch.at(name));
      } else {
        std::printf("%-34s %10.1f %10s %8s\n", desc, ours, "-", "-");
      }
    }
    if (torch.empty())
      std::printf("(PyTorch not measured: /usr/bin/python3 with Debian's "
                  "python3-torch is needed)\n");
    else if (!fair)
      std::printf("(no ratio: PyTorch's products ran on %s, not an optimized "
                  "BLAS; install OpenBLAS (apt-get install libopenblas0-pthread, "
                  "as scripts/install_deps.sh does with PCGX_TEST_DEPS=1) and "
                  "run again)\n",
                  t.blas.empty() ? "an unknown BLAS" : t.blas.c_str());
    else
      std::printf("(PyTorch %d thread%s, BLAS: %s)\n", threads,
                  threads == 1 ? "" : "s", t.blas.c_str());
  }

  if (only.empty() || only == "scaling") {
    std::printf("\nstrong scaling, in-process backend: the MLP data parallel "
                "on N virtual devices (cpu-host)\n");
    std::printf("%8s %10s %9s\n", "devices", "steps/s", "speedup");
    double one = 0;
    for (int n : {1, 2, 4}) {
      const search::CostModel cm(
          search::find_machine("cpu-host").with_devices(n),
          search::default_efficiency());
      const search::MachineMapper mapper(cm);
      const Graph dp = search::best_data_parallel(mlp, mapper);
      const search::Strategy st = mapper.map(dp);
      std::vector<MachineView> views;
      views.assign(st.views.begin(), st.views.end());
      const double r = pcgx_steps_per_second(dp, views, n, steps, 1);
      if (n == 1)
        one = r;
      std::printf("%8d %10.1f %8.2fx\n", n, r, r / one);
    }
  }

  if (!only.empty() && only != "exchange")
    return 0;
  std::vector<double> us = all_reduce_calls(3000, 20);
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[static_cast<size_t>(q * static_cast<double>(us.size() - 1))];
  };
  const double mean = std::accumulate(us.begin(), us.end(), 0.0) /
                      static_cast<double>(us.size());
  std::printf("\nin-process all-reduce, 2 devices, 1 KiB, 20 us of work "
              "between calls, 3000 calls each (us)\n");
  std::printf("%8s %8s %8s %8s %8s %14s\n", "median", "p90", "p99", "max",
              "mean", "mean/median");
  std::printf("%8.2f %8.2f %8.2f %8.1f %8.2f %13.2fx (goal: <= 1.5x)\n",
              at(0.5), at(0.9), at(0.99), us.back(), mean, mean / at(0.5));
  return 0;
}
