#pragma once
// cuBLAS, loaded when the first CUDA backend starts rather than linked:
// linking it costs every start of the pcgx binary ~70 ms of mapping its
// libraries (measured: an empty program linked with -lcublas starts in 72
// ms, without it in 2 ms), whether or not a GPU is used, and the CLI tests
// start pcgx hundreds of times. Only the calls the backend makes.
#include <cublas_v2.h>

namespace pcgx::runtime::cuda {

struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
};

// Throws pcgx::Error naming the library when it cannot be loaded.
const Cublas& cublas();

}  // namespace pcgx::runtime::cuda
