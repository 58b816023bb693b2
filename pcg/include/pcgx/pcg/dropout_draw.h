#pragma once
// Dropout's mask: a hash of (seed, global element index) mapped to [0, 1),
// so every partitioning of a tensor drops the same elements, and every
// backend (the CPU's kernels, runtime/cuda's) draws the same values. An
// element is kept when its draw is at least the rate. The one definition
// compiles as device code too when nvcc includes it (no CUDA header here).
#include <cstdint>

#ifdef __CUDACC__
#define PCGX_HOST_DEVICE __host__ __device__
#else
#define PCGX_HOST_DEVICE
#endif

namespace pcgx {

PCGX_HOST_DEVICE inline double keep_draw(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + index + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

}  // namespace pcgx
