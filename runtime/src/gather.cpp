#include "pcgx/runtime/gather.h"

namespace pcgx::runtime {

Tensor<float> gather_tensor(DeviceExecutor& ex, TensorRef t, Communicator& comm, int64_t& tag, int64_t* bytes_sent,
                            const std::function<Buffer(int64_t)>& buffer) {
  const ExecutionPlan& plan = ex.plan();
  const ParallelTensorShape& s = plan.graph->shape(t);
  const int me = comm.rank();
  ShardedTensor<float> full{s, {}};
  for (int64_t k = 0; k < s.num_shards(); ++k, --tag) {
    if (k >= s.num_blocks()) {  // replica slot 0 holds the value
      if (me == 0) full.shards.emplace_back();
      continue;
    }
    const int owner = plan.owner(t, k);
    if (owner != me && me != 0) continue;
    Tensor<float> part(s.shard_shape());
    if (owner == me) {
      ex.backend().download(buffer ? buffer(k) : ex.values(t)[static_cast<size_t>(k)], part.data);
      if (me != 0) {
        comm.send(0, tag, part.data);
        if (bytes_sent) *bytes_sent += static_cast<int64_t>(part.data.size() * sizeof(float));
      }
    } else {
      comm.recv(owner, tag, part.data);
    }
    if (me == 0) full.shards.push_back(std::move(part));
  }
  return me == 0 ? gather_slot(full, 0) : Tensor<float>();
}

}  // namespace pcgx::runtime
