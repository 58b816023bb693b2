#pragma once
// What a run needs to go on where it stopped: the trained weights, the
// optimizer's state and the step, as logical tensors by Weight name, so a
// state saved by one plan loads into any plan of the same model (on the
// same plan, resuming gives the same bits as not stopping). A checkpoint
// is one on disk: a directory holding weights.safetensors (the weights,
// readable as a PyTorch state dict), optimizer.safetensors ("m/NAME" and,
// for Adam, "v/NAME": SGD's momentum buffer is m) and state.json (format
// "pcgx.checkpoint", the step, the optimizer, the model). The data
// position is the step: batch k serves step k (trainer.h).
#include <cstdint>
#include <span>
#include <string>

#include "pcgx/pcg/graph.h"
#include "pcgx/runtime/communicator.h"
#include "pcgx/runtime/device_executor.h"
#include "pcgx/runtime/backend.h"
#include "pcgx/runtime/safetensors.h"

namespace pcgx::runtime {

struct TrainState {
  int64_t step = 0;        // steps done; the next step runs batch `step`
  std::string optimizer;   // OptimizerOptions::kind it was made with
  NamedTensors weights;    // by Weight name
  NamedTensors moments;    // "m/NAME", "v/NAME"
  // Optimizer updates taken: fewer than `step` where FP16's loss scaling
  // skipped steps (Adam's bias correction counts updates); -1: `step`.
  int64_t updates = -1;
  // FP16's loss scaler (low_precision.h): its scale (0: none) and the
  // successful steps since it last changed.
  float loss_scale = 0;
  int64_t growth_tracker = 0;
};

// The state after `step` steps, gathered onto rank 0 through `comm`, a
// communicator of host memory (every device calls; the others get an
// empty state). `weights` lists the graph's Weight nodes; `slots` are the
// optimizer's (Optimizer::state), in the executor's parameter_shards()
// order, or empty for the weights alone (the end of a run). Adds the bytes
// this device sent to `bytes_sent`: they are not the plan's traffic.
TrainState gather_state(const ExecutionPlan& plan, std::span<const NodeId> weights, DeviceExecutor& ex,
                        std::span<const ParameterSlot> slots, Communicator& comm, int64_t step, OptimizerKind optimizer,
                        int64_t* bytes_sent = nullptr);

// Checks weights against the graph's (every one present with its logical
// shape, no other name), naming `source` and the tensor in the error.
void check_weights(const NamedTensors& w, const Graph& g, std::span<const NodeId> weights, const std::string& source);
// The same for a whole state, and its moments for `optimizer`.
void check_state(const TrainState& s, const Graph& g, std::span<const NodeId> weights, OptimizerKind optimizer,
                 const std::string& source);

// Sets this device's shards of the weights and of the optimizer's moments.
void restore_state(const TrainState& s, const ExecutionPlan& plan, std::span<const NodeId> weights, DeviceExecutor& ex,
                   std::span<const ParameterSlot> slots);

// A checkpoint directory, written all or none: into DIR.partial, then
// swapped in (an older DIR is replaced only once the new one is complete).
// A write that fails leaves no DIR.partial behind.
void write_checkpoint(const std::string& dir, const TrainState& s, const std::string& model);
// What write_checkpoint will need, checked before any training: DIR is
// absent or a checkpoint (or empty), and DIR.partial can be created next to
// it and DIR moved aside (a probe, removed). Throws pcgx::Error naming DIR.
void check_checkpoint_target(const std::string& dir);
// Throws pcgx::Error naming the file and field of a missing or malformed one.
TrainState read_checkpoint(const std::string& dir);

}  // namespace pcgx::runtime
