#pragma once
// The CUDA backend's state (cuda_backend.h's CudaBackend::State), shared by
// the files that implement it: cuda_backend.cpp (memory, uploads, the
// update, the clock, the host fallback), cuda_forward.cpp and
// cuda_backward.cpp (the operators).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "cublas_loader.h"
#include "cuda_check.h"
#include "cudnn_conv.h"
#include "kernels.h"
#include "pcgx/pcg/error.h"
#include "pcgx/runtime/cuda/cuda_backend.h"

namespace pcgx::runtime::cuda {

inline void check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) throw Error(std::string("cublas: ") + what + ": status " + std::to_string(static_cast<int>(e)));
}

inline constexpr size_t kChunk = size_t{64} << 20;  // the arena's cudaMalloc granule
inline constexpr size_t kAlign = 256;

struct CudaBackend::State {
  int device = 0;
  Precision products = Precision::kTf32;  // CudaOptions::products
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  // Arena: buffers live as long as the backend, so a bump allocator over
  // chunks is the whole caching allocator; nothing is freed before the end.
  std::vector<void*> chunks;
  char* next = nullptr;
  size_t left = 0;
  int64_t mallocs = 0;
  std::deque<std::vector<int64_t>> shapes;  // per buffer id
  std::deque<Tensor<float>> host;           // per buffer id: its host copy, made when first needed
  // Scratch per slot, grown to the largest asked (so nothing is allocated
  // after the first step): 0 and 1 for an operator's intermediates, 2 for
  // the partial sums of a reduction beside them, 3 for batch statistics.
  float* scratch[4] = {nullptr, nullptr, nullptr, nullptr};
  int* nonfinite = nullptr;  // unscale's flag, allocated at its first call
  size_t scratch_size[4] = {0, 0, 0, 0};
  std::unique_ptr<CudnnConv> conv;  // made at the first Conv2D
  CudnnConv& convolutions() {
    if (!conv) conv = std::make_unique<CudnnConv>(stream, products != Precision::kFp32);
    return *conv;
  }
  double* scratch_doubles(size_t n) { return reinterpret_cast<double*>(scratch_floats(3, 2 * n)); }
  std::set<std::string> fallbacks;
  // Per input buffer: its pinned host copy and the event of the last
  // upload from it (waited for before it is written again).
  struct Pinned {
    float* host = nullptr;
    cudaEvent_t done = nullptr;
    bool pending = false;
  };
  std::unordered_map<int32_t, Pinned> pinned;
  // now(): two events recorded in turn; the time is the host's at the
  // first read plus the GPU's intervals between reads since.
  cudaEvent_t clock_events[2] = {nullptr, nullptr};
  int clock_next = 0;
  bool clock_started = false;
  Backend::Clock::time_point clock_time;
  // mark()'s events, created as first needed and reused after each read.
  std::vector<cudaEvent_t> marks;
  size_t marks_used = 0;
  // The host fallback (cuda_backend.cpp): the CPU's kernel or gradient
  // rule on host copies of the shards, named in `fallbacks`.
  void host_forward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in, std::span<const Buffer* const> out);
  void host_backward(const Node& n, const TaskContext& ctx, std::span<const Buffer* const> in, std::span<const Buffer* const> out,
                     std::span<const Buffer* const> out_grad, std::span<const Buffer* const> in_grad);
  // Its argument arrays (host_backend.cpp's).
  std::vector<const Tensor<float>*> args_in, args_out_ptrs, args_dout;
  std::vector<Tensor<float>> args_out, args_din;

  void* raw(size_t bytes) {
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;
    if (bytes > left) {
      const size_t size = std::max(bytes, kChunk);
      void* p = nullptr;
      check(cudaMalloc(&p, size), "cudaMalloc");
      ++mallocs;
      chunks.push_back(p);
      next = static_cast<char*>(p), left = size;
    }
    void* p = next;
    next += bytes, left -= bytes;
    return p;
  }
  void copy(float* to, const float* from, int64_t n) {
    check(cudaMemcpyAsync(to, from, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream), "copy");
  }
  float* scratch_floats(int slot, size_t n) {
    if (scratch_size[slot] < n) {
      if (scratch[slot]) check(cudaFree(scratch[slot]), "cudaFree");
      check(cudaMalloc(reinterpret_cast<void**>(&scratch[slot]), n * sizeof(float)), "cudaMalloc");
      ++mallocs;
      scratch_size[slot] = n;
    }
    return scratch[slot];
  }
  // The host copy of a buffer, shaped; with its device values when `fetch`.
  Tensor<float>& staged(const Buffer& b, bool fetch) {
    Tensor<float>& t = host[static_cast<size_t>(b.id)];
    if (t.data.size() != static_cast<size_t>(b.numel)) t = Tensor<float>(shapes[static_cast<size_t>(b.id)]);
    if (fetch) {
      check(cudaMemcpyAsync(t.data.data(), b.data, static_cast<size_t>(b.numel) * sizeof(float), cudaMemcpyDeviceToHost, stream), "copy to host");
      check(cudaStreamSynchronize(stream), "synchronize");
    }
    return t;
  }
  void put(const Buffer& b) {
    const Tensor<float>& t = host[static_cast<size_t>(b.id)];
    check(cudaMemcpyAsync(b.data, t.data.data(), static_cast<size_t>(b.numel) * sizeof(float), cudaMemcpyHostToDevice, stream), "copy to device");
  }
  BlockGeometry geometry(const Buffer& full, std::span<const int64_t> offset, const Buffer& blk) const {
    const auto& fs = shapes[static_cast<size_t>(full.id)];
    const auto& bs = shapes[static_cast<size_t>(blk.id)];
    BlockGeometry g;
    g.rank = static_cast<int>(fs.size());
    if (g.rank > kMaxRank) throw Error("cuda: rank " + std::to_string(g.rank) + " is above " + std::to_string(kMaxRank));
    int64_t stride = 1;
    for (int d = g.rank - 1; d >= 0; --d) {
      g.extent[d] = std::min(bs[static_cast<size_t>(d)], fs[static_cast<size_t>(d)]);
      g.offset[d] = offset.empty() ? 0 : offset[static_cast<size_t>(d)];
      g.full_strides[d] = stride;
      stride *= fs[static_cast<size_t>(d)];
    }
    g.numel = 1;
    for (int d = 0; d < g.rank; ++d) g.numel *= g.extent[d];
    return g;
  }
  // A dropout shard's elements with the strides of the whole (logical)
  // tensor: the draws follow global indices, as the CPU's.
  BlockGeometry dropout_geometry(const Buffer& shard, const TaskContext& ctx) const {
    BlockGeometry g = geometry(shard, ctx.output_offsets[0], shard);
    int64_t stride = 1;
    for (int d = g.rank - 1; d >= 0; --d) g.full_strides[d] = stride, stride *= ctx.output_shapes[0].dims[static_cast<size_t>(d)].size;
    return g;
  }
  // Row-major y[m, n] (+)= x[m, k] w[k, n], batched with strides.
  void gemm(bool tx, bool tw, int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y, float beta,
            int64_t batches = 1) {
    // Column-major: y^T = op(w)^T op(x)^T; a row-major [r, c] matrix is a
    // column-major [c, r] one with leading dimension c.
    const float alpha = 1.f;
    const int lx = static_cast<int>(tx ? m : k), lw = static_cast<int>(tw ? k : n);
    const cublasOperation_t ow = tw ? CUBLAS_OP_T : CUBLAS_OP_N, ox = tx ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (products == Precision::kBf16 || products == Precision::kFp16) {
      // FP32 in memory, 16-bit inputs on the tensor cores, FP32 sums.
      const cublasComputeType_t t = products == Precision::kBf16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_16F;
      check(cublas().gemm_strided_batched_ex(blas, ow, ox, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, w,
                                             CUDA_R_32F, lw, k * n, x, CUDA_R_32F, lx, m * k, &beta, y, CUDA_R_32F, static_cast<int>(n),
                                             m * n, static_cast<int>(batches), t, CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx");
    } else if (batches == 1) {
      check(cublas().sgemm(blas, ow, ox, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, w, lw, x, lx, &beta, y,
                        static_cast<int>(n)),
            "sgemm");
    } else {
      check(cublas().sgemm_strided_batched(blas, ow, ox, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, w, lw, k * n,
                                      x, lx, m * k, &beta, y, static_cast<int>(n), m * n, static_cast<int>(batches)),
            "sgemm (batched)");
    }
  }
};

}  // namespace pcgx::runtime::cuda
