// The CUDA backend's elementwise, block and update kernels (kernels.h).
#include "kernels.h"

#include <algorithm>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "kernel_common.cuh"
#include "pcgx/pcg/dropout_draw.h"

namespace pcgx::runtime::cuda {
namespace {

// The position in the full tensor of element i of a block.
__device__ int64_t full_index(const BlockGeometry& g, int64_t i) {
  int64_t at = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t e = g.extent[d];
    at += (g.offset[d] + i % e) * g.full_strides[d];
    i /= e;
  }
  return at;
}

__global__ void block_k(BlockOp op, BlockGeometry g, float* full, float* blk) {
  PCGX_GRID_LOOP(i, g.numel) {
    const int64_t f = full_index(g, i);
    if (op == BlockOp::kRead) blk[i] = full[f];
    else if (op == BlockOp::kAdd) full[f] += blk[i];
    else if (op == BlockOp::kAddFrom) blk[i] += full[f];
    else full[f] = blk[i];
  }
}

__global__ void fill_k(float* x, int64_t n, float v) {
  PCGX_GRID_LOOP(i, n) x[i] = v;
}
__device__ float act_grad(Act act, float z, float y, float dy) {
  switch (act) {
    case Act::kNone: return dy;
    case Act::kRelu: return y > 0.f ? dy : 0.f;
    case Act::kSigmoid: return dy * y * (1.f - y);
    case Act::kTanh: return dy * (1.f - y * y);
    case Act::kGelu:
      return dy * (0.5f * (1.f + erff(z * 0.70710678118654752f)) + z * 0.39894228040143268f * expf(-0.5f * z * z));
  }
  return dy;
}

// Element-wise maps: y[i] = f(a[i], b[i], c[i], y[i]), a null input read
// as 0 and y read only where F::kReadsY; W = 4 elements per load where
// every pointer is 16-byte aligned (the arena's buffers are; a pointer
// into one may not be), the last n mod 4 one at a time.
struct Activate {
  static constexpr bool kReadsY = false;
  Act act;
  __device__ float operator()(float x, float, float, float) const { return act_f(act, x); }
};
struct ActivationGrad {  // (z, y, dy): dx
  static constexpr bool kReadsY = false;
  Act act;
  __device__ float operator()(float z, float y, float dy, float) const { return act_grad(act, z, y, dy); }
};
struct Sum2 {
  static constexpr bool kReadsY = false;
  __device__ float operator()(float a, float b, float, float) const { return a + b; }
};
struct Product2 {
  static constexpr bool kReadsY = false;
  __device__ float operator()(float a, float b, float, float) const { return a * b; }
};
struct Scaled {
  static constexpr bool kReadsY = false;
  float k;
  __device__ float operator()(float x, float, float, float) const { return x * k; }
};
struct AddInto {
  static constexpr bool kReadsY = true;
  __device__ float operator()(float x, float, float, float y) const { return y + x; }
};
struct ScaledInto {
  static constexpr bool kReadsY = true;
  float k;
  __device__ float operator()(float x, float, float, float y) const { return y + x * k; }
};
struct ProductInto {
  static constexpr bool kReadsY = true;
  __device__ float operator()(float a, float b, float, float y) const { return y + a * b; }
};

__device__ inline float4 load4(const float* p, int64_t u) { return p ? reinterpret_cast<const float4*>(p)[u] : make_float4(0.f, 0.f, 0.f, 0.f); }

template <class F, int W>
__global__ void map_k(F f, const float* a, const float* b, const float* c, float* y, int64_t n) {
  const int64_t units = W == 4 ? n / 4 : 0;
  PCGX_GRID_LOOP(u, units) {
    const float4 va = load4(a, u), vb = load4(b, u), vc = load4(c, u);
    float4 vy = F::kReadsY ? load4(y, u) : make_float4(0.f, 0.f, 0.f, 0.f);
    vy = make_float4(f(va.x, vb.x, vc.x, vy.x), f(va.y, vb.y, vc.y, vy.y), f(va.z, vb.z, vc.z, vy.z), f(va.w, vb.w, vc.w, vy.w));
    reinterpret_cast<float4*>(y)[u] = vy;
  }
  PCGX_GRID_LOOP(t, n - 4 * units) {
    const int64_t i = 4 * units + t;
    y[i] = f(a ? a[i] : 0.f, b ? b[i] : 0.f, c ? c[i] : 0.f, F::kReadsY ? y[i] : 0.f);
  }
}

template <class F>
void map(F f, const float* a, const float* b, const float* c, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  const auto bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(c) | reinterpret_cast<uintptr_t>(y);
  if (bits % 16 == 0 && n >= 4) map_k<F, 4><<<blocks_for(n / 4), kThreads, 0, s>>>(f, a, b, c, y, n);
  else map_k<F, 1><<<blocks_for(n), kThreads, 0, s>>>(f, a, b, c, y, n);
}

__global__ void bias_activate_k(Act act, float* y, const float* bias, int64_t rows, int64_t n) {
  PCGX_GRID_LOOP(i, rows * n) y[i] = act_f(act, y[i] + (bias ? bias[i % n] : 0.f));
}
// The same, 4 elements at a time, where a row's length is a multiple of 4
// and the whole fits FastDiv (the column from a 32-bit division).
__global__ void bias_activate4_k(Act act, float* y, const float* bias, int64_t units, FastDiv columns) {
  PCGX_GRID_LOOP(u, units) {
    const auto i = static_cast<uint32_t>(4 * u), j = i - columns.div(i) * columns.d;
    float4 v = reinterpret_cast<float4*>(y)[u];
    const float4 b = bias ? *reinterpret_cast<const float4*>(bias + j) : make_float4(0.f, 0.f, 0.f, 0.f);
    v = make_float4(act_f(act, v.x + b.x), act_f(act, v.y + b.y), act_f(act, v.z + b.z), act_f(act, v.w + b.w));
    reinterpret_cast<float4*>(y)[u] = v;
  }
}

__global__ void dropout_k(const float* x, float* y, BlockGeometry g, uint64_t seed, double rate, float scale, bool add) {
  PCGX_GRID_LOOP(i, g.numel) {
    const bool keep = keep_draw(seed, static_cast<uint64_t>(full_index(g, i))) >= rate;
    if (add) {
      if (keep) y[i] += x[i] * scale;
    } else {
      y[i] = keep ? x[i] * scale : 0.f;
    }
  }
}

__global__ void round_low_k(const float* x, float* y, int64_t n, bool fp16) {
  PCGX_GRID_LOOP(i, n) y[i] = fp16 ? __half2float(__float2half_rn(x[i])) : __bfloat162float(__float2bfloat16_rn(x[i]));
}
__global__ void unscale_k(float* x, int64_t n, float factor, int* nonfinite) {
  PCGX_GRID_LOOP(i, n) {
    x[i] *= factor;
    if (!isfinite(x[i])) *nonfinite = 1;
  }
}
__global__ void sgd_k(float* w, const float* g, float* v, int64_t n, float lr, float mu) {
  PCGX_GRID_LOOP(i, n) {
    v[i] = mu * v[i] + g[i];
    w[i] -= lr * v[i];
  }
}
__global__ void adam_k(float* w, const float* g, float* m, float* v, int64_t n, float b1, float b2, float a1, float a2, float step,
                       float eps, float root_c2) {
  PCGX_GRID_LOOP(i, n) {
    m[i] = b1 * m[i] + a1 * g[i];
    v[i] = b2 * v[i] + a2 * g[i] * g[i];
    w[i] -= step * m[i] / (sqrtf(v[i]) / root_c2 + eps);
  }
}

}  // namespace

void block(BlockOp op, const BlockGeometry& g, float* full, float* blk, cudaStream_t s) {
  if (g.numel > 0) block_k<<<blocks_for(g.numel), kThreads, 0, s>>>(op, g, full, blk);
}
void fill(float* x, int64_t n, float value, cudaStream_t s) {
  if (n > 0) fill_k<<<blocks_for(n), kThreads, 0, s>>>(x, n, value);
}
void add(float* into, const float* x, int64_t n, cudaStream_t s) { map(AddInto{}, x, nullptr, nullptr, into, n, s); }
void activate(Act act, const float* x, float* y, int64_t n, cudaStream_t s) { map(Activate{act}, x, nullptr, nullptr, y, n, s); }
void activation_backward(Act act, const float* z, const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  map(ActivationGrad{act}, z, y, dy, dx, n, s);
}
void bias_activate(Act act, float* y, const float* bias, int64_t rows, int64_t n, cudaStream_t s) {
  const int64_t total = rows * n;
  if (total <= 0) return;
  if (n % 4 == 0 && fits_fast_div(total) && (reinterpret_cast<uintptr_t>(y) | reinterpret_cast<uintptr_t>(bias)) % 16 == 0)
    bias_activate4_k<<<blocks_for(total / 4), kThreads, 0, s>>>(act, y, bias, total / 4, FastDiv(n));
  else
    bias_activate_k<<<blocks_for(total), kThreads, 0, s>>>(act, y, bias, rows, n);
}
void ew_mul(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) { map(Product2{}, a, b, nullptr, y, n, s); }
void ew_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) { map(Sum2{}, a, b, nullptr, y, n, s); }
void scale(const float* x, float k, float* y, int64_t n, cudaStream_t s) { map(Scaled{k}, x, nullptr, nullptr, y, n, s); }
void scale_add(const float* x, float k, float* y, int64_t n, cudaStream_t s) { map(ScaledInto{k}, x, nullptr, nullptr, y, n, s); }
void mul_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) { map(ProductInto{}, a, b, nullptr, y, n, s); }
void dropout(const float* x, float* y, const BlockGeometry& shard, uint64_t seed, double rate, bool add, cudaStream_t s) {
  const auto k = static_cast<float>(1.0 / (1.0 - rate));
  if (shard.numel > 0) dropout_k<<<blocks_for(shard.numel), kThreads, 0, s>>>(x, y, shard, seed, rate, k, add);
}
void round_low(const float* x, float* y, int64_t n, bool fp16, cudaStream_t s) {
  if (n > 0) round_low_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, n, fp16);
}
void unscale(float* x, int64_t n, float factor, int* nonfinite, cudaStream_t s) {
  if (n > 0) unscale_k<<<blocks_for(n), kThreads, 0, s>>>(x, n, factor, nonfinite);
}
void sgd(float* w, const float* g, float* v, int64_t n, float lr, float momentum, cudaStream_t s) {
  if (n > 0) sgd_k<<<blocks_for(n), kThreads, 0, s>>>(w, g, v, n, lr, momentum);
}
void adam(float* w, const float* g, float* m, float* v, int64_t n, float beta1, float beta2, float one_minus_beta1,
          float one_minus_beta2, float step, float eps, float root_c2, cudaStream_t s) {
  if (n > 0)
    adam_k<<<blocks_for(n), kThreads, 0, s>>>(w, g, m, v, n, beta1, beta2, one_minus_beta1, one_minus_beta2, step, eps, root_c2);
}

}  // namespace pcgx::runtime::cuda

// Rows: softmax, LayerNorm and losses. One block of kRowThreads per row,
// sums in shared memory.
namespace pcgx::runtime::cuda {
namespace {

constexpr int kRowThreads = 256;

// The block's sum (or max) of v; every thread gets it.
template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
  const int t = threadIdx.x;
  shared[t] = v;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (t < step) shared[t] = kMax ? fmaxf(shared[t], shared[t + step]) : shared[t] + shared[t + step];
    __syncthreads();
  }
  const float r = shared[0];
  __syncthreads();
  return r;
}

int row_blocks(int64_t rows) { return static_cast<int>(rows < 1 ? 1 : (rows > 2147483647 ? 2147483647 : rows)); }

__global__ void softmax_k(const float* x, float* y, int64_t len, int64_t inner, bool causal, int64_t rows_q, int64_t q_offset) {
  __shared__ float shared[kRowThreads];
  const int64_t row = blockIdx.x, o = row / inner, i = row % inner;
  const float* in = x + o * len * inner + i;
  float* out = y + o * len * inner + i;
  const int64_t visible = causal ? q_offset + (o % rows_q) + 1 : len;
  const int64_t shown = visible < len ? visible : len;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < shown; j += blockDim.x) m = fmaxf(m, in[j * inner]);
  m = block_reduce<true>(m, shared);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    const float e = j < visible ? expf(in[j * inner] - m) : 0.f;
    out[j * inner] = e;
    sum += e;
  }
  sum = block_reduce<false>(sum, shared);
  const float inv = 1.f / sum;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) out[j * inner] *= inv;
}

__global__ void softmax_backward_k(const float* y, const float* dy, float* dx, int64_t len, int64_t inner) {
  __shared__ float shared[kRowThreads];
  const int64_t row = blockIdx.x, base = (row / inner) * len * inner + row % inner;
  float dot = 0.f;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) dot += dy[base + j * inner] * y[base + j * inner];
  dot = block_reduce<false>(dot, shared);
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    const int64_t e = base + j * inner;
    dx[e] = y[e] * (dy[e] - dot);
  }
}

// The same with a warp per contiguous row of len <= 32 kPer, the row in
// registers: the input read once and the output written once (the block
// kernels above read it two or three times). Lane l holds elements
// l, l + 32, ...: each load of the warp is one coalesced 128-byte line.
__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
constexpr int kWarpRowThreads = 256;  // 8 rows per block

template <int kPer>
__global__ void softmax_warp_k(const float* x, float* y, int64_t rows, int len, bool causal, int64_t rows_q, int64_t q_offset) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpRowThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const float* in = x + row * len;
  float* out = y + row * len;
  const int64_t visible = causal ? q_offset + row % rows_q + 1 : len;
  float v[kPer];
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int j = lane + 32 * k;
    v[k] = j < len && j < visible ? in[j] : -INFINITY;
    m = fmaxf(m, v[k]);
  }
  m = warp_max(m);
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int j = lane + 32 * k;
    v[k] = j < len && j < visible ? expf(v[k] - m) : 0.f;
    sum += v[k];
  }
  const float inv = 1.f / warp_sum(sum);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int j = lane + 32 * k;
    if (j < len) out[j] = v[k] * inv;
  }
}

template <int kPer>
__global__ void softmax_backward_warp_k(const float* y, const float* dy, float* dx, int64_t rows, int len) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpRowThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t base = row * len;
  float yv[kPer], g[kPer];
  float dot = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int j = lane + 32 * k;
    yv[k] = j < len ? y[base + j] : 0.f;
    g[k] = j < len ? dy[base + j] : 0.f;
    dot += yv[k] * g[k];
  }
  dot = warp_sum(dot);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int j = lane + 32 * k;
    if (j < len) dx[base + j] = yv[k] * (g[k] - dot);
  }
}

// Calls f with the smallest kPer (a power of two up to 32) that holds len;
// false where len is above 1024.
template <class F>
bool with_row_registers(int64_t len, F&& f) {
  if (len <= 32) return f(std::integral_constant<int, 1>{}), true;
  if (len <= 64) return f(std::integral_constant<int, 2>{}), true;
  if (len <= 128) return f(std::integral_constant<int, 4>{}), true;
  if (len <= 256) return f(std::integral_constant<int, 8>{}), true;
  if (len <= 512) return f(std::integral_constant<int, 16>{}), true;
  if (len <= 1024) return f(std::integral_constant<int, 32>{}), true;
  return false;
}
unsigned warp_row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpRowThreads / 32 - 1) / (kWarpRowThreads / 32)); }

__global__ void layer_norm_k(const float* x, const float* gamma, const float* beta, float* y, int64_t d, float eps) {
  __shared__ float shared[kRowThreads];
  const float* in = x + blockIdx.x * d;
  float* out = y + blockIdx.x * d;
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += in[j];
  const float mean = block_reduce<false>(sum, shared) / static_cast<float>(d);
  float var = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) var += (in[j] - mean) * (in[j] - mean);
  const float scale = 1.f / sqrtf(block_reduce<false>(var, shared) / static_cast<float>(d) + eps);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = (in[j] - mean) * scale;
    out[j] = gamma ? v * gamma[j] + beta[j] : v;
  }
}

__global__ void layer_norm_backward_k(const float* x, const float* gamma, const float* dy, float* dx, float* stats, int64_t d, float eps) {
  __shared__ float shared[kRowThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * d;
  const float* dyr = dy + r * d;
  float* dxr = dx + r * d;
  const float n = static_cast<float>(d);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += xr[j];
  const float mean = block_reduce<false>(sum, shared) / n;
  float var = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) var += (xr[j] - mean) * (xr[j] - mean);
  const float rstd = 1.f / sqrtf(block_reduce<false>(var, shared) / n + eps);
  float sg = 0.f, sgx = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float g = gamma ? dyr[j] * gamma[j] : dyr[j];
    sg += g, sgx += g * (xr[j] - mean) * rstd;
  }
  const float mg = block_reduce<false>(sg, shared) / n, mgx = block_reduce<false>(sgx, shared) / n;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float g = gamma ? dyr[j] * gamma[j] : dyr[j];
    dxr[j] = rstd * (g - mg - (xr[j] - mean) * rstd * mgx);
  }
  if (threadIdx.x == 0) stats[2 * r] = mean, stats[2 * r + 1] = rstd;
}

// Column sums in two passes (column_chunks): blocks of kThreads columns by
// `chunks` stripes of rows, each thread summing its column over the rows
// of its stripe (adjacent threads, adjacent columns: coalesced), into
// partial[stripe, column]; then each column's stripes added in order, so
// the sum is the same every run. A block per column tile alone would give
// a bias gradient of 1024 columns 4 blocks on a GPU of 132 SMs.
__global__ void column_partials_k(const float* d, int64_t rows, int64_t n, float* partial) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= n) return;
  float s = 0.f;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) s += d[r * n + j];
  partial[blockIdx.y * n + j] = s;
}
__global__ void column_finish_k(const float* partial, int64_t chunks, int64_t n, float* db) {
  PCGX_GRID_LOOP(j, n) {
    float s = 0.f;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * n + j];
    db[j] = s;
  }
}

// LayerNorm's gamma and beta gradients the same way: per stripe of rows,
// the sums of dy xh and of dy per column, then the stripes added in order.
__global__ void layer_norm_affine_partials_k(const float* x, const float* dy, const float* stats, float* partial, int64_t rows, int64_t d) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= d) return;
  float sg = 0.f, sb = 0.f;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float xh = (x[r * d + j] - stats[2 * r]) * stats[2 * r + 1];
    sg += dy[r * d + j] * xh, sb += dy[r * d + j];
  }
  partial[(2 * blockIdx.y) * d + j] = sg;
  partial[(2 * blockIdx.y + 1) * d + j] = sb;
}
__global__ void layer_norm_affine_finish_k(const float* partial, int64_t chunks, int64_t d, float* dgamma, float* dbeta) {
  PCGX_GRID_LOOP(j, d) {
    float sg = 0.f, sb = 0.f;
    for (int64_t c = 0; c < chunks; ++c) sg += partial[2 * c * d + j], sb += partial[(2 * c + 1) * d + j];
    dgamma[j] = sg, dbeta[j] = sb;
  }
}

// A sum over a whole tensor in two passes: each of up to kReduceBlocks
// blocks sums a grid-stride share into partial[block], then one block adds
// the partials (block_reduce: the same order every run).
constexpr int kReduceBlocks = static_cast<int>(kLossPartials);

__global__ void squared_error_partials_k(const float* p, const float* t, float* partial, int64_t n) {
  __shared__ float shared[kRowThreads];
  float sum = 0.f;
  PCGX_GRID_LOOP(i, n) sum += (p[i] - t[i]) * (p[i] - t[i]);
  sum = block_reduce<false>(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}
// out[0] = the sum of n values over `divisor`.
__global__ void sum_finish_k(const float* values, int64_t n, float divisor, float* out) {
  __shared__ float shared[kRowThreads];
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += values[i];
  sum = block_reduce<false>(sum, shared);
  if (threadIdx.x == 0) out[0] = sum / divisor;
}

__global__ void mse_backward_k(const float* p, const float* t, const float* dy, float* dp, float* dt, int64_t n, int64_t total) {
  const float k = 2.f * dy[0] / static_cast<float>(total);
  PCGX_GRID_LOOP(i, n) {
    const float d = k * (p[i] - t[i]);
    if (dp) dp[i] = d;
    if (dt) dt[i] = -d;
  }
}

// Cross-entropy, one block per row of `classes` logits (adjacent threads
// read adjacent logits): the row's max and sum of exponentials by block
// reductions. The forward writes each row's loss to loss[r] for
// sum_finish_k; the backward writes the row's gradient.
// The block's row: its max (m) and the sum of exp(row - m), every thread.
__device__ float row_exp_sum(const float* row, int64_t classes, float* shared, float& m) {
  m = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) m = fmaxf(m, row[c]);
  m = block_reduce<true>(m, shared);
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) sum += expf(row[c] - m);
  return block_reduce<false>(sum, shared);
}

__global__ void cross_entropy_rows_k(const float* x, const float* labels, float* loss, int64_t classes) {
  __shared__ float shared[kRowThreads];
  const int64_t r = blockIdx.x;
  const float* row = x + r * classes;
  float m;
  const float sum = row_exp_sum(row, classes, shared, m);
  if (threadIdx.x == 0) {
    const auto label = static_cast<int64_t>(labels[r]);
    loss[r] = logf(sum) + m - (label >= 0 && label < classes ? row[label] : 0.f);
  }
}

__global__ void cross_entropy_backward_k(const float* x, const float* labels, const float* dy, float* dx, int64_t classes,
                                         int64_t total_rows) {
  __shared__ float shared[kRowThreads];
  const float scale = dy[0] / static_cast<float>(total_rows);
  const int64_t r = blockIdx.x;
  const float* row = x + r * classes;
  float* drow = dx + r * classes;
  float m;
  const float inv = 1.f / row_exp_sum(row, classes, shared, m);
  const auto label = static_cast<int64_t>(labels[r]);
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) drow[c] = scale * (expf(row[c] - m) * inv - (c == label ? 1.f : 0.f));
}

// Index math in I: 32-bit unsigned where the tensor has under 2^31
// elements (a 64-bit division per dimension per element costs several
// times a 32-bit one), else 64-bit. T: float, or float4 where the last
// dimension stays last (permute() then divides the geometry by 4).
template <class I, class T>
__global__ void permute_k(PermuteGeometry g, T* x, T* y, PermuteOp op) {
  const I n = static_cast<I>(g.numel), stride = static_cast<I>(blockDim.x) * gridDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    I rest = i, at = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      const auto e = static_cast<I>(g.extent[d]);
      at += (rest % e) * static_cast<I>(g.x_strides[d]);
      rest /= e;
    }
    if (op == PermuteOp::kScatter) x[at] = y[i];
    else y[i] = x[at];
  }
}

}  // namespace

void softmax(const float* x, float* y, int64_t outer, int64_t len, int64_t inner, bool causal, int64_t rows_q, int64_t q_offset,
             cudaStream_t s) {
  if (outer * inner <= 0) return;
  if (inner == 1 && with_row_registers(len, [&](auto per) {
        softmax_warp_k<decltype(per)::value><<<warp_row_blocks(outer), kWarpRowThreads, 0, s>>>(x, y, outer, static_cast<int>(len), causal,
                                                                                                  rows_q, q_offset);
      }))
    return;
  softmax_k<<<row_blocks(outer * inner), kRowThreads, 0, s>>>(x, y, len, inner, causal, rows_q, q_offset);
}
void softmax_backward(const float* y, const float* dy, float* dx, int64_t outer, int64_t len, int64_t inner, cudaStream_t s) {
  if (outer * inner <= 0) return;
  if (inner == 1 && with_row_registers(len, [&](auto per) {
        softmax_backward_warp_k<decltype(per)::value><<<warp_row_blocks(outer), kWarpRowThreads, 0, s>>>(y, dy, dx, outer,
                                                                                                           static_cast<int>(len));
      }))
    return;
  softmax_backward_k<<<row_blocks(outer * inner), kRowThreads, 0, s>>>(y, dy, dx, len, inner);
}
void layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows, int64_t d, float eps, cudaStream_t s) {
  if (rows > 0) layer_norm_k<<<row_blocks(rows), kRowThreads, 0, s>>>(x, gamma, beta, y, d, eps);
}
int64_t column_chunks(int64_t rows, int64_t n) {
  const int64_t tiles = (n + kThreads - 1) / kThreads;
  int64_t chunks = 512 / (tiles < 1 ? 1 : tiles);
  if (chunks > 64) chunks = 64;
  if (chunks > rows) chunks = rows;
  return chunks < 1 ? 1 : chunks;
}
void column_sums(const float* d, int64_t rows, int64_t n, float* db, float* partial, cudaStream_t s) {
  if (n <= 0) return;
  if (rows <= 0) {
    fill(db, n, 0.f, s);
    return;
  }
  const int64_t chunks = column_chunks(rows, n);
  column_partials_k<<<dim3(static_cast<unsigned>((n + kThreads - 1) / kThreads), static_cast<unsigned>(chunks)), kThreads, 0, s>>>(d, rows, n,
                                                                                                                                   partial);
  column_finish_k<<<blocks_for(n), kThreads, 0, s>>>(partial, chunks, n, db);
}
void layer_norm_backward(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma, float* dbeta, float* stats,
                         float* partial, int64_t rows, int64_t d, float eps, cudaStream_t s) {
  if (rows == 0) {
    if (gamma) fill(dgamma, d, 0.f, s), fill(dbeta, d, 0.f, s);
    return;
  }
  layer_norm_backward_k<<<row_blocks(rows), kRowThreads, 0, s>>>(x, gamma, dy, dx, stats, d, eps);
  if (!gamma) return;
  const int64_t chunks = column_chunks(rows, d);
  layer_norm_affine_partials_k<<<dim3(static_cast<unsigned>((d + kThreads - 1) / kThreads), static_cast<unsigned>(chunks)), kThreads, 0, s>>>(
      x, dy, stats, partial, rows, d);
  layer_norm_affine_finish_k<<<blocks_for(d), kThreads, 0, s>>>(partial, chunks, d, dgamma, dbeta);
}
void mse(const float* p, const float* t, float* out, int64_t n, int64_t total, float* partial, cudaStream_t s) {
  const int blocks = n > 0 ? std::min(blocks_for(n), kReduceBlocks) : 1;
  squared_error_partials_k<<<blocks, kRowThreads, 0, s>>>(p, t, partial, n);
  sum_finish_k<<<1, kRowThreads, 0, s>>>(partial, blocks, static_cast<float>(total), out);
}
void mse_backward(const float* p, const float* t, const float* dy, float* dp, float* dt, int64_t n, int64_t total, cudaStream_t s) {
  if (n > 0) mse_backward_k<<<blocks_for(n), kThreads, 0, s>>>(p, t, dy, dp, dt, n, total);
}
void cross_entropy(const float* x, const float* labels, float* out, int64_t rows, int64_t classes, int64_t total_rows, float* row_loss,
                   cudaStream_t s) {
  if (rows > 0) cross_entropy_rows_k<<<row_blocks(rows), kRowThreads, 0, s>>>(x, labels, row_loss, classes);
  sum_finish_k<<<1, kRowThreads, 0, s>>>(row_loss, rows, static_cast<float>(total_rows), out);
}
void cross_entropy_backward(const float* x, const float* labels, const float* dy, float* dx, int64_t rows, int64_t classes,
                            int64_t total_rows, cudaStream_t s) {
  if (rows > 0) cross_entropy_backward_k<<<row_blocks(rows), kRowThreads, 0, s>>>(x, labels, dy, dx, classes, total_rows);
}
// permute_k with 32-bit index math where the elements (of T) allow it.
template <class T>
static void launch_permute(const PermuteGeometry& g, T* x, T* y, PermuteOp op, cudaStream_t s) {
  if (fits_fast_div(g.numel)) permute_k<uint32_t><<<blocks_for(g.numel), kThreads, 0, s>>>(g, x, y, op);
  else permute_k<int64_t><<<blocks_for(g.numel), kThreads, 0, s>>>(g, x, y, op);
}
void permute(const PermuteGeometry& g, float* x, float* y, PermuteOp op, cudaStream_t s) {
  if (g.numel <= 0) return;
  const int last = g.rank - 1;
  if (last >= 0 && g.x_strides[last] == 1 && g.extent[last] % 4 == 0 &&
      (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 == 0) {
    // Rows stay rows (an attention's heads split or merged): moved 4
    // floats at a time. x's other strides are multiples of the row's
    // length, so of 4.
    PermuteGeometry q = g;
    q.extent[last] /= 4, q.numel /= 4;
    for (int d = 0; d < last; ++d) q.x_strides[d] /= 4;
    return launch_permute(q, reinterpret_cast<float4*>(x), reinterpret_cast<float4*>(y), op, s);
  }
  launch_permute(g, x, y, op, s);
}

}  // namespace pcgx::runtime::cuda

// Embedding rows.
namespace pcgx::runtime::cuda {
namespace {

__global__ void gather_rows_k(const float* idx, const float* table, float* out, int64_t items, int64_t bag, int64_t rows, int64_t cols,
                              int64_t row0) {
  PCGX_GRID_LOOP(e, items * cols) {
    const int64_t i = e / cols, c = e % cols;
    float sum = 0.f;
    for (int64_t b = 0; b < bag; ++b) {
      const int64_t v = static_cast<int64_t>(idx[i * bag + b]) - row0;
      if (v >= 0 && v < rows) sum += table[v * cols + c];
    }
    out[e] = sum;
  }
}

__global__ void scatter_rows_k(const float* idx, const float* dy, float* dtable, int64_t items, int64_t bag, int64_t rows, int64_t cols,
                               int64_t row0) {
  PCGX_GRID_LOOP(e, items * bag * cols) {
    const int64_t j = e / cols, c = e % cols;  // j: the j-th index, of item j / bag
    const int64_t v = static_cast<int64_t>(idx[j]) - row0;
    if (v >= 0 && v < rows) atomicAdd(dtable + v * cols + c, dy[(j / bag) * cols + c]);
  }
}

}  // namespace

void gather_rows(const float* idx, const float* table, float* out, int64_t items, int64_t bag, int64_t rows, int64_t cols, int64_t row0,
                 cudaStream_t s) {
  if (items * cols > 0) gather_rows_k<<<blocks_for(items * cols), kThreads, 0, s>>>(idx, table, out, items, bag, rows, cols, row0);
}
void scatter_rows_add(const float* idx, const float* dy, float* dtable, int64_t items, int64_t bag, int64_t rows, int64_t cols,
                      int64_t row0, cudaStream_t s) {
  if (items * bag * cols > 0)
    scatter_rows_k<<<blocks_for(items * bag * cols), kThreads, 0, s>>>(idx, dy, dtable, items, bag, rows, cols, row0);
}

}  // namespace pcgx::runtime::cuda
