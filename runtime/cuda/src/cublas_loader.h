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
  // BF16/FP16 products: the form taking a cublasComputeType_t (C++ also
  // declares an inline overload on cudaDataType, so decltype cannot name it).
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                                            cudaDataType, int, long long, const void*, cudaDataType, int, long long, const void*, void*,
                                            cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

// Throws pcgx::Error naming the library when it cannot be loaded.
const Cublas& cublas();

}  // namespace pcgx::runtime::cuda
