#include "pcgx/runner/backend_choice.h"

#include <cstdlib>

#include "pcgx/pcg/error.h"
#ifdef PCGX_HAVE_CUDA
#include "pcgx/runtime/cuda/cuda_backend.h"
#endif

namespace pcgx::runner {

const char* backend_name(BackendKind k) {
  switch (k) {
    case BackendKind::kAuto: return "auto";
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kMpi: return "mpi";
    case BackendKind::kCuda: return "cuda";
  }
  return "?";
}

int cuda_devices(std::string* why) {
#ifdef PCGX_HAVE_CUDA
  return runtime::cuda::device_count(why);
#else
  if (why) *why = "this pcgx was built without CUDA (no nvcc when it was configured)";
  return 0;
#endif
}

BackendKind resolve(BackendKind k, bool under_mpi) {
  if (k != BackendKind::kAuto) return k;
  if (cuda_devices() > 0) return BackendKind::kCuda;
  return under_mpi ? BackendKind::kMpi : BackendKind::kCpu;
}

std::function<std::unique_ptr<runtime::Backend>(int)> backend_factory(const BackendSetup& setup) {
  if (setup.kind != BackendKind::kCuda) return {};
  std::string why;
  const int gpus = cuda_devices(&why);
  if (gpus == 0) throw Error("the CUDA backend needs a GPU: " + why);
#ifdef PCGX_HAVE_CUDA
  // Under mpirun the rank's place on its node picks the GPU where the
  // launcher says it (Open MPI, MPICH); else the rank itself.
  int local = -1;
  if (setup.under_mpi)
    for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"})
      if (const char* s = std::getenv(v)) local = std::atoi(s);
  const Precision products = setup.products;
  return [gpus, local, products](int device) -> std::unique_ptr<runtime::Backend> {
    runtime::cuda::CudaOptions o;
    o.device = (local >= 0 ? local : device) % gpus;
    o.products = products;
    return std::make_unique<runtime::cuda::CudaBackend>(o);
  };
#else
  return {};
#endif
}

ChosenBackend choose_backend(BackendKind requested) {
  const bool under_mpi = runtime::mpi_launched();
  ChosenBackend c;
  c.kind = resolve(requested, under_mpi);
  c.gpu = c.kind == BackendKind::kCuda;
  if (c.gpu) {
    std::string why;
    if (cuda_devices(&why) == 0) throw FieldError("BackendKind", "cuda needs a GPU, and there is none: " + why);
  }
  if (c.kind == BackendKind::kMpi || (c.gpu && under_mpi)) c.world = std::make_unique<runtime::MpiWorld>();
  return c;
}

}  // namespace pcgx::runner
