// "No per-step allocation after warm-up" (issue 6), counted: this
// executable interposes the C allocator (every operator new, every
// std::vector and Eigen buffer goes through malloc) and counts calls made
// while a training run is past its warm-up steps. It is an executable of
// its own because the interposition applies to the whole process.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstring>

#include "model_param_name.h"
#include "op_cases.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/search.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};
void note() {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  note();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  note();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  note();
  return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
  note();
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  note();
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  note();
  void* p = __libc_memalign(a, n);
  if (!p) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}

namespace pcgx::runtime {
namespace {

constexpr int64_t kWarmup = 2, kSteps = 8;

// Allocations made by every device during steps kWarmup+1 .. kSteps (device
// 0 opens the window when it finishes step kWarmup and closes it when it
// finishes step kSteps; the other devices of a data-parallel run are at
// most one step apart from it). Two more steps follow, so no device's
// threads end inside the window (a thread's exit allocates in the C
// library).
int64_t steady_state_allocations(const Graph& g, std::span<const MachineView> views, int devices, int threads = 1,
                                 ZeroStage zero = ZeroStage::k0, Recompute recompute = Recompute::kNone) {
  TrainOptions o;
  o.steps = kSteps + 2, o.optimizer.lr = 0.01, o.batches = 1, o.threads = threads, o.zero = zero, o.recompute = recompute;
  o.progress = [](const StepReport& r) {
    if (r.step == kWarmup) allocations = 0, counting = true;
    if (r.step == kSteps) counting = false;
  };
  const TrainResult r = train(g, views, devices, o);
  EXPECT_EQ(static_cast<int64_t>(r.losses.size()), kSteps + 2);
  return allocations.load();
}

class NoAllocation : public ::testing::TestWithParam<std::string> {};

Graph model_for(const std::string& name) { return name == "encoder-block" ? encoder_block_regression("block", 4, 16, 32, 4, 64) : build_model(name); }

TEST_P(NoAllocation, OneDevice) { EXPECT_EQ(steady_state_allocations(model_for(GetParam()), {}, 1), 0); }

// `micro_batches` > 1: the plan accumulates its gradients over that many
// micro-batches (execution_plan.h), run one at a time.
int64_t data_parallel_allocations(const Graph& model, int devices, int threads = 1, ZeroStage zero = ZeroStage::k0,
                                  int64_t micro_batches = 1) {
  const search::CostModel cm(search::find_machine("cpu-host").with_devices(devices), search::default_efficiency());
  const search::MachineMapper mapper(cm);
  Graph dp = search::best_data_parallel(model, mapper);
  if (micro_batches > 1) dp = search::pipelined(dp, micro_batches, true);
  const search::Strategy st = mapper.map(dp);
  std::vector<MachineView> views;
  views.assign(st.views.begin(), st.views.end());
  return steady_state_allocations(dp, views, devices, threads, zero);
}

TEST_P(NoAllocation, DataParallelOnFourDevices) { EXPECT_EQ(data_parallel_allocations(model_for(GetParam()), 4), 0); }

// ZeRO's reduce-scatters, block updates and all-gathers reuse their buffers
// too, and at stages 2 and 3 the copies given back between their uses.
TEST(NoAllocationWithZero, DataParallelOnFourDevices) {
  for (const char* model : {"mlp-tiny", "gpt-tiny"}) EXPECT_EQ(data_parallel_allocations(build_model(model), 4, 1, ZeroStage::k2), 0) << model;
  for (const char* model : {"mlp-tiny", "gpt-tiny"}) EXPECT_EQ(data_parallel_allocations(build_model(model), 4, 1, ZeroStage::k3), 0) << model << " at stage 3";
}

// Micro-batches: each one's kernel offsets, input slices and the sums over
// them reuse their buffers too.
TEST(NoAllocationWithMicroBatches, DataParallelOnTwoDevices) {
  for (const char* model : {"mlp-tiny", "gpt-tiny"})
    EXPECT_EQ(data_parallel_allocations(build_model(model, {{"batch", 8}}), 2, 1, ZeroStage::k1, 2), 0) << model;
}

// Recomputation frees its segments' outputs and allocates them again when
// re-run, every step: the freed blocks are reused (host_backend.h's pool).
TEST(NoAllocationWithRecompute, OneDevice) {
  for (Recompute policy : {Recompute::kSelective, Recompute::kFull})
    for (const char* model : {"gpt-tiny", "bert-large-tiny"})
      EXPECT_EQ(steady_state_allocations(build_model(model), {}, 1, 1, ZeroStage::k0, policy), 0) << model << " " << name(policy);
}

// Kernel threads (OpenMP) on models large enough that products are tiled
// and loops run in pieces: the threads' teams and scratch settle in warm-up.
TEST(NoAllocationWithKernelThreads, OneDeviceOnThreeThreads) {
  EXPECT_EQ(steady_state_allocations(encoder_block_regression("block", 4, 64, 128, 4, 512), {}, 1, 3), 0);
  EXPECT_EQ(steady_state_allocations(build_model("mlp", {{"batch", 96}, {"hidden", 640}, {"layers", 3}}), {}, 1, 3), 0);
}

TEST(NoAllocationWithKernelThreads, DataParallelOnTwoDevicesOfTwoThreads) {
  EXPECT_EQ(data_parallel_allocations(encoder_block_regression("block", 8, 64, 128, 4, 512), 2, 2), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, NoAllocation,
                         ::testing::Values("encoder-block", "mlp-tiny", "dlrm-tiny", "xdl-tiny", "candle-uno-tiny",
                                           "bert-large-tiny", "gpt-tiny", "vgg-13-tiny", "resnext-50-tiny",
                                           "inception-v3-tiny", "llama-tiny"),
                         pcgx::testing::model_param_name);

// Every compute operator, not only those a zoo model uses: each case of
// tests/op_cases.h trained alone, its float inputs as weights (so its
// gradient rule runs), its output (or the first of several) against a
// target by MSELoss unless it is a loss itself.
Graph alone(const OpCase& c) {
  Graph g(c.label);
  std::vector<TensorRef> ins;
  // A loss (a scalar) compares its first input with targets the data gives.
  const OpDef& op = OpRegistry::global().get(c.op);
  const bool loss = op.infer_types(normalize_attributes(op.attrs, c.attrs, op.name), c.inputs)[0].shape.empty();
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const TensorType& t = c.inputs[i];
    IntList shape(t.shape.begin(), t.shape.end());
    if (loss && i > 0 && t.dtype == DataType::kFloat32)
      ins.push_back({g.add("Input", {{"shape", shape}}, {}, "target"), 0});
    else if (t.dtype == DataType::kInt64)
      ins.push_back({g.add("Input", {{"shape", shape}, {"dtype", std::string("int64")}, {"index_range", c.index_range[i]}}, {},
                           "in" + std::to_string(i)),
                     0});
    else
      ins.push_back({g.add("Weight", {{"shape", shape}}, {}, "w" + std::to_string(i)), 0});
  }
  const TensorRef y{g.add(c.op, c.attrs, ins, "op"), 0};
  if (g.shape(y).rank() == 0) {
    g.add_output(y);
    return g;
  }
  IntList shape;
  for (const auto& d : g.shape(y).dims) shape.push_back(d.size);
  const TensorRef target{g.add("Input", {{"shape", shape}}, {}, "target"), 0};
  g.add_output({g.add("MSELoss", {}, {y, target}, "loss"), 0});
  return g;
}

class EveryOperator : public ::testing::TestWithParam<OpCase> {};

TEST_P(EveryOperator, NoAllocationAfterWarmUp) { EXPECT_EQ(steady_state_allocations(alone(GetParam()), {}, 1), 0); }

INSTANTIATE_TEST_SUITE_P(Cases, EveryOperator, ::testing::ValuesIn(op_cases()),
                         [](const auto& param_info) { return param_info.param.label; });

// The counter itself: a step that does allocate is seen.
TEST(AllocationCounter, SeesAllocations) {
  allocations = 0, counting = true;
  std::vector<float>* v = new std::vector<float>(1000);
  counting = false;
  delete v;
  EXPECT_GE(allocations.load(), 2);
}

}  // namespace
}  // namespace pcgx::runtime
