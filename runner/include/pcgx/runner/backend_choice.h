#pragma once
// Which backend trains a plan (docs/design.md "Runtime"): the CPU's virtual
// devices in this process, MPI ranks (one device each, host memory), or
// CUDA GPUs (runtime/cuda; in this process or one rank per GPU under
// mpirun). `auto` takes CUDA when a GPU is visible, else MPI when started
// by mpirun, else the CPU.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pcgx/pcg/precision.h"
#include "pcgx/runtime/backend.h"
#include "pcgx/runtime/mpi.h"

namespace pcgx::runner {

enum class BackendKind : uint8_t { kAuto, kCpu, kMpi, kCuda };
inline constexpr BackendKind kBackendKinds[] = {BackendKind::kAuto, BackendKind::kCpu, BackendKind::kMpi, BackendKind::kCuda};
// auto, cpu, mpi, cuda: what reports print and the command line reads.
const char* backend_name(BackendKind k);

// The GPUs this build's CUDA backend sees: 0, with the reason in `why`,
// when there are none or pcgx was built without CUDA.
int cuda_devices(std::string* why = nullptr);

// `auto` made concrete for this process (the others stay as they are).
BackendKind resolve(BackendKind k, bool under_mpi);

struct BackendSetup {
  BackendKind kind = BackendKind::kCpu;
  bool under_mpi = false;  // one device per MPI rank
  // What CUDA computes products in (runtime::cuda::CudaOptions::products).
  Precision products = Precision::kTf32;
};
// Each device's backend, as runtime::TrainOptions::backend takes it:
// empty for the host; for CUDA, device d (a virtual device, or an MPI
// rank) on GPU d mod the GPUs visible, so several virtual devices can
// share one. Throws pcgx::Error for CUDA without a GPU, saying why.
std::function<std::unique_ptr<runtime::Backend>(int)> backend_factory(const BackendSetup& setup);

// A requested backend made concrete for this process: the kind, and the
// MPI world when it runs on MPI ranks (or on GPUs under mpirun). Throws
// pcgx::Error for CUDA without a GPU, saying why.
struct ChosenBackend {
  BackendKind kind = BackendKind::kCpu;
  bool gpu = false;
  std::unique_ptr<runtime::MpiWorld> world;
};
ChosenBackend choose_backend(BackendKind requested);

}  // namespace pcgx::runner
