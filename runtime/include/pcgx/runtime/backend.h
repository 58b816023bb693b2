#pragma once
// Where a device's shards live and its kernels run: the seam between the
// one executor (device_executor.h) and the hardware. The executor decides
// what runs where and when, and what travels between devices; a Backend
// owns the memory, runs each operator's forward and gradient kernels and
// the optimizer's update, and reads its clock. host_backend.h is the CPU's
// (the registry's kernels on the kernel threads); runtime/cuda holds the
// GPU's.
//
// Buffers are handles: the executor never reads a buffer's floats, it
// hands them to the backend and to its Communicator, which must take the
// backend's memory (host memory for the in-process and MPI communicators,
// device memory for NCCL's).
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/operator.h"
#include "pcgx/pcg/tensor.h"

namespace pcgx::runtime {

// One shard in a backend's memory, valid until the backend goes. A
// default Buffer is no buffer (a shard this device does not hold, or an
// index input's gradient).
struct Buffer {
  float* data = nullptr;  // host or device memory, as the backend's
  int64_t numel = 0;
  int32_t id = -1;        // the backend's own handle
  explicit operator bool() const { return id >= 0; }
  std::span<float> span() const { return {data, static_cast<size_t>(numel)}; }
};

// One optimizer step's constants (optimizer.cpp derives them): SGD with
// momentum (v = mu v + g; w -= lr v) or bias-corrected Adam
// (w -= step m / (sqrt(v) / root_c2 + eps)).
enum class OptimizerKind : uint8_t { kSgd, kAdam };
struct UpdateRule {
  using Kind = OptimizerKind;
  Kind kind = Kind::kSgd;
  float lr = 0, momentum = 0;
  float beta1 = 0, beta2 = 0, one_minus_beta1 = 0, one_minus_beta2 = 0;
  float step = 0, eps = 0, root_c2 = 1;
};
// A parameter shard, its gradient and its optimizer state (v: Adam only).
struct ParameterSlot {
  Buffer w, g, m, v;
};

class Backend {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Memory. allocate returns a zeroed buffer of `shape`; after a step has
  // run, a backend allocates nothing more for the same plan (the executor
  // keeps every buffer it asked for).
  virtual Buffer allocate(std::span<const int64_t> shape) = 0;
  virtual std::span<const int64_t> shape(const Buffer& b) const = 0;
  // Activation recomputation (device_executor.h): a buffer whose value is
  // not needed until it is computed again. release gives its memory back
  // where the backend can, and says whether it did (by default the memory
  // stays); a buffer it did free is reacquired, memory of its shape again
  // (its data may move; the handle stays), before its next write, which
  // overwrites it whole.
  virtual bool release(Buffer& b) {
    (void)b;
    return false;
  }
  virtual void reacquire(Buffer& b) { (void)b; }
  // Gives back the memory a backend keeps of released buffers for their
  // reuse (host_backend.h's pool): the executor's buffers released before
  // they were ever used, which no later step would reuse.
  virtual void trim() {}
  virtual void fill(const Buffer& b, float value) = 0;
  virtual void copy(const Buffer& to, const Buffer& from) = 0;  // same size
  virtual void add(const Buffer& into, const Buffer& x) = 0;    // into += x
  // Blocks of a shard (tensor.h's read_block, add_block, add_from_block):
  // out = full's block at offset; full's block at offset += block;
  // out += full's block at offset. Blocks take the extent of the smaller.
  virtual void read_block(const Buffer& full, std::span<const int64_t> offset, const Buffer& out) = 0;
  virtual void add_block(const Buffer& full, std::span<const int64_t> offset, const Buffer& block) = 0;
  virtual void add_from_block(const Buffer& out, const Buffer& full, std::span<const int64_t> offset) = 0;
  // Flat ranges of a bucket: flat[at, at + |x|) += x; flat[at, at + |x|) = x;
  // to = flat[at, at + |to|).
  virtual void add_range(const Buffer& flat, int64_t at, const Buffer& x) = 0;
  virtual void set_range(const Buffer& flat, int64_t at, const Buffer& x) = 0;
  virtual void copy_range(const Buffer& to, const Buffer& flat, int64_t at) = 0;
  // From and to the host: out = the block of a logical host tensor at
  // `offset`; the whole buffer into `host` (its size); one element.
  virtual void upload_block(const Tensor<float>& logical, std::span<const int64_t> offset, const Buffer& out) = 0;
  virtual void download(const Buffer& b, std::span<float> host) = 0;
  virtual float element(const Buffer& b, int64_t index) = 0;
  // Whether buffers are host memory, which any Communicator takes as it
  // is; where not, the trainer stages messages through the host
  // (staging_communicator.h) unless the communicator is the device's own.
  virtual bool host_memory() const = 0;
  // Raw copies between the backend's memory and the host's (same sizes).
  virtual void to_host(std::span<const float> from, std::span<float> to) = 0;
  virtual void from_host(std::span<const float> from, std::span<float> to) = 0;

  // Why this backend cannot run node `n` (an operator it has no kernels
  // for), or empty. The executor asks before the first step.
  virtual std::string unsupported(const Node& n) const = 0;
  // One task of a compute node: `out` is overwritten with its outputs.
  virtual void forward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in,
                       std::span<const Buffer* const> out) = 0;
  // Its gradient (operator.h, GradKernel): `in_grad` holds zeros on entry
  // (a null entry for an index input) and the task's gradient of each
  // input on return; except where overwrites_gradient(n, i), when
  // in_grad[i] holds anything on entry and backward writes every element,
  // and where accumulates_gradient(n, i), when it may hold a sum so far
  // and backward adds the task's gradient into it.
  virtual void backward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in,
                        std::span<const Buffer* const> out, std::span<const Buffer* const> out_grad,
                        std::span<const Buffer* const> in_grad) = 0;
  // Whether backward(n, ...) writes input i's gradient whole without
  // reading it, so the executor need not zero it first: on a GPU zeroing a
  // weight's gradient every step and then adding into it costs a write and
  // a read of every gradient (a product written with beta = 0 instead).
  virtual bool overwrites_gradient(const Node& n, size_t input) const {
    (void)n, (void)input;
    return false;
  }
  // Whether backward(n, ...) adds input i's gradient into in_grad[i]
  // whatever it holds, not only into zeros: the executor then sums a
  // gradient over micro-batches in place (no scratch buffer, no add after
  // the kernel), as Megatron-LM's gradient-accumulation fusion does. (Not
  // where it overwrites input i's gradient: overwrites_gradient.)
  virtual bool accumulates_gradient(const Node& n, size_t input) const {
    (void)n, (void)input;
    return false;
  }
  // One optimizer update of every slot; the list is the same every call.
  virtual void update(const UpdateRule& rule, std::span<const ParameterSlot> slots) = 0;

  // Mixed precision (low_precision.h): every element rounded to the
  // nearest value of `p` (nothing for fp32 and tf32); and the gradients'
  // unscaling under loss scaling, b *= factor, returning whether every
  // element is finite.
  virtual void round(const Buffer& b, Precision p) = 0;
  virtual bool unscale(const Buffer& b, float factor) = 0;
  // to = from rounded to `p` (a weight's compute copy of its FP32 master);
  // a backend may do it in one pass over memory instead of two.
  virtual void copy_rounded(const Buffer& to, const Buffer& from, Precision p) {
    copy(to, from);
    round(to, p);
  }

  // The time once the work queued so far has finished (the host's clock
  // after waiting, for a device that runs asynchronously): kernel timings
  // and step traces read it.
  virtual Clock::time_point now() = 0;

  // Interval timing that does not wait (kernel profiles): mark() queues a
  // timestamp behind the work queued so far and returns its number;
  // read_marks() waits once for every mark since the last read, fills
  // `seconds` with each one's time from the first, and forgets them. A
  // device that runs asynchronously so times its kernels back to back, as
  // an untimed step runs them, where now() around each would add the wait
  // and the next launch to every interval. By default marks read now().
  virtual int64_t mark() {
    host_marks_.push_back(now());
    return static_cast<int64_t>(host_marks_.size()) - 1;
  }
  virtual void read_marks(std::vector<double>& seconds) {
    seconds.resize(host_marks_.size());
    for (size_t k = 0; k < host_marks_.size(); ++k) seconds[k] = std::chrono::duration<double>(host_marks_[k] - host_marks_[0]).count();
    host_marks_.clear();
  }

  // What a user should know about how a run used this backend (operators
  // it ran on a slow path), one line; empty when nothing.
  virtual std::string remarks() const { return {}; }

 private:
  std::vector<Clock::time_point> host_marks_;  // mark()'s, until read_marks()
};

}  // namespace pcgx::runtime
