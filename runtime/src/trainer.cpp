#include "pcgx/runtime/trainer.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/kernel_threads.h"
#include "pcgx/runtime/device_executor.h"
#include "pcgx/runtime/host_backend.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/mpi.h"
#include "pcgx/runtime/synthetic_task.h"
#include "device_setup.h"
#include "timed_communicator.h"

namespace pcgx::runtime {

namespace {

// What every device (thread or process) derives alike from the graph and seed.
struct Setup {
  std::vector<NodeId> weights, inputs;
  ExecutionPlan plan;
  std::optional<SyntheticTask> synthetic;  // when no data is given
  const BatchSource* data = nullptr;       // the user's
  std::map<NodeId, Tensor<float>> initial;
  int64_t first = 0;  // the first step to run (a resumed run's checkpoint step)
  const BatchSource& source() const { return data ? *data : *synthetic; }
};

// A tensor one of whose shards alone exceeds this machine's memory would
// end in an allocation failure naming nothing: named here, before any.
void check_shard_sizes(const Graph& g) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return;
  const double memory = static_cast<double>(pages) * static_cast<double>(page);
  for (const Node& n : g.nodes())
    for (const ParallelTensorShape& s : n.outputs) {
      const double bytes = static_cast<double>(s.shard_elements()) * sizeof(float);
      if (bytes > memory) {
        std::ostringstream o;
        o << std::fixed << std::setprecision(1) << describe(n) << ": one shard of its output " << s.to_string() << " takes "
          << bytes / 1073741824.0 << " GiB, more than this machine's " << memory / 1073741824.0 << " GiB of memory";
        throw Error(o.str());
      }
    }
}

Setup prepare(const Graph& g, std::span<const MachineView> views, int devices, const TrainOptions& options) {
  if (options.steps < 1) throw FieldError("TrainOptions.steps", "must be at least 1");
  check_shard_sizes(g);
  if (options.threads < 1) throw FieldError("TrainOptions.threads", "must be at least 1");
  if (options.trace_step >= options.steps) throw Error("the traced step " + std::to_string(options.trace_step) + " is beyond the run's " + std::to_string(options.steps) + " steps");
  validate(options.optimizer);
  validate(options.loss_scaling);
  if (options.recompute == Recompute::kOperators && options.recompute_operators.empty())
    throw FieldError("TrainOptions.recompute_operators", kOperatorsNeedNames);
  if (options.recompute != Recompute::kOperators && !options.recompute_operators.empty())
    throw FieldError("TrainOptions.recompute_operators", "applies to recompute operators");
  std::vector<NodeId> weights, inputs;
  for (const Node& n : g.nodes()) {
    if (n.op->is_weight) {
      // Replica slots of a source would be separate copies of one parameter,
      // each updated with part of its gradient.
      if (n.outputs[0].replica > 1)
        throw Error(describe(n) + ": a weight replicated at its source; strategies replicate weights with Replicate");
      weights.push_back(n.id);
    } else if (n.op->op_class == OpClass::kSource) {
      inputs.push_back(n.id);
    }
  }
  Setup s{std::move(weights), std::move(inputs), make_plan(g, views, devices, options.bucket_bytes), std::nullopt, options.data, {}};
  if (shards_gradients(highest_zero(options.zero, options.zero_weights)) && options.pipeline && options.pipeline->chunks() > 1)
    throw FieldError(shards_gradients(options.zero) ? "TrainOptions.zero" : "TrainOptions.zero_weights",
                     std::string("ZeRO stage ") + name(highest_zero(options.zero, options.zero_weights)) +
                                              " with pipeline stages: a pipelined plan shards at most the optimizer state "
                                              "(stage 1), as DeepSpeed's pipeline engine allows; stages 2 and 3 accumulate over "
                                              "micro-batches on one stage");
  // ZeRO 3 gathers each weight block for its reader: one bucket each, but
  // those kept whole.
  set_zero(s.plan, options.zero, options.zero_persistence_threshold, options.zero_weights, options.bucket_bytes);
  s.plan.precision = options.precision;
  // Under a schedule some layers of each chunk (and with interlaced chunks,
  // whose boundaries cross stages, any layers): the chunks first, one
  // recomputation plan, which set_pipeline then checks.
  if (options.pipeline && options.pipeline->in_flight() && plans_per_chunk(options.recompute, options.recompute_layers, *options.pipeline))
    s.plan.chunk = plan_chunks(s.plan, *options.pipeline, options.pipeline_devices);
  set_recompute(s.plan, options.recompute, options.recompute_layers, options.recompute_operators, options.attention);
  if (options.pipeline) set_pipeline(s.plan, *options.pipeline, options.pipeline_devices);
  // Batch k of a run serves steps k, k + batches, ...: more batches than
  // steps would never be read, so they are not made (--batches 10^9).
  if (!s.data) s.synthetic.emplace(g, options.seed, std::clamp<int64_t>(options.batches, 1, std::max<int64_t>(options.steps, 1)));
  if (options.initial_weights) check_weights(*options.initial_weights, g, s.weights, "initial weights");
  if (options.resume) {
    check_state(*options.resume, g, s.weights, options.optimizer.kind, "checkpoint");
    s.first = options.resume->step;
    if (s.first >= options.steps)
      throw FieldError("TrainOptions.steps", "the checkpoint is at step " + std::to_string(s.first) + ", so " +
                                                 std::to_string(options.steps) + " steps leave nothing to run");
  }
  if (options.trace_step >= 0 && options.trace_step < s.first) throw Error("the traced step is before the checkpoint's");
  for (NodeId w : s.weights)
    s.initial[w] = options.initial_weights ? options.initial_weights->at(g.node(w).name) : initial_weight(g.node(w), options.seed);
  return s;
}

// The tags of FP16's overflow vote (every step's, one at a time): apart
// from every node's and the gradient buckets' collective tags, the
// loss's (-2^62) and the gathers' (from -2^61 down).
constexpr int64_t kOverflowTag = -(int64_t{1} << 60), kOverflowAnswerTag = kOverflowTag - 1;

// Whether every device's gradients are finite: device 0 collects each
// one's answer and sends back the verdict. Its bytes are the runtime's own,
// not the plan's traffic, so they go to `bytes_sent` to be left out, as
// the checkpoint gathers' are.
bool agree_finite(Communicator& comm, bool finite, int64_t& bytes_sent) {
  if (comm.size() == 1) return finite;
  float verdict = finite ? 0.f : 1.f;
  if (comm.rank() == 0) {
    for (int r = 1; r < comm.size(); ++r) {
      float theirs = 0.f;
      comm.recv(r, kOverflowTag, std::span<float>(&theirs, 1));
      verdict = std::max(verdict, theirs);
    }
    for (int r = 1; r < comm.size(); ++r) comm.send(r, kOverflowAnswerTag, std::span<const float>(&verdict, 1));
    bytes_sent += static_cast<int64_t>(sizeof(float)) * (comm.size() - 1);
  } else {
    comm.send(0, kOverflowTag, std::span<const float>(&verdict, 1));
    comm.recv(0, kOverflowAnswerTag, std::span<float>(&verdict, 1));
    bytes_sent += static_cast<int64_t>(sizeof(float));
  }
  return verdict == 0.f;
}

// What one device did while timed.
struct UpdateTime {
  double seconds = 0, bytes = 0;
  DeviceTime device;
  int64_t calls = 0;  // sends and recvs timed
  int64_t state_bytes = 0;  // sent gathering checkpoints and the final weights, and FP16's overflow votes (not the plan's)
};

// The first step timed with time_kernels: the first (allocation, first
// touch) is left out unless it is the only one.
int64_t first_timed_step(const TrainOptions& o) {
  const int64_t first = o.resume ? o.resume->step : 0;
  return std::min<int64_t>(first + 1, o.steps - 1);
}

// Adds one device's timings into the result, less what reading the clock
// added to each timed interval (a kernel's forward, its backward, a send or
// a recv).
void add_timing(TrainResult& r, const Graph& g, const TrainOptions& o, const DeviceExecutor& ex, const UpdateTime& u) {
  const double read = clock_read_seconds();
  r.kernel_times.resize(g.size());
  DeviceTime d = u.device;
  for (size_t n = 0; n < g.size(); ++n) {
    const KernelTime& k = ex.kernel_times()[n];
    const double forward = std::max(0.0, k.forward - read * static_cast<double>(k.tasks));
    const double backward = std::max(0.0, k.backward - read * static_cast<double>(k.tasks));
    const double recompute = std::max(0.0, k.recompute - read * static_cast<double>(k.reruns));
    KernelTime& sum = r.kernel_times[n];
    sum.forward += forward, sum.backward += backward, sum.tasks += k.tasks, sum.recompute += recompute, sum.reruns += k.reruns;
    d.kernels += forward + backward + recompute;
  }
  r.timed_steps = o.steps - first_timed_step(o);
  r.update_seconds += u.seconds, r.update_bytes += u.bytes, r.update_words = update_words(priced_as(o.optimizer));
  r.bucket_copy_seconds += ex.bucket_copy_seconds(), r.bucket_copy_bytes += ex.bucket_copy_bytes();
  d.messages = std::max(0.0, d.messages - read * static_cast<double>(u.calls));
  d.update = u.seconds;
  r.device_times.push_back(d);
}

// One device's training loop; rank 0 records the losses and step times.
// `comm` outlives the device returned (its executor keeps a reference).
Device run_device(const Graph& g, const Setup& s, TimedCommunicator& comm, const TrainOptions& options, TrainResult& result,
                  UpdateTime& update, StepRecorder& recorder, StepRecorder::Clock::time_point origin) {
  const KernelThreadsScope threads(options.threads);
  Device d = open_device(s.plan, comm, options.backend);
  Backend& backend = *d.backend;
  DeviceExecutor* ex = d.ex.get();
  if (options.trace_step >= 0) ex->set_recorder(&recorder), comm.set_recorder(&recorder);
  for (NodeId w : s.weights) ex->set_source(w, s.initial.at(w));
  // What the optimizer updates: every parameter shard, or under ZeRO this
  // device's block of each gradient bucket (device_executor.h).
  const auto [params, grads] = ex->update_buffers();
  Optimizer opt(options.optimizer, ex->backend());
  // FP16's loss scaling: every device unscales its gradients and all agree
  // whether any overflowed (one float all-reduced over every device).
  const bool scaling = options.precision == Precision::kFp16;
  LossScaler scaler(options.loss_scaling);
  if (options.resume) {
    restore_state(*options.resume, s.plan, s.weights, *ex, ex->moment_shards(opt.state(params)));
    ex->shard_moments(opt.state(params));
    ex->drop_whole_copies();
    opt.set_steps(options.resume->updates >= 0 ? options.resume->updates : options.resume->step);
    if (scaling && options.resume->loss_scale > 0) scaler.restore(options.resume->loss_scale, options.resume->growth_tracker);
  }
  // The state onto device 0, through the host communicator, untimed.
  auto gather = [&](int64_t done, bool moments) {
    const bool timed = comm.timing();
    comm.set_timing(false);
    if (ex->gathers_whole_weights()) ex->gather_weights(true, &update.state_bytes);  // (ZeRO 3's copies, or its masters' blocks under mixed precision)
    const std::vector<ParameterSlot> slots =
        moments ? ex->unsharded_moments(opt.state(params), &update.state_bytes) : std::vector<ParameterSlot>{};
    TrainState st = gather_state(s.plan, s.weights, *ex, slots, comm, done, options.optimizer.kind, &update.state_bytes);
    ex->drop_whole_copies();  // (a step holds 1/r of the moments and, at stage 3, gathers the weights for use)
    st.updates = opt.steps();
    if (scaling) st.loss_scale = scaler.scale(), st.growth_tracker = scaler.growth_tracker();
    comm.set_timing(timed);
    return st;
  };
  if (comm.rank() == 0) {  // no allocation inside the loop of any usual length
    const auto records = static_cast<size_t>(std::min<int64_t>(options.steps, int64_t{1} << 20));
    result.losses.reserve(records);
    result.step_seconds.reserve(records);
  }
  // Timings before each timed step, put back when it stalls; sized once.
  std::vector<KernelTime> saved_kernels(options.time_kernels ? g.size() : 0);
  TimedCommunicator::Totals saved_comm;
  UpdateTime saved_update;
  double fastest = std::numeric_limits<double>::infinity();
  // Which batch the devices hold: a step that trains on the same batch
  // again (one batch, or its turn in the cycle repeating) does not upload
  // it again. Nothing writes an input's values (they and the layouts
  // filled from them are kept through the step, saved_tensors.h).
  int64_t resident = -1;
  for (int64_t step = s.first; step < options.steps; ++step) {
    const bool timing = options.time_kernels && step >= first_timed_step(options);
    if (timing) {
      std::copy(ex->kernel_times().begin(), ex->kernel_times().end(), saved_kernels.begin());
      saved_comm = comm.totals(), saved_update = update;
    }
    if (options.time_kernels && step == first_timed_step(options)) ex->set_timing(true), comm.set_timing(true);
    const bool traced = step == options.trace_step;
    if (traced) recorder.start(origin);
    const auto t0 = backend.now();
    if (const int64_t b = step % s.source().batches(); b != resident) {
      const auto& batch = s.source().batch(step);
      for (NodeId i : s.inputs) ex->set_source(i, batch.at(g.node(i).name));
      resident = b;
    }
    if (scaling) ex->set_loss_scale(scaler.scale());
    const double loss = ex->forward_backward();
    ex->synchronize_gradients();
    const auto u0 = backend.now();
    bool finite = true;
    if (scaling) {
      const float inv = 1.f / scaler.scale();
      for (const Buffer& gr : grads) finite &= backend.unscale(gr, inv);
      finite = agree_finite(comm, finite, update.state_bytes);
      scaler.update(!finite);
      if (!finite && comm.rank() == 0) result.skipped_steps.push_back(step);
    }
    if (finite) opt.step(params, grads);
    const auto u1 = backend.now();
    if (traced) recorder.record(StepEventKind::kUpdate, -1, -1, u0, u1);
    ex->gather_weights();
    const auto t1 = backend.now();
    if (timing) ex->settle_timings();
    if (traced) recorder.stop();
    if (timing) {
      const double dt = std::chrono::duration<double>(t1 - t0).count();
      if (dt > kStalledStep * fastest) {
        ex->restore_kernel_times(saved_kernels), comm.restore(saved_comm), update = saved_update;
        ++update.device.stalled;
      } else {
        update.seconds += std::chrono::duration<double>(u1 - u0).count();
        for (const Buffer& p : params) update.bytes += static_cast<double>(p.numel) * sizeof(float);
        update.device.step += dt;
        ++update.device.steps;
      }
      fastest = std::min(fastest, dt);
    }
    const int64_t done = step + 1;
    if (options.checkpoint_every > 0 && (done % options.checkpoint_every == 0 || done == options.steps)) {
      const TrainState st = gather(done, true);
      if (comm.rank() == 0 && options.checkpoint) options.checkpoint(st);
    }
    if (comm.rank() != 0) continue;
    const double dt = std::chrono::duration<double>(t1 - t0).count();
    result.losses.push_back(loss);
    result.step_seconds.push_back(dt);
    if (options.progress) options.progress({step + 1, options.steps, loss, dt});
  }
  update.device.messages = comm.seconds(), update.device.sends = comm.sends(), update.calls = comm.calls();
  // The trained weights onto device 0.
  TrainState final_state = gather(options.steps, false);
  if (comm.rank() == 0) {
    result.backend = backend.name(), result.backend_remarks = backend.remarks();
    if (scaling) result.loss_scale = scaler.scale();
    result.parameters = std::move(final_state.weights);
  }
  return d;
}

}  // namespace

double clock_read_seconds() {
  static const double seconds = [] {
    using Clock = std::chrono::steady_clock;
    std::vector<double> d(2001);
    for (double& x : d) {
      const auto a = Clock::now();
      x = std::chrono::duration<double>(Clock::now() - a).count();
    }
    std::nth_element(d.begin(), d.begin() + 1000, d.end());
    return d[1000];
  }();
  return seconds;
}

int default_kernel_threads(int local_devices) {
  const auto cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(local_devices, 1));
}

namespace {
int64_t gathering_buckets(const ExecutionPlan& plan) {
  return std::count_if(plan.buckets.begin(), plan.buckets.end(), [](const SyncBucket& b) { return b.gathered_for_use; });
}
}  // namespace

TrainResult train(const Graph& g, std::span<const MachineView> views, int devices, const TrainOptions& options) {
  const Setup setup = prepare(g, views, devices, options);
  TrainResult result;
  result.devices = devices;
  result.buckets_gathered_for_use = gathering_buckets(setup.plan);
  result.target = setup.synthetic ? setup.synthetic->target() : "";
  result.data = setup.source().describe();
  InProcessWorld world(devices);
  std::vector<Device> executors(static_cast<size_t>(devices));
  std::vector<UpdateTime> updates(static_cast<size_t>(devices));
  std::vector<std::unique_ptr<TimedCommunicator>> comms(static_cast<size_t>(devices));
  std::vector<StepRecorder> recorders(static_cast<size_t>(devices));
  const auto origin = StepRecorder::Clock::now();
  world.run([&](Communicator& comm) {
    const auto r = static_cast<size_t>(comm.rank());
    comms[r] = std::make_unique<TimedCommunicator>(comm);
    executors[r] = run_device(g, setup, *comms[r], options, result, updates[r], recorders[r], origin);
  });
  if (options.trace_step >= 0) {
    std::vector<StepRecorder*> all;
    for (StepRecorder& r : recorders) all.push_back(&r);
    result.trace = collect_trace(options.trace_step, std::move(all));
  }
  result.bytes_sent = world.bytes_sent();
  for (const UpdateTime& u : updates) result.bytes_sent -= u.state_bytes;
  if (options.time_kernels)
    for (size_t r = 0; r < executors.size(); ++r) add_timing(result, g, options, *executors[r].ex, updates[r]);
  for (const Device& d : executors) {
    result.buffer_bytes = std::max(result.buffer_bytes, d.ex->buffer_bytes());
    result.device_buffer_bytes.push_back(d.ex->buffer_bytes());
    result.activation_sets.push_back(d.ex->activation_sets());
  }
  return result;
}

TrainResult train(const Graph& g, std::span<const MachineView> views, MpiWorld& world, const TrainOptions& options) {
  const Setup setup = prepare(g, views, world.size(), options);
  TrainResult result;
  result.devices = world.size();
  result.buckets_gathered_for_use = gathering_buckets(setup.plan);
  result.target = setup.synthetic ? setup.synthetic->target() : "";
  result.data = setup.source().describe();
  Communicator& comm = world.communicator();
  TimedCommunicator timed(comm);
  UpdateTime update;
  StepRecorder recorder;
  const Device device = run_device(g, setup, timed, options, result, update, recorder, StepRecorder::Clock::now());
  const DeviceExecutor* ex = device.ex.get();
  if (options.trace_step >= 0 && comm.rank() == 0) result.trace = collect_trace(options.trace_step, {&recorder});
  result.bytes_sent = world.sum(world.bytes_sent() - update.state_bytes);
  if (options.time_kernels) add_timing(result, g, options, *ex, update);
  result.buffer_bytes = ex->buffer_bytes();
  result.device_buffer_bytes = {ex->buffer_bytes()};
  result.activation_sets = {ex->activation_sets()};
  return result;
}

}  // namespace pcgx::runtime
