#include "cudnn_conv.h"

#include <algorithm>

#include "cuda_check.h"
#include "cudnn_loader.h"
#include "pcgx/pcg/error.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace pcgx::runtime::cuda {
namespace {

void check(cudnnStatus_t e, const char* what) {
  if (e != CUDNN_STATUS_SUCCESS) throw Error(std::string("cudnn: ") + what + ": " + cudnn().error_string(e));
}

int narrow(int64_t v, const char* what) {
  if (v > 2147483647) throw Error(std::string("cudnn: ") + what + " of " + std::to_string(v) + " is above what cuDNN's 4-d descriptors hold");
  return static_cast<int>(v);
}

constexpr size_t kMaxWorkspace = size_t{1} << 31;  // an algorithm asking more is passed over

// Whether an algorithm measured by cuDNN may be chosen.
template <class Perf>
bool usable(const Perf& p, bool tf32, bool exact_math) {
  if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC || p.memory > kMaxWorkspace) return false;
  return tf32 || (p.mathType != CUDNN_TENSOR_OP_MATH && p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && exact_math);
}

// The math type a chosen algorithm runs with: the measured one with TF32;
// for strict FP32 always FMA, since cuDNN's default math lets an FP32
// convolution use TF32 tensor cores on Ampere and later (measured on an
// H100: the default math left resnext-50-tiny's gradients 1e-3 from the
// CPU's, inception-v3-tiny's, through BatchNorm over a few elements, 0.8).
cudnnMathType_t math_of(cudnnMathType_t measured, bool tf32) { return tf32 ? measured : CUDNN_FMA_MATH; }

}  // namespace

struct CudnnConv::Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv[3] = {nullptr, nullptr, nullptr};  // forward, data, filter: each with its math type
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t data{};
  cudnnConvolutionBwdFilterAlgo_t filter{};
  size_t bytes[3] = {0, 0, 0};
  std::string chosen;
  ~Plan() {
    const Cudnn& d = cudnn();
    if (x) d.destroy_tensor(x);
    if (y) d.destroy_tensor(y);
    if (w) d.destroy_filter(w);
    for (auto c : conv)
      if (c) d.destroy_conv(c);
  }
};

CudnnConv::CudnnConv(cudaStream_t stream, bool tf32) : stream_(stream), tf32_(tf32) {
  const Cudnn& d = cudnn();
  cudnnHandle_t h = nullptr;
  check(d.create(&h), "cudnnCreate");
  handle_ = h;
  check(d.set_stream(h, stream), "cudnnSetStream");
}

CudnnConv::~CudnnConv() {
  plans_.clear();
  if (handle_) cudnn().destroy(static_cast<cudnnHandle_t>(handle_));
  if (workspace_) cudaFree(workspace_);
}

void* CudnnConv::workspace(size_t bytes) {
  if (bytes > workspace_size_) {
    if (workspace_) check(cudaFree(workspace_), "cudaFree");
    check(cudaMalloc(&workspace_, bytes), "cudaMalloc (cuDNN workspace)");
    ++mallocs_;
    workspace_size_ = bytes;
  }
  return workspace_;
}

CudnnConv::Plan& CudnnConv::plan(const ConvGeometry& g) {
  auto& slot = plans_[g.key()];
  if (slot) return *slot;
  const Cudnn& d = cudnn();
  auto p = std::make_unique<Plan>();
  const auto h = static_cast<cudnnHandle_t>(handle_);
  check(d.create_tensor(&p->x), "cudnnCreateTensorDescriptor");
  check(d.set_tensor_4d(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, narrow(g.n, "batch"), narrow(g.c, "channels"), narrow(g.h, "height"),
                        narrow(g.w, "width")),
        "cudnnSetTensor4dDescriptor (x)");
  check(d.create_tensor(&p->y), "cudnnCreateTensorDescriptor");
  check(d.set_tensor_4d(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, narrow(g.n, "batch"), narrow(g.o, "channels"), narrow(g.ho, "height"),
                        narrow(g.wo, "width")),
        "cudnnSetTensor4dDescriptor (y)");
  check(d.create_filter(&p->w), "cudnnCreateFilterDescriptor");
  check(d.set_filter_4d(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, narrow(g.o, "channels"), narrow(g.cg, "channels"), narrow(g.kh, "kernel"),
                        narrow(g.kw, "kernel")),
        "cudnnSetFilter4dDescriptor");
  // Strict FP32: FMA only (cuDNN's default math may use TF32 tensor cores).
  const cudnnMathType_t math = tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  for (auto& c : p->conv) {
    check(d.create_conv(&c), "cudnnCreateConvolutionDescriptor");
    check(d.set_conv_2d(c, narrow(g.ph, "padding"), narrow(g.pw, "padding"), narrow(g.sh, "stride"), narrow(g.sw, "stride"), 1, 1,
                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    check(d.set_group_count(c, narrow(g.c / g.cg, "groups")), "cudnnSetConvolutionGroupCount");
    check(d.set_math_type(c, math), "cudnnSetConvolutionMathType");
  }
  // Measured by cuDNN (it allocates what it measures with), fastest first.
  constexpr int kAlgos = 16;
  int found = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kAlgos];
  check(d.find_forward(h, p->x, p->w, p->conv[0], p->y, kAlgos, &found, fwd), "cudnnFindConvolutionForwardAlgorithm");
  const auto* f = std::find_if(fwd, fwd + found, [&](const auto& r) {
    return usable(r, tf32_, r.algo != CUDNN_CONVOLUTION_FWD_ALGO_FFT && r.algo != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
                                r.algo != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD && r.algo != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED);
  });
  cudnnConvolutionBwdDataAlgoPerf_t data[kAlgos];
  int found_data = 0;
  check(d.find_backward_data(h, p->w, p->y, p->conv[1], p->x, kAlgos, &found_data, data), "cudnnFindConvolutionBackwardDataAlgorithm");
  const auto* b = std::find_if(data, data + found_data, [&](const auto& r) {
    return usable(r, tf32_, r.algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT && r.algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING &&
                                r.algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD &&
                                r.algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED);
  });
  cudnnConvolutionBwdFilterAlgoPerf_t filter[kAlgos];
  int found_filter = 0;
  check(d.find_backward_filter(h, p->x, p->y, p->conv[2], p->w, kAlgos, &found_filter, filter),
        "cudnnFindConvolutionBackwardFilterAlgorithm");
  const auto* w = std::find_if(filter, filter + found_filter, [&](const auto& r) {
    return usable(r, tf32_, r.algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT && r.algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING &&
                                r.algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED);
  });
  const std::string shape = "x [" + std::to_string(g.n) + ", " + std::to_string(g.c) + ", " + std::to_string(g.h) + ", " +
                            std::to_string(g.w) + "] W [" + std::to_string(g.o) + ", " + std::to_string(g.cg) + ", " +
                            std::to_string(g.kh) + ", " + std::to_string(g.kw) + "]";
  if (f == fwd + found || b == data + found_data || w == filter + found_filter)
    throw Error("cudnn: no deterministic " + std::string(tf32_ ? "" : "FP32 ") + "algorithm for a convolution of " + shape);
  p->fwd = f->algo, p->data = b->algo, p->filter = w->algo;
  p->bytes[0] = f->memory, p->bytes[1] = b->memory, p->bytes[2] = w->memory;
  check(d.set_math_type(p->conv[0], math_of(f->mathType, tf32_)), "cudnnSetConvolutionMathType");
  check(d.set_math_type(p->conv[1], math_of(b->mathType, tf32_)), "cudnnSetConvolutionMathType");
  check(d.set_math_type(p->conv[2], math_of(w->mathType, tf32_)), "cudnnSetConvolutionMathType");
  workspace(std::max({p->bytes[0], p->bytes[1], p->bytes[2]}));
  p->chosen = shape + ": forward " + std::to_string(static_cast<int>(p->fwd)) + ", data " + std::to_string(static_cast<int>(p->data)) +
              ", filter " + std::to_string(static_cast<int>(p->filter));
  slot = std::move(p);
  return *slot;
}

void CudnnConv::forward(const ConvGeometry& g, const float* x, const float* w, float* y) {
  Plan& p = plan(g);
  const float one = 1.f, zero = 0.f;
  check(cudnn().forward(static_cast<cudnnHandle_t>(handle_), &one, p.x, x, p.w, w, p.conv[0], p.fwd, workspace_, p.bytes[0], &zero, p.y, y),
        "cudnnConvolutionForward");
}

void CudnnConv::backward_data(const ConvGeometry& g, const float* dy, const float* w, float* dx) {
  Plan& p = plan(g);
  const float one = 1.f, zero = 0.f;
  check(cudnn().backward_data(static_cast<cudnnHandle_t>(handle_), &one, p.w, w, p.y, dy, p.conv[1], p.data, workspace_, p.bytes[1], &zero,
                              p.x, dx),
        "cudnnConvolutionBackwardData");
}

void CudnnConv::backward_filter(const ConvGeometry& g, const float* x, const float* dy, float* dw) {
  Plan& p = plan(g);
  const float one = 1.f, zero = 0.f;
  check(cudnn().backward_filter(static_cast<cudnnHandle_t>(handle_), &one, p.x, x, p.y, dy, p.conv[2], p.filter, workspace_, p.bytes[2],
                                &zero, p.w, dw),
        "cudnnConvolutionBackwardFilter");
}

std::string CudnnConv::describe() const {
  std::string r = "cuDNN " + std::to_string(cudnn().version) + " from " + cudnn().path + "; " + std::to_string(plans_.size()) +
                  " convolution shapes";
  return r;
}

}  // namespace pcgx::runtime::cuda
