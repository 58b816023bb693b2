#include "cublas_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "pcgx/pcg/error.h"

namespace pcgx::runtime::cuda {
namespace {

template <class F>
void bind(void* lib, F& f, const char* name, const std::string& path) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) throw Error("cuda: " + path + " has no " + name);
}

}  // namespace

const Cublas& cublas() {
  static Cublas c;
  static std::string failed;
  static std::once_flag once;
  std::call_once(once, [] {
    // The major version the headers were built against, then any.
    const std::string versioned = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    std::string path = versioned;
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    // Where the toolkit pcgx was built with keeps it, when the loader's
    // cache does not list it.
    if (!lib) lib = dlopen((path = std::string(PCGX_CUDA_LIBRARY_DIR) + "/" + versioned).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen((path = "libcublas.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      failed = "cuda: cannot load cuBLAS (" + versioned + "): " + dlerror();
      return;
    }
    try {
      bind(lib, c.create, "cublasCreate_v2", path);
      bind(lib, c.destroy, "cublasDestroy_v2", path);
      bind(lib, c.set_stream, "cublasSetStream_v2", path);
      bind(lib, c.set_math_mode, "cublasSetMathMode", path);
      bind(lib, c.sgemm, "cublasSgemm_v2", path);
      bind(lib, c.sgemm_strided_batched, "cublasSgemmStridedBatched", path);
    } catch (const Error& e) {
      failed = e.what();
    }
  });
  if (!failed.empty()) throw Error(failed);
  return c;
}

}  // namespace pcgx::runtime::cuda
