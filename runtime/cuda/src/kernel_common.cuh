#pragma once
// What the backend's kernel files share (kernels.cu, vision_kernels.cu):
// the launch shape of element-wise kernels, the grid-stride loop (any
// launch size covers any n) and the CPU's activations.
#include <cstdint>

#include "kernels.h"

namespace pcgx::runtime::cuda {

inline constexpr int kThreads = 256;

inline int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

// Division by a divisor fixed for a launch, in 32-bit integers: n / d as
// a multiply-high, an add and a shift (Granlund and Montgomery's
// round-up method), where a 64-bit division is a long instruction
// sequence per element. Exact for every n < 2^31 and 1 <= d < 2^31.
struct FastDiv {
  uint32_t d = 1, magic = 1, shift = 0;
  FastDiv() = default;
  explicit FastDiv(int64_t divisor) : d(static_cast<uint32_t>(divisor)) {
    while ((uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ uint32_t div(uint32_t n) const { return (__umulhi(n, magic) + n) >> shift; }
};
// Whether a launch over n elements can index them with 32-bit FastDiv.
inline bool fits_fast_div(int64_t n) { return n < (int64_t{1} << 31); }

#define PCGX_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// The CPU's formulas (pcg/src/ops/vector_math.cpp), in float.
__device__ inline float act_f(Act act, float v) {
  switch (act) {
    case Act::kNone: return v;
    case Act::kRelu: return v > 0.f ? v : 0.f;
    case Act::kGelu: return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    case Act::kSigmoid: return 1.f / (1.f + expf(-v));
    case Act::kTanh: return tanhf(v);
  }
  return v;
}

}  // namespace pcgx::runtime::cuda
