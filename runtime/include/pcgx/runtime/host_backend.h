#pragma once
// The CPU's backend (backend.h): shards are host tensors, kernels are the
// registry's (operator.h) on the kernel threads (kernel_threads.h), the
// optimizer's update runs there in pieces fixed by the shard sizes, and the
// clock is the host's. Buffers point into tensors the backend keeps for its
// lifetime, so a host Communicator takes them as they are.
#include <algorithm>
#include <deque>
#include <vector>

#include "pcgx/runtime/backend.h"

namespace pcgx::runtime {

class HostBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  Buffer allocate(std::span<const int64_t> shape) override;
  std::span<const int64_t> shape(const Buffer& b) const override { return store_[index(b)].shape; }
  // Gives the tensor's memory to a pool of freed blocks, from which
  // reacquire takes the smallest that holds it (allocating only when none
  // does), as a caching allocator would: a step frees and reacquires the
  // same sizes every time, so after the first it allocates nothing. What
  // the pool holds beyond the buffers in use is not counted in
  // DeviceExecutor::buffer_bytes (blocks larger than the tensor reusing
  // them; at most the largest step's worth of freed values).
  bool release(Buffer& b) override;
  void reacquire(Buffer& b) override;
  void trim() override { pool_.clear(); }
  void fill(const Buffer& b, float value) override;
  void copy(const Buffer& to, const Buffer& from) override;
  void add(const Buffer& into, const Buffer& x) override;
  void read_block(const Buffer& full, std::span<const int64_t> offset, const Buffer& out) override;
  void add_block(const Buffer& full, std::span<const int64_t> offset, const Buffer& block) override;
  void add_from_block(const Buffer& out, const Buffer& full, std::span<const int64_t> offset) override;
  void add_range(const Buffer& flat, int64_t at, const Buffer& x) override;
  void set_range(const Buffer& flat, int64_t at, const Buffer& x) override;
  void copy_range(const Buffer& to, const Buffer& flat, int64_t at) override;
  void upload_block(const Tensor<float>& logical, std::span<const int64_t> offset, const Buffer& out) override;
  void download(const Buffer& b, std::span<float> host) override;
  float element(const Buffer& b, int64_t i) override { return b.data[i]; }
  bool host_memory() const override { return true; }
  // The registry's rules add into the gradients they are given (OpDef::grad_writes).
  bool accumulates_gradient(const Node& n, size_t) const override { return !n.op->grad_writes; }
  void to_host(std::span<const float> from, std::span<float> to) override { std::copy(from.begin(), from.end(), to.begin()); }
  void from_host(std::span<const float> from, std::span<float> to) override { std::copy(from.begin(), from.end(), to.begin()); }
  std::string unsupported(const Node& n) const override;
  void forward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in,
               std::span<const Buffer* const> out) override;
  void backward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in,
                std::span<const Buffer* const> out, std::span<const Buffer* const> out_grad,
                std::span<const Buffer* const> in_grad) override;
  void update(const UpdateRule& rule, std::span<const ParameterSlot> slots) override;
  void round(const Buffer& b, Precision p) override;
  bool unscale(const Buffer& b, float factor) override;
  Clock::time_point now() override { return Clock::now(); }

  // The tensor behind a buffer, for callers on the host (tests, tools).
  Tensor<float>& tensor(const Buffer& b) { return store_[index(b)]; }

 private:
  static size_t index(const Buffer& b) { return static_cast<size_t>(b.id); }
  std::deque<Tensor<float>> store_;  // a deque: growing it moves no tensor
  std::vector<std::vector<float>> pool_;  // freed blocks (release, reacquire)
  // Per-call argument arrays, grown to the largest arity once. The
  // registry's kernels take outputs as an array of tensors: buffers are
  // moved into it and back (a vector's move keeps its memory, so every
  // Buffer's data pointer stays valid).
  std::vector<const Tensor<float>*> in_, out_ptrs_, dout_;
  std::vector<Tensor<float>> out_, din_;
  struct Piece {
    size_t slot, begin, size;
  };
  std::vector<Piece> pieces_;  // the update's, fixed on its first call
  size_t slots_ = 0, total_ = 0;
};

}  // namespace pcgx::runtime
