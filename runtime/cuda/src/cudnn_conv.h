#pragma once
// Conv2D's products on cuDNN (cudnn_loader.h), NCHW, grouped, as the CPU's
// cross-correlation with zero padding (pcg/src/ops/conv_ops.cpp). Per
// shape, on its first call: the descriptors and, for each direction
// (forward, data gradient, filter gradient), the fastest algorithm cuDNN
// measures among those that are deterministic (the same sums every run)
// and, for strict FP32, that compute in FP32 FMA without tensor cores,
// FFT or Winograd (their rounding is not the CPU's order of products);
// with TF32 every deterministic algorithm competes. The results are
// written with beta = 0 (whole). The workspace grows only on first calls.
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

namespace pcgx::runtime::cuda {

struct ConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // x
  int64_t o = 0, cg = 0, kh = 0, kw = 0;  // W[o, c / groups, kh, kw]
  int64_t ho = 0, wo = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0;
  auto key() const { return std::tuple(n, c, h, w, o, cg, kh, kw, ho, wo, sh, sw, ph, pw); }
};

class CudnnConv {
 public:
  // Throws pcgx::Error when cuDNN cannot be loaded or started.
  CudnnConv(cudaStream_t stream, bool tf32);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  void forward(const ConvGeometry& g, const float* x, const float* w, float* y);            // y = conv(x, w)
  void backward_data(const ConvGeometry& g, const float* dy, const float* w, float* dx);    // dx = its transpose
  void backward_filter(const ConvGeometry& g, const float* x, const float* dy, float* dw);  // dw

  int64_t device_allocations() const { return mallocs_; }
  // The library loaded and the algorithms chosen per shape, one line.
  std::string describe() const;

 private:
  struct Plan;
  Plan& plan(const ConvGeometry& g);
  void* workspace(size_t bytes);

  cudaStream_t stream_;
  bool tf32_;
  void* handle_ = nullptr;  // cudnnHandle_t
  std::map<decltype(ConvGeometry{}.key()), std::unique_ptr<Plan>> plans_;
  void* workspace_ = nullptr;
  size_t workspace_size_ = 0;
  int64_t mallocs_ = 0;
};

}  // namespace pcgx::runtime::cuda
