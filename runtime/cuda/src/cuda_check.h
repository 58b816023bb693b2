#pragma once
// A CUDA runtime call's error as a pcgx::Error naming the call.
#include <cuda_runtime.h>

#include <string>

#include "pcgx/pcg/error.h"

namespace pcgx::runtime::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace pcgx::runtime::cuda
