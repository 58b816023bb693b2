#include "pcgx/runtime/low_precision.h"

#include <bit>
#include <cmath>
#include <limits>

#include "pcgx/pcg/error.h"

namespace pcgx::runtime {

float round_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;  // NaN
  // Round the 16 bits dropped to nearest, ties to even; a carry into the
  // exponent is right, up to infinity.
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xffff0000u);
}

float round_to_fp16(float x) {
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  // 65520 lies halfway between the largest FP16 value (65504) and the
  // next power of two, which would be the next one: ties to even round up.
  if (a >= 65520.f) return std::copysign(std::numeric_limits<float>::infinity(), x);
  float r;
  if (a < 0x1p-14f) {
    // Subnormal FP16: multiples of 2^-24; the scaling is exact, and
    // nearbyint rounds to nearest even in the default rounding mode.
    r = std::nearbyint(a * 0x1p24f) * 0x1p-24f;
  } else {
    // 10 stored significand bits of FP32's 23: drop 13, ties to even.
    uint32_t u = std::bit_cast<uint32_t>(a);
    u += 0xfffu + ((u >> 13) & 1u);
    r = std::bit_cast<float>(u & ~0x1fffu);
  }
  return std::copysign(r, x);
}

void round_to(Precision p, std::span<float> x) {
  if (p == Precision::kBf16)
    for (float& v : x) v = round_to_bf16(v);
  else if (p == Precision::kFp16)
    for (float& v : x) v = round_to_fp16(v);
}

bool unscale(std::span<float> x, float factor) {
  bool finite = true;
  for (float& v : x) {
    v *= factor;
    finite &= std::isfinite(v);
  }
  return finite;
}

void validate(const LossScaling& s) {
  if (!(s.initial_scale > 0) || !std::isfinite(s.initial_scale)) throw FieldError("LossScaling.initial_scale", "must be a positive number");
  if (!(s.growth_factor > 1) || !std::isfinite(s.growth_factor)) throw FieldError("LossScaling.growth_factor", "must be above 1");
  if (!(s.backoff_factor > 0 && s.backoff_factor < 1)) throw FieldError("LossScaling.backoff_factor", "must be between 0 and 1");
  if (s.growth_interval < 1) throw FieldError("LossScaling.growth_interval", "must be at least 1");
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= s_.backoff_factor;
    tracker_ = 0;
  } else if (++tracker_ == s_.growth_interval) {
    scale_ *= s_.growth_factor;
    tracker_ = 0;
  }
}

}  // namespace pcgx::runtime
