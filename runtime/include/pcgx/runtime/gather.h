#pragma once
// One tensor of a plan gathered onto device 0 as its logical value (replica
// slot 0), through a communicator of host memory: what checkpoints, the end
// of a run and an evaluation's accuracy read. Every device calls it alike.
#include <cstdint>
#include <functional>

#include "pcgx/runtime/communicator.h"
#include "pcgx/runtime/device_executor.h"

namespace pcgx::runtime {

// Tags of gathers: below every collective's and apart from the executor's
// loss (-2^62); each gather takes one per shard, counting down from `tag`.
inline constexpr int64_t kGatherTag = -(int64_t{1} << 61);

// The logical value of tensor `t` on device 0 (an empty tensor elsewhere):
// shard k read from `buffer(k)` on its owner (default: the executor's
// value). Adds what this device sent to `bytes_sent`.
Tensor<float> gather_tensor(DeviceExecutor& ex, TensorRef t, Communicator& comm, int64_t& tag, int64_t* bytes_sent = nullptr,
                            const std::function<Buffer(int64_t)>& buffer = nullptr);

}  // namespace pcgx::runtime
