#include "cublas_loader.h"

#include <string>

#include "library_loader.h"

namespace pcgx::runtime::cuda {

const Cublas& cublas() {
  return load_once<Cublas>([](Cublas& c) {
    // The major version the headers were built against, then any.
    const LoadedLibrary lib = load_library({"libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), "libcublas.so"}, "cuBLAS");
    c.path = lib.path;
    bind(lib, c.create, "cublasCreate_v2");
    bind(lib, c.destroy, "cublasDestroy_v2");
    bind(lib, c.set_stream, "cublasSetStream_v2");
    bind(lib, c.set_math_mode, "cublasSetMathMode");
    bind(lib, c.sgemm, "cublasSgemm_v2");
    bind(lib, c.sgemm_strided_batched, "cublasSgemmStridedBatched");
    bind(lib, c.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
  });
}

}  // namespace pcgx::runtime::cuda
