#pragma once
// The GPU's backend (pcgx/runtime/backend.h) on one CUDA device (docs/gpu.md):
// shards in device memory from a caching arena (cudaMalloc only while the
// first step asks for buffers); products on cuBLAS (TF32 tensor cores by
// default; strict FP32, or BF16/FP16 tensor cores with FP32 accumulation,
// as options) and Conv2D on cuDNN (cudnn_conv.h),
// both loaded at run time (library_loader.h); kernels of its own
// (kernels.cu, vision_kernels.cu) for every other zoo operator, block
// moves and the optimizer's update. An operator with no CUDA kernel runs
// the CPU's kernel on host copies of its shards (correct, and slow:
// `host_fallbacks()` and `remarks()` name them, and `pcgx run` prints
// them). All work is queued on one stream; now() waits for it and reads
// the GPU's clock (CUDA events), so an interval between two reads is what
// the GPU spent, not the host's wake-up after waiting. Gradients are
// written whole (overwrites_gradient), products with beta = 0, so the
// executor zeroes none of them each step (an embedding table's excepted).
// Inputs upload through pinned host memory, asynchronously.
//
// This header needs no CUDA header: the tools include it whether or not
// the toolkit is installed (PCGX_HAVE_CUDA says whether it was built).
#include <memory>
#include <string>
#include <vector>

#include "pcgx/pcg/precision.h"
#include "pcgx/runtime/backend.h"

namespace pcgx::runtime::cuda {

struct CudaOptions {
  int device = 0;     // CUDA device ordinal
  // What cuBLAS computes products in: fp32 (strict), tf32 (TF32 tensor
  // cores, as PyTorch with allow_tf32), bf16 or fp16 (each operand rounded
  // to 16 bits on BF16/FP16 tensor cores, FP32 accumulation). In a
  // mixed-precision step the forward products' operands are values the
  // executor has rounded already, so only the order of sums differs from
  // the CPU's emulation; in the backward pass a gradient summed from
  // several readers (kept FP32 by the executor) and a fused activation's
  // gradient are rounded by the product where the CPU keeps FP32, as
  // PyTorch's autocast does (in fp16 a sum above 65504 becomes inf there,
  // and loss scaling skips that step). Convolutions take TF32 unless fp32.
  Precision products = Precision::kTf32;
};

// How many CUDA devices this process sees; 0 with the reason in `why`
// (no driver, no device, CUDA_VISIBLE_DEVICES empty).
int device_count(std::string* why = nullptr);
// The name CUDA gives device `device` ("NVIDIA H200"); empty when there is
// no such device.
std::string device_name(int device);

class CudaBackend final : public Backend {
 public:
  // Throws pcgx::Error when the device cannot be used.
  explicit CudaBackend(const CudaOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  Buffer allocate(std::span<const int64_t> shape) override;
  std::span<const int64_t> shape(const Buffer& b) const override;
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
  float element(const Buffer& b, int64_t index) override;
  bool host_memory() const override { return false; }
  void to_host(std::span<const float> from, std::span<float> to) override;
  void from_host(std::span<const float> from, std::span<float> to) override;
  std::string unsupported(const Node& n) const override;
  void forward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in,
               std::span<const Buffer* const> out) override;
  void backward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in,
                std::span<const Buffer* const> out, std::span<const Buffer* const> out_grad,
                std::span<const Buffer* const> in_grad) override;
  bool overwrites_gradient(const Node& n, size_t input) const override;
  void update(const UpdateRule& rule, std::span<const ParameterSlot> slots) override;
  void round(const Buffer& b, Precision p) override;
  void copy_rounded(const Buffer& to, const Buffer& from, Precision p) override;
  bool unscale(const Buffer& b, float factor) override;
  Clock::time_point now() override;
  // Marks are events on the stream: kernels timed back to back, one wait per read.
  int64_t mark() override;
  void read_marks(std::vector<double>& seconds) override;
  std::string remarks() const override;

  // Whether an operator runs on the device's own kernels (else on the
  // host fallback).
  static bool native(const OpDef& op);
  // The operators this backend has run on the host fallback, by name.
  std::vector<std::string> host_fallbacks() const;
  // cudaMalloc calls so far (the arena's chunks and scratch growth).
  int64_t device_allocations() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace pcgx::runtime::cuda
