#pragma once
// The CUDA backend's kernels for image models (vision_kernels.cu): Conv2D's
// bias and activation (the products are cuDNN's, cudnn_conv.h), Pool2D and
// the BatchNorm family, each computing what the CPU's kernels compute
// (pcg/src/ops/conv_ops.cpp, batch_norm_ops.cpp): max pooling's gradient
// to the first largest input of each window, average pooling counting
// padding as area, batch statistics summed in double (BatchNorm in one
// pass of sums of x, x^2, dy and dy x; BatchSquares about its mean). Every
// gradient is written whole. Launchers on a stream; each returns at once.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels.h"

namespace pcgx::runtime::cuda {

// y[n, o, :] = act(y[n, o, :] + bias[o]) over `plane` elements per channel
// (bias null: the activation alone).
void channel_bias_activate(Act act, float* y, const float* bias, int64_t n, int64_t channels, int64_t plane, cudaStream_t s);
// db[o] = the sum of d[n, o, :] over n and the plane, in double.
void channel_sums(const float* d, int64_t n, int64_t channels, int64_t plane, float* db, cudaStream_t s);

struct PoolGeometry {
  int64_t planes = 0;  // N C
  int64_t h = 0, w = 0, ho = 0, wo = 0;
  int64_t kh = 0, kw = 0, sh = 0, sw = 0, ph = 0, pw = 0;
  bool max = true;
};
void pool(const PoolGeometry& g, const float* x, float* y, cudaStream_t s);
// dx = the gradient of every window reaching each input (gathered: one
// thread per input element, so no two threads write one element). Max
// pooling takes `args`, scratch of planes ho wo ints (each window's argmax).
void pool_backward(const PoolGeometry& g, const float* x, const float* dy, float* dx, int* args, cudaStream_t s);

// x[N, C, S...] with statistics per set: channel c of samples [g G, g G +
// G), G = `group` (N: the whole batch).
struct ChannelGeometry {
  int64_t n = 0, c = 0, s = 0, group = 0;
  int64_t sets() const { return n / group * c; }
};
// Doubles of scratch the statistics of g need (partial sums and results).
int64_t batch_stat_doubles(const ChannelGeometry& g);
// BatchNorm: y = (x - mean) rstd gamma + beta per set.
void batch_norm(const ChannelGeometry& g, const float* x, const float* gamma, const float* beta, float* y, float eps, double* scratch,
                cudaStream_t s);
// Its gradient: dx; dgamma and dbeta summed over the sets of a channel.
// (eps in double, as the CPU's gradients take it.)
void batch_norm_backward(const ChannelGeometry& g, const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                         float* dbeta, double eps, double* scratch, cudaStream_t s);
// BatchSum: out[c] = sum of x; its gradient dx = ds[c].
void batch_sum(const ChannelGeometry& g, const float* x, float* out, double* scratch, cudaStream_t s);
void batch_sum_backward(const ChannelGeometry& g, const float* ds, float* dx, cudaStream_t s);
// BatchSquares: out[c] = sum of (x - sum[c] / count)^2, count the elements
// per channel of the whole (logical) x; its gradient: dx = 2 dq (x - mu),
// dsum[c] = -2 dq sum(x - mu) / count.
void batch_squares(const ChannelGeometry& g, const float* x, const float* sum, int64_t count, float* out, double* scratch, cudaStream_t s);
void batch_squares_backward(const ChannelGeometry& g, const float* x, const float* sum, const float* dq, int64_t count, float* dx, float* dsum,
                            double* scratch, cudaStream_t s);
// BatchNormApply(x, sum, squares, gamma, beta) and its gradient (all five).
void batch_norm_apply(const ChannelGeometry& g, const float* x, const float* sum, const float* squares, const float* gamma,
                      const float* beta, int64_t count, float eps, float* y, cudaStream_t s);
void batch_norm_apply_backward(const ChannelGeometry& g, const float* x, const float* sum, const float* squares, const float* gamma,
                               const float* dy, int64_t count, double eps, float* dx, float* dsum, float* dsquares, float* dgamma,
                               float* dbeta, double* scratch, cudaStream_t s);

}  // namespace pcgx::runtime::cuda
