// The CUDA backend's elementwise, block and update kernels (kernels.h).
// Grid-stride loops: any launch size covers any n.
#include "kernels.h"
#include "pcgx/pcg/dropout_draw.h"

namespace pcgx::runtime::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

#define PCGX_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

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
    else blk[i] += full[f];
  }
}

__global__ void fill_k(float* x, int64_t n, float v) {
  PCGX_GRID_LOOP(i, n) x[i] = v;
}
__global__ void add_k(float* into, const float* x, int64_t n) {
  PCGX_GRID_LOOP(i, n) into[i] += x[i];
}

// The CPU's formulas (pcg/src/ops/vector_math.cpp), in float.
__device__ float act_f(Act act, float v) {
  switch (act) {
    case Act::kNone: return v;
    case Act::kRelu: return v > 0.f ? v : 0.f;
    case Act::kGelu: return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    case Act::kSigmoid: return 1.f / (1.f + expf(-v));
    case Act::kTanh: return tanhf(v);
  }
  return v;
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

__global__ void activate_k(Act act, const float* x, float* y, int64_t n) {
  PCGX_GRID_LOOP(i, n) y[i] = act_f(act, x[i]);
}
__global__ void activation_backward_add_k(Act act, const float* z, const float* y, const float* dy, float* dx, int64_t n) {
  PCGX_GRID_LOOP(i, n) dx[i] += act_grad(act, z ? z[i] : 0.f, y ? y[i] : 0.f, dy[i]);
}
__global__ void bias_activate_k(Act act, float* y, const float* bias, int64_t rows, int64_t n) {
  PCGX_GRID_LOOP(i, rows * n) y[i] = act_f(act, y[i] + (bias ? bias[i % n] : 0.f));
}
__global__ void column_sums_k(const float* d, int64_t rows, int64_t n, float* db) {
  PCGX_GRID_LOOP(j, n) {
    float s = 0.f;
    for (int64_t i = 0; i < rows; ++i) s += d[i * n + j];
    db[j] += s;
  }
}
__global__ void ew_mul_k(const float* a, const float* b, float* y, int64_t n) {
  PCGX_GRID_LOOP(i, n) y[i] = a[i] * b[i];
}
__global__ void ew_add_k(const float* a, const float* b, float* y, int64_t n) {
  PCGX_GRID_LOOP(i, n) y[i] = a[i] + b[i];
}
__global__ void scale_k(const float* x, float k, float* y, int64_t n) {
  PCGX_GRID_LOOP(i, n) y[i] = x[i] * k;
}
__global__ void scale_add_k(const float* x, float k, float* y, int64_t n) {
  PCGX_GRID_LOOP(i, n) y[i] += x[i] * k;
}
__global__ void mul_add_k(const float* a, const float* b, float* y, int64_t n) {
  PCGX_GRID_LOOP(i, n) y[i] += a[i] * b[i];
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
void add(float* into, const float* x, int64_t n, cudaStream_t s) {
  if (n > 0) add_k<<<blocks_for(n), kThreads, 0, s>>>(into, x, n);
}
void activate(Act act, const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) activate_k<<<blocks_for(n), kThreads, 0, s>>>(act, x, y, n);
}
void activation_backward_add(Act act, const float* z, const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  if (n > 0) activation_backward_add_k<<<blocks_for(n), kThreads, 0, s>>>(act, z, y, dy, dx, n);
}
void bias_activate(Act act, float* y, const float* bias, int64_t rows, int64_t n, cudaStream_t s) {
  if (rows * n > 0) bias_activate_k<<<blocks_for(rows * n), kThreads, 0, s>>>(act, y, bias, rows, n);
}
void add_column_sums(const float* d, int64_t rows, int64_t n, float* db, cudaStream_t s) {
  if (n > 0) column_sums_k<<<blocks_for(n), kThreads, 0, s>>>(d, rows, n, db);
}
void ew_mul(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) ew_mul_k<<<blocks_for(n), kThreads, 0, s>>>(a, b, y, n);
}
void ew_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) ew_add_k<<<blocks_for(n), kThreads, 0, s>>>(a, b, y, n);
}
void scale(const float* x, float k, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) scale_k<<<blocks_for(n), kThreads, 0, s>>>(x, k, y, n);
}
void scale_add(const float* x, float k, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) scale_add_k<<<blocks_for(n), kThreads, 0, s>>>(x, k, y, n);
}
void mul_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) mul_add_k<<<blocks_for(n), kThreads, 0, s>>>(a, b, y, n);
}
void dropout(const float* x, float* y, const BlockGeometry& shard, uint64_t seed, double rate, bool add, cudaStream_t s) {
  const auto k = static_cast<float>(1.0 / (1.0 - rate));
  if (shard.numel > 0) dropout_k<<<blocks_for(shard.numel), kThreads, 0, s>>>(x, y, shard, seed, rate, k, add);
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
