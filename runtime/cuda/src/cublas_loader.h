#pragma once
// cuBLAS, loaded when the first CUDA backend starts (library_loader.h).
// Only the calls the backend makes.
#include <cublas_v2.h>

#include <string>

namespace pcgx::runtime::cuda {

struct Cublas {
  std::string path;  // the file loaded
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
