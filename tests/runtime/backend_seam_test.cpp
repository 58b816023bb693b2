// The executor, the optimizer and the trainer reach a device's memory only
// through its Backend (backend.h): the host's backend with every buffer's
// address disguised (its top bit flipped, an address no process can read)
// trains to the same bits as the plain host backend, its messages staged
// through the host (staging_communicator.h). A stray read of a buffer's
// floats anywhere outside the backend would crash this test. Run again
// with the backend overwriting the gradients of every other node
// (Backend::overwrites_gradient, as the GPU's does), so the executor skips
// zeroing them: any gradient it then adds into without zeroing, or a
// partial sum it lets a kernel overwrite, changes the bits. (A gradient
// an overwriting kernel writes is summed over micro-batches through a
// scratch buffer, not in place (Backend::accumulates_gradient): that run
// is held to one whose backend sums the same nodes' gradients apart.)
// Kernel times
// come from the backend's marks (Backend::mark), as a GPU's events.
#include <gtest/gtest.h>

#include <cstdint>

#include "mapped_plan.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/host_backend.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"

namespace pcgx::runtime {
namespace {

class DisguisedBackend final : public Backend {
 public:
  // ticking_marks: each mark() is 1 ms after the one before it, whatever
  // the host's clock says.
  // sum_apart: the nodes whose gradients `overwrite` would overwrite have
  // them summed over micro-batches apart, as they are then, unoverwritten.
  explicit DisguisedBackend(bool overwrite = false, bool ticking_marks = false, bool sum_apart = false)
      : overwrite_(overwrite), ticking_(ticking_marks), sum_apart_(sum_apart) {}
  std::string name() const override { return "disguised"; }
  Buffer allocate(std::span<const int64_t> shape) override { return hide(host_.allocate(shape)); }
  std::span<const int64_t> shape(const Buffer& b) const override { return host_.shape(b); }
  void fill(const Buffer& b, float v) override { host_.fill(real(b), v); }
  void copy(const Buffer& to, const Buffer& from) override { host_.copy(real(to), real(from)); }
  void add(const Buffer& into, const Buffer& x) override { host_.add(real(into), real(x)); }
  void read_block(const Buffer& full, std::span<const int64_t> o, const Buffer& out) override { host_.read_block(real(full), o, real(out)); }
  void add_block(const Buffer& full, std::span<const int64_t> o, const Buffer& b) override { host_.add_block(real(full), o, real(b)); }
  void add_from_block(const Buffer& out, const Buffer& full, std::span<const int64_t> o) override {
    host_.add_from_block(real(out), real(full), o);
  }
  void add_range(const Buffer& flat, int64_t at, const Buffer& x) override { host_.add_range(real(flat), at, real(x)); }
  void set_range(const Buffer& flat, int64_t at, const Buffer& x) override { host_.set_range(real(flat), at, real(x)); }
  void copy_range(const Buffer& to, const Buffer& flat, int64_t at) override { host_.copy_range(real(to), real(flat), at); }
  void upload_block(const Tensor<float>& logical, std::span<const int64_t> o, const Buffer& out) override {
    host_.upload_block(logical, o, real(out));
  }
  void download(const Buffer& b, std::span<float> h) override { host_.download(real(b), h); }
  float element(const Buffer& b, int64_t i) override { return host_.element(real(b), i); }
  bool host_memory() const override { return false; }
  void to_host(std::span<const float> from, std::span<float> to) override { host_.to_host({reveal(from.data()), from.size()}, to); }
  void from_host(std::span<const float> from, std::span<float> to) override { host_.from_host(from, {reveal(to.data()), to.size()}); }
  std::string unsupported(const Node& n) const override { return host_.unsupported(n); }
  void forward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in, std::span<const Buffer* const> out) override {
    auto i = reals(in), o = reals(out);
    host_.forward(n, ctx, pointers(i), pointers(o));
  }
  void backward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in, std::span<const Buffer* const> out,
                std::span<const Buffer* const> out_grad, std::span<const Buffer* const> in_grad) override {
    auto i = reals(in), o = reals(out), d = reals(out_grad), g = reals(in_grad);
    // An overwritten gradient holds anything on entry (last step's values,
    // another task's sum): written whole here, as zeros the host's kernel
    // then adds into.
    for (size_t k = 0; k < g.size(); ++k)
      if (g[k] && overwrites_gradient(n, k)) host_.fill(g[k], 0.f);
    host_.backward(n, ctx, pointers(i), pointers(o), pointers(d), pointers(g));
  }
  bool overwrites_gradient(const Node& n, size_t) const override { return overwrite_ && n.id % 2 == 0; }
  bool accumulates_gradient(const Node& n, size_t i) const override {
    return !((overwrite_ || sum_apart_) && n.id % 2 == 0) && host_.accumulates_gradient(n, i);
  }
  void update(const UpdateRule& rule, std::span<const ParameterSlot> slots) override {
    std::vector<ParameterSlot> r(slots.begin(), slots.end());
    for (ParameterSlot& s : r) s.w = real(s.w), s.g = real(s.g), s.m = real(s.m), s.v = real(s.v);
    host_.update(rule, r);
  }
  void round(const Buffer& b, Precision p) override { host_.round(real(b), p); }
  bool unscale(const Buffer& b, float factor) override { return host_.unscale(real(b), factor); }
  Clock::time_point now() override { return host_.now(); }
  int64_t mark() override { return ticking_ ? marks_++ : Backend::mark(); }
  void read_marks(std::vector<double>& seconds) override {
    if (!ticking_) return Backend::read_marks(seconds);
    seconds.resize(static_cast<size_t>(marks_));
    for (int64_t k = 0; k < marks_; ++k) seconds[static_cast<size_t>(k)] = static_cast<double>(k) * kTick;
    marks_ = 0;
  }
  static constexpr double kTick = 1e-3;

 private:
  static constexpr uintptr_t kBit = uintptr_t{1} << 63;
  static float* flip(const float* p) { return p ? reinterpret_cast<float*>(reinterpret_cast<uintptr_t>(p) ^ kBit) : nullptr; }
  static float* reveal(const float* p) { return flip(p); }
  static Buffer hide(Buffer b) { return b.data = flip(b.data), b; }
  static Buffer real(Buffer b) { return b.data = flip(b.data), b; }
  // Real buffers for a call, and pointers to them (a null entry stays null).
  static std::vector<Buffer> reals(std::span<const Buffer* const> bs) {
    std::vector<Buffer> r;
    for (const Buffer* b : bs) r.push_back(b ? real(*b) : Buffer{});
    return r;
  }
  static std::vector<const Buffer*> pointers(const std::vector<Buffer>& bs) {
    std::vector<const Buffer*> p;
    for (const Buffer& b : bs) p.push_back(b ? &b : nullptr);
    return p;
  }
  bool overwrite_, ticking_, sum_apart_;
  int64_t marks_ = 0;
  HostBackend host_;
};

void expect_same_training(const Graph& g, const std::vector<MachineView>& views, int devices, TrainOptions o) {
  const TrainResult host = train(g, views, devices, o);
  TrainOptions apart_options = o;
  apart_options.backend = [](int) { return std::make_unique<DisguisedBackend>(false, false, true); };
  const TrainResult apart = train(g, views, devices, apart_options);
  for (const bool overwrite : {false, true}) {
    SCOPED_TRACE(overwrite ? "every other node's gradients overwritten" : "gradients added into zeros");
    const TrainResult& plain = overwrite ? apart : host;
    o.backend = [overwrite](int) { return std::make_unique<DisguisedBackend>(overwrite); };
    const TrainResult hidden = train(g, views, devices, o);
    EXPECT_EQ(hidden.backend, "disguised");
    EXPECT_EQ(hidden.losses, plain.losses);
    ASSERT_EQ(hidden.parameters.size(), plain.parameters.size());
    for (const auto& [name, w] : plain.parameters) EXPECT_EQ(hidden.parameters.at(name).data, w.data) << name;
    EXPECT_EQ(hidden.bytes_sent, plain.bytes_sent);
  }
}

// Data parallelism: gradient buckets all-reduced, Adam's two moments.
TEST(BackendSeam, DataParallelTrainsTheSameBits) {
  const Graph model = build_model("mlp-tiny", {});
  const search::CostModel cm(search::find_machine("dgx-h100").with_devices(2), search::default_efficiency());
  const search::Strategy s = search::MachineMapper(cm).map(search::data_parallel(model, 2));
  TrainOptions o;
  o.steps = 3, o.seed = 3, o.batches = 1, o.optimizer.kind = OptimizerKind::kAdam;
  expect_same_training(s.graph, {s.views.begin(), s.views.end()}, 2, o);
}

// ZeRO 2 and 3 give a bucket's whole gradients and weight copies back
// between their uses (device_executor.h, ZeroBlock); a backend that keeps
// the memory of what it is given back (Backend::release, as the GPU's)
// hands the same buffers back with what they held: the gradients must be
// zeroed again, the weights gathered again, or the bits change.
TEST(BackendSeam, ZeroStagesTwoAndThreeTrainTheSameBits) {
  const Graph model = build_model("gpt-tiny", {});
  const search::CostModel cm(search::find_machine("dgx-h100").with_devices(2), search::default_efficiency());
  const search::Strategy s = search::MachineMapper(cm).map(search::data_parallel(model, 2));
  // And over two micro-batches, each writing the gradients from zero.
  const pcgx::testing::MappedPlan accumulating =
      pcgx::testing::mapped_plan(search::pipelined(search::data_parallel(build_model("gpt-tiny", {{"batch", 8}}), 2), 2, true), 2);
  for (const ZeroStage zero : {ZeroStage::k2, ZeroStage::k3}) {
    SCOPED_TRACE(std::string("ZeRO ") + name(zero));
    TrainOptions o;
    o.steps = 3, o.seed = 3, o.batches = 1, o.optimizer.kind = OptimizerKind::kAdam, o.zero = zero;
    o.bucket_bytes = 1;  // a bucket per weight block: each given back after its own operator
    expect_same_training(s.graph, {s.views.begin(), s.views.end()}, 2, o);
    expect_same_training(accumulating.graph, accumulating.views, 2, o);
  }
}

// The expert's DLRM plan: tasks on other devices, moves, layout changes
// between degrees (blocks cut and placed), all-reduces of activations.
TEST(BackendSeam, LayoutChangesTrainTheSameBits) {
  const Graph model = build_model("dlrm-tiny", {{"batch", 8}});
  const search::CostModel cm(search::find_machine("dgx-h100").with_devices(4), search::default_efficiency());
  const search::Strategy s = search::MachineMapper(cm).map(*search::expert(model, cm.machine(), 4, 2));
  TrainOptions o;
  o.steps = 3, o.seed = 3, o.optimizer.lr = 0.05, o.batches = 1;
  expect_same_training(s.graph, {s.views.begin(), s.views.end()}, 4, o);
}

// A plan whose loss lives off device 0 (the whole model on device 1): the
// loss crosses to device 0 as a host value. Staged through the backend as
// if it were device memory, its host address was handed to the device copy
// ("cuda: copy to host: invalid argument" on a GPU; here a read of an
// unreadable address).
TEST(BackendSeam, ALossOffDeviceZeroReachesDeviceZero) {
  const Graph model = build_model("mlp-tiny", {});
  std::vector<MachineView> views(model.size());
  for (const Node& n : model.nodes())
    if (n.op->op_class != OpClass::kSource) views[static_cast<size_t>(n.id)].start = 1;
  TrainOptions o;
  o.steps = 3, o.seed = 3, o.batches = 1;
  expect_same_training(model, views, 2, o);
}

// A two-stage pipeline of four micro-batches under 1F1B: gradients cleared
// per micro-batch (the pipelined tensors') and per step (the weights'),
// weights' gradients summed over the micro-batches.
TEST(BackendSeam, APipelineTrainsTheSameBits) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const search::PipelineResult r = pcgx::testing::pipeline_plan(g, "cpu-host", 4, search::Algorithm::kDataParallel, {2, 4, 1});
  const pcgx::testing::MappedPlan p = pcgx::testing::plan_of(r, 4);
  TrainOptions o;
  o.steps = 3, o.seed = 3, o.batches = 2, o.optimizer.lr = 0.05;
  o.pipeline = PipelineShape{r.stages, r.micro_batches, r.virtual_stages, PipelineSchedule::k1F1B};
  expect_same_training(p.graph, p.views, p.devices, o);
}

// A timed run reads each kernel's time from the backend's marks around
// it, settled once per step (a GPU times its kernels by events without
// waiting between them): with marks 1 ms apart, every timed forward and
// backward call counts exactly 1 ms, on both devices and through buckets.
TEST(BackendSeam, KernelTimesAreTheBackendsMarks) {
  const Graph model = build_model("mlp-tiny", {});
  const search::CostModel cm(search::find_machine("dgx-h100").with_devices(2), search::default_efficiency());
  const search::Strategy s = search::MachineMapper(cm).map(search::data_parallel(model, 2));
  TrainOptions o;
  o.steps = 4, o.seed = 3, o.batches = 1, o.time_kernels = true;
  o.backend = [](int) { return std::make_unique<DisguisedBackend>(false, true); };
  const TrainResult r = train(s.graph, {s.views.begin(), s.views.end()}, 2, o);
  ASSERT_EQ(r.kernel_times.size(), s.graph.size());
  int64_t timed = 0;
  for (const Node& n : s.graph.nodes()) {
    const KernelTime& k = r.kernel_times[static_cast<size_t>(n.id)];
    if (n.op->op_class != OpClass::kCompute) continue;
    SCOPED_TRACE(n.name);
    ASSERT_GT(k.tasks, 0);
    timed += k.tasks;
    // 1 ms per call, less the trainer's correction for reading a clock
    // (clock_read_seconds: tens of nanoseconds); the host's clock around
    // these kernels would read microseconds.
    const auto tasks = static_cast<double>(k.tasks);
    EXPECT_NEAR(k.forward, tasks * DisguisedBackend::kTick, tasks * 1e-6);
    EXPECT_NEAR(k.backward, tasks * DisguisedBackend::kTick, tasks * 1e-6);  // one backward call per task
  }
  EXPECT_GT(timed, 0);
  EXPECT_EQ(r.timed_steps, 3);  // the first step is left out
}

}  // namespace
}  // namespace pcgx::runtime
