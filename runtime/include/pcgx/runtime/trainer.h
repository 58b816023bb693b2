#pragma once
// Training a PCG end to end on N virtual devices in this process: builds
// the execution plan, starts one thread per device, and runs forward,
// backward and the optimizer step after step on a synthetic task
// (synthetic_task.h). A run of a parallel strategy matches a run of the
// unpartitioned model on one device with the same seed: same initial
// weights, same batches, same dropout masks.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pcgx/runtime/backend.h"
#include "pcgx/runtime/dataset.h"
#include "pcgx/runtime/device_executor.h"
#include "pcgx/runtime/execution_plan.h"
#include "pcgx/runtime/low_precision.h"
#include "pcgx/runtime/optimizer.h"
#include "pcgx/runtime/step_trace.h"
#include "pcgx/runtime/train_state.h"

namespace pcgx::runtime {

struct StepReport {
  int64_t step = 0;   // 1-based
  int64_t steps = 0;
  double loss = 0;
  double seconds = 0;  // this step's wall time
};

struct TrainOptions {
  int64_t steps = 50;
  OptimizerOptions optimizer;
  uint64_t seed = 1;
  int64_t batches = 8;  // distinct synthetic batches, cycled (at most `steps` are made)
  const BatchSource* data = nullptr;  // the batches (dataset.h); null: the synthetic teacher task
  int threads = 1;  // kernel threads of each device (pcgx/pcg/kernel_threads.h); results do not depend on it
  bool time_kernels = false;  // fill TrainResult::kernel_times (steps after the first)
  double bucket_bytes = kDefaultBucketBytes;  // gradient buckets (execution_plan.h)
  // ZeRO stage (pcg/training_recipe.h): from 1, each bucket's devices
  // reduce-scatter its gradients, update a block each and all-gather the
  // weights (device_executor.h); the final weights are stage 0's up to the
  // order gradients are summed in.
  ZeroStage zero = ZeroStage::k0;
  // At stage 3, weight blocks of fewer parameters stay whole, gathered after
  // the update (TrainingRecipe::zero_persistence_threshold).
  int64_t zero_persistence_threshold = 0;
  // The weights at another stage (TrainingRecipe::zero_weights).
  ZeroWeights zero_weights;
  // Activation recomputation (pcg/training_recipe.h): the backward pass
  // re-runs what the policy does not keep (device_executor.h); the
  // gradients are the same bits as keeping everything.
  Recompute recompute = Recompute::kNone;
  int32_t recompute_layers = kAllLayers;  // under full: the first N layers only (of each chunk under a pipeline schedule)
  std::vector<std::string> recompute_operators;  // under operators: their names (training_recipe.h)
  // Under flash, the attention kernels' scores are not kept but re-run in
  // backward, as a FlashAttention kernel does (recompute_plan.h); the
  // kernels themselves stay eager on the CPU: the same values. Fused (a
  // scale and softmax as one kernel) runs as eager.
  AttentionKernel attention = AttentionKernel::kEager;
  // The pipeline schedule a graph with micro-batches runs (set_pipeline,
  // execution_plan.h); none: its micro-batches one at a time through the
  // whole graph.
  std::optional<PipelineShape> pipeline;
  int64_t pipeline_devices = 0;  // the devices its stages split (a strategy file's); 0: those the tasks use
  // Training precision (pcg/precision.h; fp32 and tf32 alike on the CPU):
  // bf16 and fp16 store activations and compute copies of the weights in
  // 16 bits and update FP32 masters (device_executor.h); fp16 also scales
  // the loss dynamically (`loss_scaling`, PyTorch's GradScaler): a step
  // whose gradients overflow is skipped, its batch still consumed.
  Precision precision = kDefaultPrecision;
  LossScaling loss_scaling;
  int64_t trace_step = -1;  // 0-based: record this step's timeline into TrainResult::trace; -1: none
  std::function<void(const StepReport&)> progress;  // called on every step, from device 0's thread
  // Initial weights by Weight name (safetensors.h); null: initial_weight()'s
  // from `seed`. Every weight must be there with its shape, and no other.
  const NamedTensors* initial_weights = nullptr;
  // Goes on from a state (train_state.h): steps resume->step .. steps-1 run,
  // with its weights and optimizer moments; null: from step 0.
  const TrainState* resume = nullptr;
  // Called on device 0 with the state after every `checkpoint_every`-th
  // step and after the last (0: never).
  int64_t checkpoint_every = 0;
  std::function<void(const TrainState&)> checkpoint;
  // Each device's backend (backend.h), made on the device's own thread
  // from its rank; null: the host's. A backend whose memory is not the
  // host's exchanges messages through host copies (staging_communicator.h).
  std::function<std::unique_ptr<Backend>(int device)> backend;
};

// Where one device's timed steps went (with TrainOptions::time_kernels,
// summed over the timed steps): its kernels, sending and waiting for
// messages, the optimizer; the rest of the step is running the nodes
// (the executor's loops, zeroing, copies, a collective's sums).
//
// A timed step that took more than kStalledStep times the fastest timed
// step before it stalled (on a shared machine another thread had the core
// for a while): its timings are left out, so that one stall does not
// inflate a profile built from a dozen steps.
inline constexpr double kStalledStep = 1.5;
struct DeviceTime {
  double step = 0, kernels = 0, messages = 0, update = 0;
  int64_t sends = 0;    // messages sent
  int64_t steps = 0;    // timed steps summed (those that did not stall)
  int64_t stalled = 0;  // timed steps left out
  double other() const { return step - kernels - messages - update; }
};

struct TrainResult {
  std::vector<double> losses;        // per step, before its update
  // FP16: the steps (0-based) loss scaling skipped, and the scale at the
  // end (0 for other precisions).
  std::vector<int64_t> skipped_steps;
  float loss_scale = 0;
  std::vector<double> step_seconds;  // per step
  std::map<std::string, Tensor<float>> parameters;  // final weights by name (logical values)
  int64_t bytes_sent = 0;            // between devices, whole run
  // ZeRO 3: the gradient buckets whose weight block is gathered before
  // each use (0: every block under the persistence threshold, kept whole).
  int64_t buckets_gathered_for_use = 0;
  // The most buffer memory any device's executor held at once
  // (DeviceExecutor::buffer_bytes: activations, gradients, messages,
  // buckets; not the optimizer's state); under MPI, rank 0's.
  int64_t buffer_bytes = 0;
  // Per device (under MPI, rank 0 alone): its buffer_bytes, and under a
  // pipeline schedule the activation sets it held per chunk (the most
  // micro-batches in flight there; DeviceExecutor::activation_sets).
  std::vector<int64_t> device_buffer_bytes;
  std::vector<std::vector<int64_t>> activation_sets;
  int devices = 1;
  std::string target;                // the input the teacher labels ("" with user data)
  std::string data;                  // BatchSource::describe()
  std::string backend = "cpu";       // Backend::name() of device 0
  std::string backend_remarks;       // Backend::remarks() of device 0
  // With TrainOptions::time_kernels: per node, kernel time summed over every
  // device's tasks (under MPI, rank 0's tasks only) in the steps timed
  // (each device's that did not stall: DeviceTime::steps).
  std::vector<KernelTime> kernel_times;
  int64_t timed_steps = 0;  // steps timed, stalled ones included
  // The optimizer's updates over the timed steps, summed over devices,
  // and the FP32 words each streamed per parameter (update_words: a mixed
  // run's compute copies are refreshed after the timed update).
  double update_seconds = 0, update_bytes = 0, update_words = 0;
  // Gradient buckets' copies in and out over the timed steps (the
  // all-reduces aside), summed over devices; bytes of gradient copied.
  double bucket_copy_seconds = 0, bucket_copy_bytes = 0;
  // Per device (under MPI, rank 0 alone), with time_kernels.
  std::vector<DeviceTime> device_times;
  // With TrainOptions::trace_step: that step's timeline (step_trace.h).
  StepTrace trace;
};

// What reading the clock around a call adds to the interval it measures
// (the median of empty intervals, measured once per process: about 20 ns
// here). Timed kernels and messages have it taken off (add_timing in
// trainer.cpp): a tiny model's kernels last 100-300 ns, and timing them
// inflated the profile by 10-20%.
double clock_read_seconds();

// Kernel threads per device that share this machine's cores among
// `local_devices` devices running on it: at least 1.
int default_kernel_threads(int local_devices);

// Throws pcgx::Error for a graph the runtime cannot run (see make_plan), a
// weight whose source is itself replicated, or bad options.
TrainResult train(const Graph& g, std::span<const MachineView> views, int devices, const TrainOptions& options);

class MpiWorld;
// The same with one device per MPI rank (mpi.h): every rank calls it with
// the same arguments; the result (losses, step times, final parameters,
// bytes moved by all ranks) is complete on rank 0 only.
TrainResult train(const Graph& g, std::span<const MachineView> views, MpiWorld& world, const TrainOptions& options);

}  // namespace pcgx::runtime
