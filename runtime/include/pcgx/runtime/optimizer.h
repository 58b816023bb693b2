#pragma once
// Optimizers: SGD with momentum (PyTorch's form: v = mu v + g; w -= lr v)
// and Adam (bias-corrected). Each device updates the weight shards it owns;
// state is kept per shard in the device's backend, allocated on the first
// step, and the backend runs the update (backend.h, UpdateRule).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/optimizer_state.h"
#include "pcgx/runtime/backend.h"

namespace pcgx::runtime {

// "sgd", "adam": the name run reports and checkpoints record.
const char* name(OptimizerKind kind);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;
  double momentum = 0.9;     // sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam
};

// Throws FieldError (OptimizerOptions.lr, .momentum) for a value out of range.
void validate(const OptimizerOptions& o);
// What the cost and memory models price it as (pcg/optimizer_state.h):
// Adam, or SGD with momentum, also at momentum 0 (the runtime keeps and
// streams the velocity buffer whatever the momentum).
OptimizerState priced_as(const OptimizerOptions& o);

class Optimizer {
 public:
  Optimizer(OptimizerOptions options, Backend& backend);
  // One update of params[i] by grads[i]; the list must be the same every step.
  void step(std::span<const Buffer> params, std::span<const Buffer> grads);
  // The moments of params[i] (zero until the first step; allocated here,
  // so a resumed run can set them before it), the same list.
  std::span<const ParameterSlot> state(std::span<const Buffer> params);
  const OptimizerOptions& options() const { return o_; }
  // Updates taken: Adam's bias correction depends on it.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t n) { steps_ = n; }

 private:
  OptimizerOptions o_;
  Backend& backend_;
  int64_t steps_ = 0;
  std::vector<ParameterSlot> slots_;
};

}  // namespace pcgx::runtime
