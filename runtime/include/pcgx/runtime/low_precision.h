#pragma once
// Mixed-precision training on a device without BF16/FP16 arithmetic (the
// CPU; docs/training.md "Precision"). A tensor "in BF16" is FP32 storage
// holding only values BF16 can represent: every value a kernel writes is
// rounded to the nearest one (ties to even, as a hardware conversion
// rounds), so a kernel that reads it computes on exactly the BF16 inputs
// and accumulates in FP32, as tensor cores and PyTorch's CPU BF16 kernels
// do. The numerics are those of real BF16/FP16 storage; the memory is
// FP32's (correctness, not speed).
//
// FP16's range is small (largest finite 65504), so an FP16 run scales the
// loss before the backward pass and unscales the gradients after it,
// skipping the step when any of them overflowed: LossScaler is PyTorch's
// GradScaler algorithm.
#include <cstdint>
#include <span>

#include "pcgx/pcg/precision.h"

namespace pcgx::runtime {

// The value nearest `x` in BF16 (8-bit exponent, 8 significant bits) or
// FP16 (5-bit exponent, 11 significant bits, subnormals down to 2^-24),
// ties to even; FP16 rounds finite values from 65520 up to infinity, as the
// conversion does. NaN stays NaN, infinities stay.
float round_to_bf16(float x);
float round_to_fp16(float x);
// Every element rounded to `p` where `p` stores activations in 16 bits
// (is_mixed); unchanged for fp32 and tf32.
void round_to(Precision p, std::span<float> x);
// x *= factor; whether every element of the result is finite.
bool unscale(std::span<float> x, float factor);

// Dynamic loss scaling, with torch.cuda.amp.GradScaler's defaults and
// rules: the backward pass starts from the loss times scale(); when the
// unscaled gradients hold an infinity or a NaN the step is skipped
// (update(true)) and the scale multiplied by backoff_factor; after
// growth_interval steps in a row without one it is multiplied by
// growth_factor.
struct LossScaling {
  float initial_scale = 65536.f;  // 2^16
  float growth_factor = 2.f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
};
// A bad option as pcgx::FieldError naming LossScaling's field.
void validate(const LossScaling& s);

class LossScaler {
 public:
  explicit LossScaler(const LossScaling& s = {}) : s_(s), scale_(s.initial_scale) {}
  float scale() const { return scale_; }
  // Successful steps since the last change of the scale.
  int64_t growth_tracker() const { return tracker_; }
  // After a step's gradients were unscaled: whether any overflowed.
  void update(bool found_inf);
  // Resuming (train_state.h).
  void restore(float scale, int64_t growth_tracker) { scale_ = scale, tracker_ = growth_tracker; }

 private:
  LossScaling s_;
  float scale_;
  int64_t tracker_ = 0;
};

}  // namespace pcgx::runtime
