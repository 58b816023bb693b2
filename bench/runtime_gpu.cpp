// Training speed of the CUDA backend on one GPU against PyTorch eager
// (issue 18's benchmark), all in one run, for the 16 x 8192 MLP (batch
// 256), four BERT-Large encoder layers (hidden 1024, 16 heads, ffn 4096,
// sequence 512, batch 8) and ResNeXt-50 (batch 64): pcgx's steps per
// second, PyTorch's (bench/runtime_torch.py --device cuda, same model,
// batch, SGD with momentum, in the same precision: TF32 by default, BF16
// or FP16 as PyTorch's autocast), their ratio, the model FLOP utilisation
// (3 x forward FLOPs per step over the GPU's dense peak in that precision,
// from its machine file) and the cost model's predicted step on one GPU of
// the machine file for the GPU it runs on (dgx-h200 on an H200, dgx-a100 on
// an A100, else dgx-h100; roofline, and with the profile measured in this
// run) against the measured one.
//
// A model with operators on the host fallback (cuda_backend.h) is not
// timed unless --all: the figure would measure host copies. Without a GPU
// it prints why and exits 0.
//
// Usage: bench_runtime_gpu [--steps N] [--precision fp32|tf32|bf16|fp16] [--all] [--profile-out DIR]
// (--profile-out: each model's measured profile, DIR/<model>.profile.json,
// the operator times behind the "profiled" column.)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>

#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/precision.h"
#include "pcgx/pcg/training_recipe.h"
#include "pcgx/pcg/stable_hash.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/cuda/cuda_backend.h"
#include "pcgx/runtime/op_profile.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"

using namespace pcgx;

namespace {

constexpr int kWarmup = 3;
// The machine file describing the GPU this runs on.
std::string machine_for(const std::string& gpu) {
  if (gpu.find("H200") != std::string::npos) return "dgx-h200";
  if (gpu.find("A100") != std::string::npos) return "dgx-a100";
  return "dgx-h100";
}

double forward_flops(const Graph& g) {
  double f = 0;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || !n.op->flops) continue;
    std::vector<TensorType> out;
    for (size_t o = 0; o < n.outputs.size(); ++o) out.push_back(g.type({n.id, static_cast<int32_t>(o)}));
    f += n.op->flops(n.attrs, g.input_types(n), out);
  }
  return f;
}

std::set<std::string> host_fallbacks(const Graph& g) {
  std::set<std::string> r;
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kCompute && !runtime::cuda::CudaBackend::native(*n.op)) r.insert(n.op->name);
  return r;
}

// One batch of random inputs, as PyTorch's side trains on: uniform in
// [-1, 1), index inputs (labels too) uniform in [0, index_range). The
// synthetic teacher task (synthetic_task.h) would first run the model on
// the CPU's reference kernels to label it: minutes for ResNeXt-50 at batch 64.
class RandomBatch final : public runtime::BatchSource {
 public:
  explicit RandomBatch(const Graph& g) {
    for (const Node& n : g.nodes())
      if (n.op->op_class == OpClass::kSource && !n.op->is_weight) {
        const ParallelTensorShape& s = n.outputs[0];
        batch_[n.name] = random_tensor<float>({s.logical_shape(), s.dtype}, hash_string(n.name), n.attrs.get_int("index_range"));
      }
  }
  const std::map<std::string, Tensor<float>>& batch(int64_t) const override { return batch_; }
  std::string describe() const override { return "one batch of random inputs"; }
  int64_t batches() const override { return 1; }

 private:
  std::map<std::string, Tensor<float>> batch_;
};

std::map<std::string, double> torch_steps_per_second(int steps, Precision precision) {
  std::map<std::string, double> r;
  const std::string cmd = "python3 " + std::string(PCGX_SOURCE_DIR) + "/bench/runtime_torch.py --device cuda --steps " + std::to_string(steps) +
                          " --mlp 256 8192 16 --block 8 512 1024 16 4096 --layers 4 --resnext 64 --precision " + name(precision) + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char name[64], value[256];
  while (std::fscanf(p, "%63s %255s", name, value) == 2) r[name] = std::atof(value);
  pclose(p);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 20;
  Precision precision = Precision::kTf32;
  bool all = false;
  std::string profile_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (a == "--profile-out" && i + 1 < argc) profile_dir = argv[++i];
    else if (a == "--strict-fp32") precision = Precision::kFp32;
    else if (a == "--precision" && i + 1 < argc && precision_named(argv[i + 1])) precision = *precision_named(argv[++i]);
    else if (a == "--all") all = true;
    else {
      std::printf("usage: bench_runtime_gpu [--steps N] [--precision fp32|tf32|bf16|fp16] [--all] [--profile-out DIR]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it is measured, also into a pipe
  std::string why;
  if (runtime::cuda::device_count(&why) == 0) {
    std::printf("bench_runtime_gpu: not run: no GPU (%s)\n", why.c_str());
    return 0;
  }
  const Graph mlp = build_model("mlp", {});
  const Graph bert = encoder_block_regression("bert-large-4-layers", 8, 512, 1024, 16, 4096, 4);
  const Graph resnext = build_model("resnext-50", {{"batch", 64}});
  const auto torch = torch_steps_per_second(steps, precision);
  const std::string gpu = runtime::cuda::device_name(0);
  const Machine m = search::find_machine(machine_for(gpu)).with_devices(1);
  const double peak = m.device.peak(precision);
  std::printf("one %s, %s, %d steps after %d warm-up; MFU = 3 x forward FLOPs per step / %.1f TFLOP/s; predictions on one %s GPU\n",
              gpu.c_str(), name(precision), steps, kWarmup, peak / 1e12, m.name.c_str());
  std::printf("%-28s %9s %9s %7s %6s %12s %12s %12s\n", "model", "pcgx/s", "torch/s", "ratio", "MFU", "measured ms", "roofline ms",
              "profiled ms");
  for (const auto& [name, g, key] : {std::tuple{"MLP 16 x 8192, batch 256", &mlp, "mlp"},
                                     std::tuple{"BERT-Large 4 layers, s512 b8", &bert, "block"},
                                     std::tuple{"ResNeXt-50, batch 64", &resnext, "resnext"}}) {
    const auto fallback = host_fallbacks(*g);
    if (!fallback.empty() && !all) {
      std::string ops;
      for (const std::string& o : fallback) ops += " " + o;
      std::printf("%-28s not measured: on the host fallback:%s\n", name, ops.c_str());
      continue;
    }
    const RandomBatch data(*g);
    runtime::TrainOptions o;
    o.steps = steps + kWarmup, o.optimizer.lr = 0.01, o.batches = 1, o.data = &data, o.precision = precision;
    o.backend = [precision](int) {
      runtime::cuda::CudaOptions c;
      c.products = precision;
      return std::make_unique<runtime::cuda::CudaBackend>(c);
    };
    // The timed steps run as a user's would: no synchronization between
    // operators (the backend's clock synchronizes once per step read).
    const runtime::TrainResult r = runtime::train(*g, {}, 1, o);
    const double step = std::accumulate(r.step_seconds.begin() + kWarmup, r.step_seconds.end(), 0.0) / steps;
    // Kernel times for the profile in a separate pass: events around
    // every operator (Backend::mark), read once per step.
    o.steps = kWarmup + 5, o.time_kernels = true;
    const runtime::TrainResult timed = runtime::train(*g, {}, 1, o);
    // Priced in the precision it ran in (the machine's peak for it).
    TrainingRecipe recipe;
    recipe.precision = precision;
    recipe.optimizer = runtime::priced_as(o.optimizer);  // SGD with momentum, as PyTorch's side
    const double roofline =
        search::MachineMapper(search::CostModel(m, search::default_efficiency(), {}, {}, recipe)).map(*g).estimate.time;
    const Profile measured = runtime::profile_from_run(*g, timed);
    const double profiled =
        search::MachineMapper(search::CostModel(m, search::default_efficiency(), measured, {}, recipe)).map(*g).estimate.time;
    if (!profile_dir.empty()) std::ofstream(profile_dir + "/" + key + ".profile.json") << profile_to_json(measured);
    const double mfu = 3 * forward_flops(*g) / step / peak;
    const auto t = torch.find(key);
    char theirs[32] = "-", ratio[32] = "-";
    if (t != torch.end()) {
      std::snprintf(theirs, sizeof theirs, "%.2f", t->second);
      std::snprintf(ratio, sizeof ratio, "%.3fx", 1 / step / t->second);
    }
    std::printf("%-28s %9.2f %9s %7s %5.1f%% %12.2f %12.2f %12.2f\n", name, 1 / step, theirs, ratio, 100 * mfu, step * 1e3, roofline * 1e3,
                profiled * 1e3);
  }
  if (torch.empty()) std::printf("(PyTorch not measured: python3 with torch and CUDA is needed)\n");
  return 0;
}
