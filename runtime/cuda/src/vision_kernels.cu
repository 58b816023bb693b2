// Kernels for image models (vision_kernels.h).
#include "vision_kernels.h"

#include <cmath>
#include <initializer_list>

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
  // Element j of the set is sample gi G + j / S of channel c at position
  // j % S: divided once per thread, then stepped (a division per element
  // cost more than the memory traffic).
  const int64_t first = (gi * g.group * g.c + c) * g.s, sample_stride = g.c * g.s, step = blockDim.x;
  // A step in (sample, position); a plane of no elements has no steps.
  const int64_t s = g.s > 0 ? g.s : 1, dn = step / s, dp = step % s;
  int64_t j = begin + threadIdx.x, n = j / s, p = j % s;
  double a = 0, b = 0;
  for (; j < end; j += step) {
    const int64_t at = first + n * sample_stride + p;
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
    n += dn, p += dp;
    if (p >= s) p -= s, ++n;
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

// A float or a float4 (W = 1 or 4 elements per load).
template <int W>
struct Vec;
template <>
struct Vec<1> {
  using T = float;
  __device__ static float at(const T& v, int) { return v; }
  __device__ static void set(T& v, int, float f) { v = f; }
};
template <>
struct Vec<4> {
  using T = float4;
  __device__ static float at(const T& v, int q) { return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w; }
  __device__ static void set(T& v, int q, float f) { (q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w) = f; }
};

// A BatchNorm's sums in one pass over x (and dy): per set and stripe,
// partial[4 (set parts + part) + q] = sum x, sum x^2, sum dy, sum dy x, in
// double, reading W elements at a time (W = 4 where a plane's length is a
// multiple of 4, so no load straddles two planes). moments_finish_k turns
// them into the CPU's two-pass quantities (mean, sum (x - mean)^2, sum dy,
// sum dy (x - mean)): in double, from float inputs, the difference from
// two passes is far below float rounding.
template <int W>
__global__ void moments_partials_k(ChannelGeometry g, int parts, const float* x, const float* dy, double* partial) {
  using V = Vec<W>;
  __shared__ double shared[kThreads];
  const int64_t set = blockIdx.x / parts, part = blockIdx.x % parts;
  const int64_t gi = set / g.c, c = set % g.c, units = g.s / W, len = g.group * units;
  const int64_t chunk = (len + parts - 1) / parts, begin = part * chunk, end = begin + chunk < len ? begin + chunk : len;
  const int64_t first = (gi * g.group * g.c + c) * units, sample_stride = g.c * units, step = blockDim.x;
  const auto* xv = reinterpret_cast<const typename V::T*>(x);
  const auto* dv = reinterpret_cast<const typename V::T*>(dy);
  // A step in (sample, position); a plane of no elements has no steps.
  const int64_t u = units > 0 ? units : 1, dn = step / u, dp = step % u;
  int64_t j = begin + threadIdx.x, n = j / u, p = j % u;
  double sx = 0, sxx = 0, sd = 0, sdx = 0;
  for (; j < end; j += step) {
    const int64_t at = first + n * sample_stride + p;
    const typename V::T a = xv[at];
    if (dy) {
      const typename V::T d = dv[at];
#pragma unroll
      for (int q = 0; q < W; ++q) {
        const double v = V::at(a, q), e = V::at(d, q);
        sx += v, sxx += v * v, sd += e, sdx += e * v;
      }
    } else {
#pragma unroll
      for (int q = 0; q < W; ++q) {
        const double v = V::at(a, q);
        sx += v, sxx += v * v;
      }
    }
    n += dn, p += dp;
    if (p >= u) p -= u, ++n;
  }
  sx = block_sum(sx, shared);
  sxx = block_sum(sxx, shared);
  if (dy) sd = block_sum(sd, shared), sdx = block_sum(sdx, shared);
  if (threadIdx.x == 0) {
    double* o = partial + 4 * blockIdx.x;
    o[0] = sx, o[1] = sxx, o[2] = sd, o[3] = sdx;
  }
}

// Per set, the stripes in order: mean[set]; squares[2 set] = sum (x -
// mean)^2; grads[2 set], grads[2 set + 1] = sum dy, sum dy (x - mean).
__global__ void moments_finish_k(int64_t sets, int parts, double count, const double* partial, double* mean, double* squares,
                                 double* grads) {
  PCGX_GRID_LOOP(set, sets) {
    double sx = 0, sxx = 0, sd = 0, sdx = 0;
    for (int p = 0; p < parts; ++p) {
      const double* o = partial + 4 * (set * parts + p);
      sx += o[0], sxx += o[1], sd += o[2], sdx += o[3];
    }
    const double m = sx / count, sq = sxx - sx * m;
    mean[set] = m;
    squares[2 * set] = sq > 0 ? sq : 0.0;
    if (grads) grads[2 * set] = sd, grads[2 * set + 1] = sdx - m * sd;
  }
}

int parts_for(const ChannelGeometry& g) {
  const int64_t len = g.group * g.s, p = (len + 16383) / 16384;
  return static_cast<int>(p < 1 ? 1 : (p > 64 ? 64 : p));
}

// The scratch of a geometry: partial sums, then three result arrays of 2
// doubles per set (sums, centres, more sums) and one of 3 per set (the
// coefficients of an element-wise pass).
struct Scratch {
  double* partial;
  double* r0;
  double* r1;
  double* r2;
  double* r3;
};
Scratch carve(const ChannelGeometry& g, double* s) {
  const int64_t sets = g.sets(), p = 4 * sets * parts_for(g);
  return {s, s + p, s + p + 2 * sets, s + p + 4 * sets, s + p + 6 * sets};
}

// Where element i of x[N, C, S] sits: its channel and its set (sample
// group, channel). FastMap divides in 32 bits (fits_fast_div), WideMap in
// 64.
struct FastMap {
  FastDiv plane, channels, group;
  uint32_t c;
  explicit FastMap(const ChannelGeometry& g) : plane(g.s), channels(g.c), group(g.group), c(static_cast<uint32_t>(g.c)) {}
  __device__ void at(int64_t i, int64_t& channel, int64_t& set) const {
    const uint32_t row = plane.div(static_cast<uint32_t>(i)), n = channels.div(row), ch = row - n * c;
    channel = ch, set = static_cast<int64_t>(group.div(n)) * c + ch;
  }
};
struct WideMap {
  int64_t s, c, group;
  explicit WideMap(const ChannelGeometry& g) : s(g.s), c(g.c), group(g.group) {}
  __device__ void at(int64_t i, int64_t& channel, int64_t& set) const {
    const int64_t row = i / s, n = row / c;
    channel = row - n * c, set = n / group * c + channel;
  }
};
// kernel<FastMap, W> or kernel<WideMap, W> over g's elements W at a time
// (4 where a plane's length is a multiple of 4).
#define PCGX_CHANNEL_LAUNCH_VEC(kernel, g, stream, ...)                                                              \
  do {                                                                                                          \
    const int64_t total_ = (g).n * (g).c * (g).s;                                                               \
    if (total_ <= 0) break;                                                                                     \
    const bool vec_ = (g).s % 4 == 0;                                                                           \
    const int64_t units_ = vec_ ? total_ / 4 : total_;                                                          \
    if (fits_fast_div(total_) && vec_) kernel<FastMap, 4><<<blocks_for(units_), kThreads, 0, stream>>>(FastMap(g), units_, __VA_ARGS__); \
    else if (fits_fast_div(total_)) kernel<FastMap, 1><<<blocks_for(units_), kThreads, 0, stream>>>(FastMap(g), units_, __VA_ARGS__); \
    else if (vec_) kernel<WideMap, 4><<<blocks_for(units_), kThreads, 0, stream>>>(WideMap(g), units_, __VA_ARGS__); \
    else kernel<WideMap, 1><<<blocks_for(units_), kThreads, 0, stream>>>(WideMap(g), units_, __VA_ARGS__);         \
  } while (0)
// kernel<FastMap> or kernel<WideMap> over g's elements.
#define PCGX_CHANNEL_LAUNCH(kernel, g, stream, ...)                                                   \
  do {                                                                                           \
    const int64_t total_ = (g).n * (g).c * (g).s;                                                \
    if (total_ <= 0) break;                                                                      \
    if (fits_fast_div(total_)) kernel<<<blocks_for(total_), kThreads, 0, stream>>>(FastMap(g), total_, __VA_ARGS__); \
    else kernel<<<blocks_for(total_), kThreads, 0, stream>>>(WideMap(g), total_, __VA_ARGS__);        \
  } while (0)

// out[2 set], out[2 set + 1] = the two sums of `what` per set.
void set_sums(Sums what, const ChannelGeometry& g, const float* x, const float* dy, const double* center, double* partial, double* out,
              cudaStream_t s) {
  const int parts = parts_for(g);
  const int64_t sets = g.sets();
  if (sets <= 0) return;
  set_partials_k<<<static_cast<unsigned>(sets * parts), kThreads, 0, s>>>(what, g, parts, x, dy, center, partial);
  set_finish_k<<<blocks_for(sets), kThreads, 0, s>>>(sets, parts, partial, out);
}

// centre[c] = sum[c] / count, a channel's mean from BatchSum's float sum
// (in double, as the gradients take it); with `float_mean`, as
// BatchSquares' forward takes it: float(sum) times float(1 / count).
// set_partials_k reads it as its centre.
__global__ void means_k(int64_t channels, const float* sum, double count, bool float_mean, double* centre) {
  PCGX_GRID_LOOP(c, channels) {
    const float f = sum[c];
    centre[c] = float_mean ? static_cast<double>(f * (1.f / static_cast<float>(count))) : static_cast<double>(f) / count;
  }
}

// BatchNorm's forward, as the CPU's float path: mean and variance sums in
// double, rounded to float, then the float formula; the per-set factors
// once per set (k[set] = mean, scale), then one pass over the elements.
__global__ void batch_norm_factors_k(ChannelGeometry g, const float* gamma, const double* mean, const double* squares, float eps,
                                     float2* k) {
  const float inv_n = 1.f / static_cast<float>(g.group * g.s);
  PCGX_GRID_LOOP(set, g.n / g.group * g.c) {
    const float m = static_cast<float>(mean[set]), v = static_cast<float>(squares[2 * set]);
    k[set] = make_float2(m, 1.f / sqrtf(v * inv_n + eps) * gamma[set % g.c]);
  }
}
template <class Map, int W>
__global__ void batch_norm_apply_sets_k(Map map, int64_t units, const float* x, const float2* k, const float* beta, float* y) {
  using V = Vec<W>;
  PCGX_GRID_LOOP(u, units) {
    int64_t c, set;
    map.at(u * W, c, set);
    const float2 f = k[set];
    const float b = beta[c];
    const typename V::T a = reinterpret_cast<const typename V::T*>(x)[u];
    typename V::T r;
#pragma unroll
    for (int q = 0; q < W; ++q) V::set(r, q, (V::at(a, q) - f.x) * f.y + b);
    reinterpret_cast<typename V::T*>(y)[u] = r;
  }
}

// Its input gradient, in double: dx = rstd (dy gamma - sum(dy gamma) / n
// - xhat sum(dy gamma xhat) / n), xhat = (x - mean) rstd, as
// k0 dy + k1 (x - mean) + k2 with the three per set (k[3 set ...]).
__global__ void batch_norm_dx_factors_k(ChannelGeometry g, const float* gamma, const double* squares, const double* grads, double eps,
                                        double* k) {
  const double count = static_cast<double>(g.group * g.s);
  PCGX_GRID_LOOP(set, g.n / g.group * g.c) {
    const double rstd = 1.0 / sqrt(squares[2 * set] / count + eps), gm = gamma[set % g.c];
    k[3 * set] = rstd * gm;
    k[3 * set + 1] = -rstd * rstd * rstd * gm * grads[2 * set + 1] / count;
    k[3 * set + 2] = -rstd * gm * grads[2 * set] / count;
  }
}
template <class Map, int W>
__global__ void batch_norm_dx_k(Map map, int64_t units, const float* x, const float* dy, const double* mean, const double* k, float* dx) {
  using V = Vec<W>;
  PCGX_GRID_LOOP(u, units) {
    int64_t c, set;
    map.at(u * W, c, set);
    const double k0 = k[3 * set], k1 = k[3 * set + 1], k2 = k[3 * set + 2], m = mean[set];
    const typename V::T a = reinterpret_cast<const typename V::T*>(x)[u], d = reinterpret_cast<const typename V::T*>(dy)[u];
    typename V::T r;
#pragma unroll
    for (int q = 0; q < W; ++q) V::set(r, q, static_cast<float>(k0 * V::at(d, q) + k1 * (V::at(a, q) - m) + k2));
    reinterpret_cast<typename V::T*>(dx)[u] = r;
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

template <class Map>
__global__ void spread_k(Map map, int64_t total, const float* per_channel, float* dx) {
  PCGX_GRID_LOOP(i, total) {
    int64_t c, set;
    map.at(i, c, set);
    dx[i] = per_channel[c];
  }
}

template <class Map>
__global__ void batch_squares_dx_k(Map map, int64_t total, const float* x, const float* dq, const double* mean, float* dx) {
  PCGX_GRID_LOOP(i, total) {
    int64_t c, set;
    map.at(i, c, set);
    dx[i] = static_cast<float>(2.0 * dq[c] * (x[i] - mean[c]));
  }
}
__global__ void batch_squares_dsum_k(int64_t channels, const float* dq, const double* centred, double count, float* dsum) {
  PCGX_GRID_LOOP(c, channels) dsum[c] = static_cast<float>(-2.0 * dq[c] * centred[2 * c] / count);
}

template <class Map>
__global__ void batch_norm_apply_k(Map map, int64_t total, const float* x, const float* sum, const float* squares, const float* gamma,
                                   const float* beta, float inv_n, float eps, float* y) {
  PCGX_GRID_LOOP(i, total) {
    int64_t c, set;
    map.at(i, c, set);
    const float m = sum[c] * inv_n, v = fmaxf(squares[c] * inv_n, 0.f);
    y[i] = (x[i] - m) * (1.f / sqrtf(v + eps) * gamma[c]) + beta[c];
  }
}
template <class Map>
__global__ void batch_norm_apply_dx_k(Map map, int64_t total, const float* squares, const float* gamma, const float* dy, double count,
                                      double eps, float* dx) {
  PCGX_GRID_LOOP(i, total) {
    int64_t c, set;
    map.at(i, c, set);
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

// Max pooling's gradient in two passes: each output's argmax first (its
// index in the plane, -1 for a window of padding alone), then each input
// gathers the outputs whose argmax it is; finding every window's argmax
// from each of its inputs instead read every window once per input.
__global__ void pool_args_k(PoolGeometry g, const float* x, int* args) {
  const int64_t total = g.planes * g.ho * g.wo;
  PCGX_GRID_LOOP(i, total) {
    const int64_t plane = i / (g.ho * g.wo), oh = (i / g.wo) % g.ho, ow = i % g.wo;
    int64_t arg;
    args[i] = window_arg(g, x + plane * g.h * g.w, oh, ow, arg) ? static_cast<int>(arg) : -1;
  }
}

__global__ void pool_backward_k(PoolGeometry g, const int* args, const float* dy, float* dx) {
  const int64_t total = g.planes * g.h * g.w;
  const float inv_area = 1.f / static_cast<float>(g.kh * g.kw);
  PCGX_GRID_LOOP(i, total) {
    const int64_t plane = i / (g.h * g.w), ih = (i / g.w) % g.h, iw = i % g.w, at = ih * g.w + iw;
    const float* d = dy + plane * g.ho * g.wo;
    const int* arg = args ? args + plane * g.ho * g.wo : nullptr;
    // The outputs whose windows hold (ih, iw): oh sh - ph <= ih < oh sh - ph + kh.
    const int64_t oh0 = ih + g.ph - g.kh + 1 > 0 ? (ih + g.ph - g.kh + 1 + g.sh - 1) / g.sh : 0;
    const int64_t ow0 = iw + g.pw - g.kw + 1 > 0 ? (iw + g.pw - g.kw + 1 + g.sw - 1) / g.sw : 0;
    float sum = 0.f;
    for (int64_t oh = oh0; oh < g.ho && oh * g.sh - g.ph <= ih; ++oh)
      for (int64_t ow = ow0; ow < g.wo && ow * g.sw - g.pw <= iw; ++ow) {
        if (!g.max) sum += d[oh * g.wo + ow] * inv_area;
        else if (arg[oh * g.wo + ow] == at) sum += d[oh * g.wo + ow];
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
void pool_backward(const PoolGeometry& g, const float* x, const float* dy, float* dx, int* args, cudaStream_t s) {
  const int64_t total = g.planes * g.h * g.w, outputs = g.planes * g.ho * g.wo;
  if (total <= 0) return;
  if (g.max && outputs > 0) pool_args_k<<<blocks_for(outputs), kThreads, 0, s>>>(g, x, args);
  pool_backward_k<<<blocks_for(total), kThreads, 0, s>>>(g, g.max ? args : nullptr, dy, dx);
}

int64_t batch_stat_doubles(const ChannelGeometry& g) { return 4 * g.sets() * parts_for(g) + 9 * g.sets(); }

// A set's mean (k.r1, one double per set) and sum of squared deviations
// from it (k.r2); with dy, also sum dy and sum dy (x - mean) (k.r0): one
// pass over x (and dy).
static void set_moments(const ChannelGeometry& g, const float* x, const float* dy, const Scratch& k, cudaStream_t s) {
  const int64_t sets = g.sets();
  const int parts = parts_for(g);
  if (sets <= 0) return;
  const unsigned blocks = static_cast<unsigned>(sets * parts);
  if (g.s % 4 == 0) moments_partials_k<4><<<blocks, kThreads, 0, s>>>(g, parts, x, dy, k.partial);
  else moments_partials_k<1><<<blocks, kThreads, 0, s>>>(g, parts, x, dy, k.partial);
  moments_finish_k<<<blocks_for(sets), kThreads, 0, s>>>(sets, parts, static_cast<double>(g.group * g.s), k.partial, k.r1, k.r2,
                                                         dy ? k.r0 : nullptr);
}

// A shard of no samples has no sets (and no scratch): its per-channel sums
// are zero, written whole as every gradient is.
static bool empty_sums(const ChannelGeometry& g, std::initializer_list<float*> per_channel, cudaStream_t s) {
  if (g.sets() > 0) return false;
  for (float* out : per_channel)
    if (out) fill(out, g.c, 0.f, s);
  return true;
}

void batch_norm(const ChannelGeometry& g, const float* x, const float* gamma, const float* beta, float* y, float eps, double* scratch,
                cudaStream_t s) {
  const int64_t total = g.n * g.c * g.s;
  if (total <= 0) return;
  const Scratch k = carve(g, scratch);
  set_moments(g, x, nullptr, k, s);
  auto* factors = reinterpret_cast<float2*>(k.r3);
  batch_norm_factors_k<<<blocks_for(g.sets()), kThreads, 0, s>>>(g, gamma, k.r1, k.r2, eps, factors);
  PCGX_CHANNEL_LAUNCH_VEC(batch_norm_apply_sets_k, g, s, x, factors, beta, y);
}

void batch_norm_backward(const ChannelGeometry& g, const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                         float* dbeta, double eps, double* scratch, cudaStream_t s) {
  const int64_t total = g.n * g.c * g.s;
  if (empty_sums(g, {dgamma, dbeta}, s) || total <= 0) return;
  const Scratch k = carve(g, scratch);
  set_moments(g, x, dy, k, s);
  batch_norm_dx_factors_k<<<blocks_for(g.sets()), kThreads, 0, s>>>(g, gamma, k.r2, k.r0, eps, k.r3);
  PCGX_CHANNEL_LAUNCH_VEC(batch_norm_dx_k, g, s, x, dy, k.r1, k.r3, dx);
  batch_norm_affine_k<<<blocks_for(g.c), kThreads, 0, s>>>(g, k.r2, k.r0, eps, dgamma, dbeta);
}

void batch_sum(const ChannelGeometry& g, const float* x, float* out, double* scratch, cudaStream_t s) {
  if (empty_sums(g, {out}, s)) return;
  const Scratch k = carve(g, scratch);
  set_sums(Sums::kX, g, x, nullptr, nullptr, k.partial, k.r0, s);
  if (g.c > 0) to_float_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, k.r0, out);
}
void batch_sum_backward(const ChannelGeometry& g, const float* ds, float* dx, cudaStream_t s) {
  PCGX_CHANNEL_LAUNCH(spread_k, g, s, ds, dx);
}

void batch_squares(const ChannelGeometry& g, const float* x, const float* sum, int64_t count, float* out, double* scratch, cudaStream_t s) {
  if (empty_sums(g, {out}, s)) return;
  const Scratch k = carve(g, scratch);
  if (g.c <= 0) return;
  means_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, sum, static_cast<double>(count), true, k.r1);
  set_sums(Sums::kSquares, g, x, nullptr, k.r1, k.partial, k.r0, s);
  to_float_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, k.r0, out);
}
void batch_squares_backward(const ChannelGeometry& g, const float* x, const float* sum, const float* dq, int64_t count, float* dx, float* dsum,
                            double* scratch, cudaStream_t s) {
  if (empty_sums(g, {dsum}, s)) return;
  const Scratch k = carve(g, scratch);
  if (g.c <= 0) return;
  means_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, sum, static_cast<double>(count), false, k.r1);
  set_sums(Sums::kCentred, g, x, nullptr, k.r1, k.partial, k.r0, s);
  PCGX_CHANNEL_LAUNCH(batch_squares_dx_k, g, s, x, dq, k.r1, dx);
  batch_squares_dsum_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, dq, k.r0, static_cast<double>(count), dsum);
}

void batch_norm_apply(const ChannelGeometry& g, const float* x, const float* sum, const float* squares, const float* gamma,
                      const float* beta, int64_t count, float eps, float* y, cudaStream_t s) {
  PCGX_CHANNEL_LAUNCH(batch_norm_apply_k, g, s, x, sum, squares, gamma, beta, 1.f / static_cast<float>(count), eps, y);
}
void batch_norm_apply_backward(const ChannelGeometry& g, const float* x, const float* sum, const float* squares, const float* gamma,
                               const float* dy, int64_t count, double eps, float* dx, float* dsum, float* dsquares, float* dgamma,
                               float* dbeta, double* scratch, cudaStream_t s) {
  if (empty_sums(g, {dsum, dsquares, dgamma, dbeta}, s)) return;
  const Scratch k = carve(g, scratch);
  if (g.c <= 0) return;
  means_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, sum, static_cast<double>(count), false, k.r1);
  set_sums(Sums::kGradient, g, x, dy, k.r1, k.partial, k.r0, s);
  PCGX_CHANNEL_LAUNCH(batch_norm_apply_dx_k, g, s, squares, gamma, dy, static_cast<double>(count), eps, dx);
  batch_norm_apply_stats_k<<<blocks_for(g.c), kThreads, 0, s>>>(g.c, squares, gamma, k.r0, static_cast<double>(count), eps, dsum, dsquares,
                                                                dgamma, dbeta);
}

}  // namespace pcgx::runtime::cuda
