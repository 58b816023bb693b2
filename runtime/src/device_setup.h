#pragma once
// One device of a run, as the trainer and the evaluator open it (internal
// to runtime/): its backend, a staging communicator when the backend's
// memory is not the host's (staging_communicator.h), and the executor.
#include <functional>
#include <memory>

#include "pcgx/pcg/kernel_threads.h"
#include "pcgx/runtime/device_executor.h"
#include "pcgx/runtime/host_backend.h"
#include "staging_communicator.h"

namespace pcgx::runtime {

// Destroyed in reverse: the executor first.
struct Device {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<StagingCommunicator> staging;
  std::unique_ptr<DeviceExecutor> ex;
};

// On the device's own thread: `make` (null: the host's backend) for rank
// comm.rank(). `comm` must outlive the device.
inline Device open_device(const ExecutionPlan& plan, Communicator& comm, const std::function<std::unique_ptr<Backend>(int)>& make) {
  Device d;
  d.backend = make ? make(comm.rank()) : std::make_unique<HostBackend>();
  Communicator* c = &comm;
  if (!d.backend->host_memory()) c = (d.staging = std::make_unique<StagingCommunicator>(comm, *d.backend)).get();
  d.ex = std::make_unique<DeviceExecutor>(plan, *c, *d.backend, &comm);
  return d;
}

// The kernel threads of one device for a scope: one device runs on the
// caller's thread, whose own setting comes back after.
struct KernelThreadsScope {
  int saved = kernel_threads();
  explicit KernelThreadsScope(int n) { set_kernel_threads(n); }
  ~KernelThreadsScope() { set_kernel_threads(saved); }
};

}  // namespace pcgx::runtime
