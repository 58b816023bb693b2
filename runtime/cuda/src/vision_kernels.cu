// Kernels for image models (vision_kernels.h).
#include "vision_kernels.h"

#include <cmath>

#include "kernel_common.cuh"

namespace pcgx::runtime::cuda {
namespace {

__global__ void channel_bias_activate_k(Act act, float* y, const float* bias, int64_t total, int64_t channels, int64_t plane) {
  PCGX_GRID_LOOP(i, total) y[i] = act_f(act, y[i] + (bias ? bias[(i / plane) % channels] : 0.f));
}

__device__ double block_sum(double v, double* shared) {
  const int t = threadIdx.x;
  shared[t] = v;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (t < step) shared[t] += shared[t + step];
    __syncthreads();
  }
  const double r = shared[0];
  __syncthreads();
  return r;
}

// Per set of a ChannelGeometry (sets: (sample group, channel)), split in
// `parts` stripes: two sums of each stripe, in double, into
// partial[(set parts + part) 2 + q]; then finish_k adds each set's stripes
// in order (the same sums every run).
enum class Sums : int {
  kX,         // x, -
  kSquares,   // (x - center)^2, -
  kCentred,   // x - center, -
  kGradient,  // dy, dy (x - center)
};

__global__ void set_partials_k(Sums what, ChannelGeometry g, int parts, const float* x, const float* dy, const double* center,
                               double* partial) {
  __shared__ double shared[kThreads];
  const int64_t set = blockIdx.x / parts, part = blockIdx.x % parts;
  const int64_t gi = set / g.c, c = set % g.c, len = g.group * g.s;
  const int64_t chunk = (len + parts - 1) / parts, begin = part * chunk, end = begin + chunk < len ? begin + chunk : len;
  const double m = center ? center[set] : 0.0;
  double a = 0, b = 0;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const int64_t n = gi * g.group + j / g.s, at = (n * g.c + c) * g.s + j % g.s;
    const double v = x ? static_cast<double>(x[at]) : 0.0;
    switch (what) {
      case Sums::kX: a += v; break;
      case Sums::kSquares: a += (v - m) * (v - m); break;
      case Sums::kCentred: a += v - m; break;
      case Sums::kGradient: {
        const double d = dy[at];
        a += d, b += d * (v - m);
        break;
      }
    }
  }
  a = block_sum(a, shared);
  b = block_sum(b, shared);
  if (threadIdx.x == 0) partial[2 * blockIdx.x] = a, partial[2 * blockIdx.x + 1] = b;
}

__global__ void set_finish_k(int64_t sets, int parts, const double* partial, double* out) {
  PCGX_GRID_LOOP(set, sets) {
    double a = 0, b = 0;
    for (int p = 0; p < parts; ++p) a += partial[2 * (set * parts + p)], b += partial[2 * (set * parts + p) + 1];
    out[2 * set] = a, out[2 * set + 1] = b;
  }
}

int parts_for(const ChannelGeometry& g) {
  const int64_t len = g.group * g.s, p = (len + 16383) / 16384;
  return static_cast<int>(p < 1 ? 1 : (p > 64 ? 64 : p));
}

// The scratch of a geometry: partial sums, then three result arrays of 2
// doubles per set (sums, centres, more sums).
struct Scratch {
  double* partial;
  double* r0;
  double* r1;
  double* r2;
};
Scratch carve(const ChannelGeometry& g, double* s) {
  const int64_t sets = g.sets();
  return {s, s + 2 * sets * parts_for(g), s + 2 * sets * parts_for(g) + 2 * sets, s + 2 * sets * parts_for(g) + 4 * sets};
}

// out[2 set], out[2 set + 1] = the two sums of `what` per set.
void set_sums(Sums what, const ChannelGeometry& g, const float* x, const float* dy, const double* center, double* partial, double* out,
              cudaStream_t s) {
  const int parts = parts_for(g);
  const int64_t sets = g.sets();
  if (sets <= 0) return;
  set_partials_k<<<static_cast<unsigned>(sets * parts), kThreads, 0, s>>>(what, g, parts, x, dy, center, partial);
  set_finish_k<<<blocks_for(sets), kThreads, 0, s>>>(sets, parts, partial, out);
}

// centre[2 set] = sums[2 set] / count (a mean in double, as the CPU's
// BatchNorm and the gradients take it); with `float_mean`, the mean as
// BatchSquares' forward takes it: float(sum) times float(1 / count).
__global__ void means_k(int64_t sets, const double* sums, const float* float_sums, int64_t channels, double count, bool float_mean,
                        double* centre) {
  PCGX_GRID_LOOP(set, sets) {
    if (float_sums) {
      const float f = float_sums[set % channels];
      centre[set] = float_mean ? static_cast<double>(f * (1.f / static_cast<float>(count))) : static_cast<double>(f) / count;
    } else {
      centre[set] = sums[2 * set] / count;
    }
  }
}
// means_k writes one double per set; set_partials_k reads center[set].

// BatchNorm's forward, as the CPU's float path: mean and variance sums in
// double, rounded to float, then the float formula.
__global__ void batch_norm_apply_sets_k(ChannelGeometry g, const float* x, const float* gamma, const float* beta, const double* mean,
                                        const double* squares, float eps, float* y) {
  const int64_t total = g.n * g.c * g.s;
  const float inv_n = 1.f / static_cast<float>(g.group * g.s);
  PCGX_GRID_LOOP(i, total) {
    const int64_t c = (i / g.s) % g.c, n = i / (g.s * g.c), set = (n / g.group) * g.c + c;
    const float m = static_cast<float>(mean[set]), v = static_cast<float>(squares[2 * set]);
    const float scale = 1.f / sqrtf(v * inv_n + eps) * gamma[c];
    y[i] = (x[i] - m) * scale + beta[c];
  }
}

__global__ void batch_norm_dx_k(ChannelGeometry g, const float* x, const float* gamma, const float* dy, const double* mean,
                                const double* squares, const double* grads, double eps, float* dx) {
  const int64_t total = g.n * g.c * g.s;
  const double count = static_cast<double>(g.group * g.s);
  PCGX_GRID_LOOP(i, total) {
    const int64_t c = (i / g.s) % g.c, n = i / (g.s * g.c), set = (n / g.group) * g.c + c;
    const double rstd = 1.0 / sqrt(squares[2 * set] / count + eps), gm = gamma[c];
    const double sum_g = grads[2 * set] * gm, sum_gx = grads[2 * set + 1] * rstd * gm;
    const double xh = (x[i] - mean[set]) * rstd;
    dx[i] = static_cast<float>(rstd * (dy[i] * gm - sum_g / count - xh * sum_gx / count));
  }
}

// dgamma[c] = sum over the sets of c of rstd sum(dy (x - mean)); dbeta[c] =
// of sum(dy).
__global__ void batch_norm_affine_k(ChannelGeometry g, const double* squares, const double* grads, double eps, float* dgamma,
                                    float* dbeta) {
  const double count = static_cast<double>(g.group * g.s);
  PCGX_GRID_LOOP(c, g.c) {
    double sg = 0, sb = 0;
    for (int64_t gi = 0; gi < g.n / g.group; ++gi) {
      const int64_t set = gi * g.c + c;
      const double rstd = 1.0 / sqrt(squares[2 * set] / count + eps);
      sg += rstd * grads[2 * set + 1], sb += grads[2 * set];
    }
    dgamma[c] = static_cast<float>(sg), dbeta[c] = static_cast<float>(sb);
  }
}

__global__ void to_float_k(int64_t n, const double* v, float* out) {
  PCGX_GRID_LOOP(i, n) out[i] = static_cast<float>(v[2 * i]);
}

__global__ void spread_k(ChannelGeometry g, const float* per_channel, float* dx) {
  const int64_t total = g.n * g.c * g.s;
  PCGX_GRID_LOOP(i, total) dx[i] = per_channel[(i / g.s) % g.c];
}

__global__ void batch_squares_dx_k(ChannelGeometry g, const float* x, const float* dq, const double* mean, float* dx) {
  const int64_t total = g.n * g.c * g.s;
  PCGX_GRID_LOOP(i, total) {
    const int64_t c = (i / g.s) % g.c;
    dx[i] = static_cast<float>(2.0 * dq[c] * (x[i] - mean[c]));
  }
}
__global__ void batch_squares_dsum_k(int64_t channels, const float* dq, const double* centred, double count, float* dsum) {
  PCGX_GRID_LOOP(c, channels) dsum[c] = static_cast<float>(-2.0 * dq[c] * centred[2 * c] / count);
}

__global__ void batch_norm_apply_k(ChannelGeometry g, const float* x, const float* sum, const float* squares, const float* gamma,
                                   const float* beta, float inv_n, float eps, float* y) {
  const int64_t total = g.n * g.c * g.s;
  PCGX_GRID_LOOP(i, total) {
    const int64_t c = (i / g.s) % g.c;
    const float m = sum[c] * inv_n, v = fmaxf(squares[c] * inv_n, 0.f);
    y[i] = (x[i] - m) * (1.f / sqrtf(v + eps) * gamma[c]) + beta[c];
  }
}
__global__ void batch_norm_apply_dx_k(ChannelGeometry g, const float* squares, const float* gamma, const float* dy, double count, double eps,
                                      float* dx) {
  const int64_t total = g.n * g.c * g.s;
  PCGX_GRID_LOOP(i, total) {
    const int64_t c = (i / g.s) % g.c;
    const double var = fmax(squares[c] / count, 0.0), rstd = 1.0 / sqrt(var + eps);
    dx[i] = static_cast<float>(dy[i] * static_cast<double>(gamma[c]) * rstd);
  }
}
__global__ void batch_norm_apply_stats_k(int64_t channels, const float* squares, const float* gamma, const double* grads, double count,
                                         double eps, float* dsum, float* dsquares, float* dgamma, float* dbeta) {
  PCGX_GRID_LOOP(c, channels) {
    const double var = fmax(squares[c] / count, 0.0), rstd = 1.0 / sqrt(var + eps), gm = gamma[c];
    const double sum_dy = grads[2 * c], sum_dyx = grads[2 * c + 1];
    dsum[c] = static_cast<float>(-gm * rstd * sum_dy / count);
    dsquares[c] = static_cast<float>(-gm * rstd * rstd * rstd * sum_dyx / (2 * count));
    dgamma[c] = static_cast<float>(rstd * sum_dyx);
    dbeta[c] = static_cast<float>(sum_dy);
  }
}

// Pooling, one thread per output (forward) or per input (backward).
// f(index in the plane) for each input of output (oh, ow)'s window, in the
// CPU's order (rows, then columns), padding skipped.
template <class F>
__device__ void for_window(const PoolGeometry& g, int64_t oh, int64_t ow, F&& f) {
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const int64_t ih = oh * g.sh - g.ph + ky;
    if (ih < 0 || ih >= g.h) continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t iw = ow * g.sw - g.pw + kx;
      if (iw >= 0 && iw < g.w) f(ih * g.w + iw);
    }
  }
}

// The first largest input of a window (max pooling's gradient goes there).
__device__ bool window_arg(const PoolGeometry& g, const float* in, int64_t oh, int64_t ow, int64_t& arg) {
  arg = -1;
  for_window(g, oh, ow, [&](int64_t at) {
    if (arg < 0 || in[at] > in[arg]) arg = at;
  });
  return arg >= 0;
}

__global__ void pool_k(PoolGeometry g, const float* x, float* y) {
  const int64_t total = g.planes * g.ho * g.wo;
  const float inv_area = 1.f / static_cast<float>(g.kh * g.kw);
  PCGX_GRID_LOOP(i, total) {
    const int64_t plane = i / (g.ho * g.wo), oh = (i / g.wo) % g.ho, ow = i % g.wo;
    const float* in = x + plane * g.h * g.w;
    float acc = g.max ? -INFINITY : 0.f;
    for_window(g, oh, ow, [&](int64_t at) { acc = g.max ? fmaxf(acc, in[at]) : acc + in[at]; });
    y[i] = g.max ? acc : acc * inv_area;
  }
}

__global__ void pool_backward_k(PoolGeometry g, const float* x, const float* dy, float* dx) {
  const int64_t total = g.planes * g.h * g.w;
  const float inv_area = 1.f / static_cast<float>(g.kh * g.kw);
  PCGX_GRID_LOOP(i, total) {
    const int64_t plane = i / (g.h * g.w), ih = (i / g.w) % g.h, iw = i % g.w, at = ih * g.w + iw;
    const float* in = x + plane * g.h * g.w;
    const float* d = dy + plane * g.ho * g.wo;
    // The outputs whose windows hold (ih, iw): oh sh - ph <= ih < oh sh - ph + kh.
    const int64_t oh0 = ih + g.ph - g.kh + 1 > 0 ? (ih + g.ph - g.kh + 1 + g.sh - 1) / g.sh : 0;
    const int64_t ow0 = iw + g.pw - g.kw + 1 > 0 ? (iw + g.pw - g.kw + 1 + g.sw - 1) / g.sw : 0;
    float sum = 0.f;
    for (int64_t oh = oh0; oh < g.ho && oh * g.sh - g.ph <= ih; ++oh)
      for (int64_t ow = ow0; ow < g.wo && ow * g.sw - g.pw <= iw; ++ow) {
        if (!g.max) {
          sum += d[oh * g.wo + ow] * inv_area;
          continue;
        }
        int64_t arg;
        if (window_arg(g, in, oh, ow, arg) && arg == at) sum += d[oh * g.wo + ow];
      }
    dx[i] = sum;
  }
}

}  // namespace

void channel_bias_activate(Act act, float* y, const float* bias, int64_t n, int64_t channels, int64_t plane, cudaStream_t s) {
  const int64_t total = n * channels * plane;
  if (total > 0) channel_bias_activate_k<<<blocks_for(total), kThreads, 0, s>>>(act, y, bias, total, channels, plane);
}

__global__ void channel_sums_k(const float* d, int64_t n, int64_t channels, int64_t plane, float* db) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x;
  double a = 0;
  for (int64_t j = threadIdx.x; j < n * plane; j += blockDim.x) a += d[((j / plane) * channels + c) * plane + j % plane];
  a = block_sum(a, shared);
  if (threadIdx.x == 0) db[c] = static_cast<float>(a);
}

void channel_sums(const float* d, int64_t n, int64_t channels, int64_t plane, float* db, cudaStream_t s) {
  if (channels > 0) channel_sums_k<<<static_cast<unsigned>(channels), kThreads, 0, s>>>(d, n, channels, plane, db);
}

void pool(const PoolGeometry& g, const float* x, float* y, cudaStream_t s) {
  const int64_t total = g.planes * g.ho * g.wo;
  if (total > 0) pool_k<<<blocks_for(total), kThreads, 0, s>>>(g, x, y);
}
void pool_backward(const PoolGeometry& g, const float* x, const float* dy, float* dx, cudaStream_t s) {
  const int64_t total = g.planes * g.h * g.w;
  if (total > 0) pool_backward_k<<<blocks_for(total), kThreads, 0, s>>>(g, x, dy, dx);
}

int64_t batch_stat_doubles(const ChannelGeometry& g) { return 2 * g.sets() * parts_for(g) + 6 * g.sets(); }

// A set's mean (k.r1, one double per set) and sum of squared deviations
// from it (k.r2), two passes as the CPU's BatchNorm takes them.
static void set_moments(const ChannelGeometry& g, const float* x, const Scratch& k, cudaStream_t s) {
  const int64_t sets = g.sets();
  set_sums(Sums::kX, g, x, nullptr, nullptr, k.partial, k.r0, s);
  means_k<<<blocks_for(sets), kThreads, 0, s>>>(sets, k.r0, nullptr, g.c, static_cast<double>(g.group * g.s), false, k.r1);
  set_sums(Sums::kSquares, g, x, nullptr, k.r1, k.partial, k.r2, s);
}

void batch_norm(const ChannelGeometry& g, const float* x, const float* gamma, const float* beta, float* y, float eps, double* scratch,
                cudaStream_t s) {
  const int64_t total = g.n * g.c * g.s;
  if (total <= 0) return;
  const Scratch k = carve(g, scratch);
  set_moments(g, x, k, s);
  batch_norm_apply_sets_k<<<blocks_for(total), kThreads, 0, s>>>(g, x, gamma, beta, k.r1, k.r2, eps, y);
}

void batch_norm_backward(const ChannelGeometry& g, const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                         float* dbeta, double eps, double* scratch, cudaStream_t s) {
  const int64_t total = g.n * g.c * g.s;
  if (total <= 0) return;
  const Scratch k = carve(g, scratch);
  set_moments(g, x, k, s);
  set_sums(Sums::kGradient, g, x, dy, k.r1, k.partial, k.r0, s);  // the x sums are no longer needed
  batch_norm_dx_k<<<blocks_for(total), kThreads, 0, s>>>(g, x, gamma, dy, k.r1, k.r2, k.r0, eps, dx);
  batch_norm_affine_k<<<blocks_for(g.c), kThreads, 0, s>>>(g, k.r2, k.r0, eps, dgamma, dbeta);
}

void batch_sum(const ChannelGeometry& g, const float* x, float* out, double* scratch, cudaStream_t s) {
  const Scratch k = carve(g, scratch);
  set_sums(Sums::kX, g, x, nullptr, nullptr, k.partial, k.r0, s);
  if (g.c > 0) to_float_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, k.r0, out);
}
void batch_sum_backward(const ChannelGeometry& g, const float* ds, float* dx, cudaStream_t s) {
  const int64_t total = g.n * g.c * g.s;
  if (total > 0) spread_k<<<blocks_for(total), kThreads, 0, s>>>(g, ds, dx);
}

void batch_squares(const ChannelGeometry& g, const float* x, const float* sum, int64_t count, float* out, double* scratch, cudaStream_t s) {
  const Scratch k = carve(g, scratch);
  if (g.c <= 0) return;
  means_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, nullptr, sum, g.c, static_cast<double>(count), true, k.r1);
  set_sums(Sums::kSquares, g, x, nullptr, k.r1, k.partial, k.r0, s);
  to_float_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, k.r0, out);
}
void batch_squares_backward(const ChannelGeometry& g, const float* x, const float* sum, const float* dq, int64_t count, float* dx, float* dsum,
                            double* scratch, cudaStream_t s) {
  const Scratch k = carve(g, scratch);
  const int64_t total = g.n * g.c * g.s;
  if (g.c <= 0) return;
  means_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, nullptr, sum, g.c, static_cast<double>(count), false, k.r1);
  set_sums(Sums::kCentred, g, x, nullptr, k.r1, k.partial, k.r0, s);
  if (total > 0) batch_squares_dx_k<<<blocks_for(total), kThreads, 0, s>>>(g, x, dq, k.r1, dx);
  batch_squares_dsum_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, dq, k.r0, static_cast<double>(count), dsum);
}

void batch_norm_apply(const ChannelGeometry& g, const float* x, const float* sum, const float* squares, const float* gamma,
                      const float* beta, int64_t count, float eps, float* y, cudaStream_t s) {
  const int64_t total = g.n * g.c * g.s;
  if (total > 0)
    batch_norm_apply_k<<<blocks_for(total), kThreads, 0, s>>>(g, x, sum, squares, gamma, beta, 1.f / static_cast<float>(count), eps, y);
}
void batch_norm_apply_backward(const ChannelGeometry& g, const float* x, const float* sum, const float* squares, const float* gamma,
                               const float* dy, int64_t count, double eps, float* dx, float* dsum, float* dsquares, float* dgamma,
                               float* dbeta, double* scratch, cudaStream_t s) {
  const Scratch k = carve(g, scratch);
  const int64_t total = g.n * g.c * g.s;
  if (g.c <= 0) return;
  means_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, nullptr, sum, g.c, static_cast<double>(count), false, k.r1);
  set_sums(Sums::kGradient, g, x, dy, k.r1, k.partial, k.r0, s);
  if (total > 0)
    batch_norm_apply_dx_k<<<blocks_for(total), kThreads, 0, s>>>(g, squares, gamma, dy, static_cast<double>(count), eps, dx);
  batch_norm_apply_stats_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, squares, gamma, k.r0, static_cast<double>(count), eps, dsum, dsquares,
                                                                dgamma, dbeta);
}

}  // namespace pcgx::runtime::cuda
