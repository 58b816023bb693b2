#pragma once
// The CUDA backend's own kernels (kernels.cu), as plain launchers on a
// stream: the backend (cuda_backend.cpp) calls them; cuBLAS does the
// products. Every launcher returns at once (the work is queued).
#include <cuda_runtime.h>

#include <cstdint>

namespace pcgx::runtime::cuda {

inline constexpr int kMaxRank = 8;  // as pcg/tensor.h's

// A block of a row-major shard: `extent` elements along each of `rank`
// dimensions, at `offset` in a tensor with `full_strides`.
struct BlockGeometry {
  int rank = 0;
  int64_t extent[kMaxRank] = {};
  int64_t offset[kMaxRank] = {};
  int64_t full_strides[kMaxRank] = {};
  int64_t numel = 0;  // of the block
};
// out = full[b]; full[b] += block; out += full[b]; full[b] = block.
enum class BlockOp : int { kRead, kAdd, kAddFrom, kWrite };
void block(BlockOp op, const BlockGeometry& g, float* full, float* blk, cudaStream_t s);

void fill(float* x, int64_t n, float value, cudaStream_t s);
void add(float* into, const float* x, int64_t n, cudaStream_t s);  // into += x

enum class Act : int { kNone, kRelu, kGelu, kSigmoid, kTanh };  // pcg/include/pcgx/pcg/ops/numeric.h's
// y = act(x) (in place allowed).
void activate(Act act, const float* x, float* y, int64_t n, cudaStream_t s);
// dx = dy * act'(z), from z (gelu) or y = act(z) (the others).
void activation_backward(Act act, const float* z, const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s);
// y = act(y + bias[j]) over rows of n columns.
void bias_activate(Act act, float* y, const float* bias, int64_t rows, int64_t n, cudaStream_t s);
// db[j] = sum over rows of d[i, j], in two passes through `partial`
// (column_chunks(rows, n) x n floats of scratch): the same sum every run.
int64_t column_chunks(int64_t rows, int64_t n);
void column_sums(const float* d, int64_t rows, int64_t n, float* db, float* partial, cudaStream_t s);

void ew_mul(const float* a, const float* b, float* y, int64_t n, cudaStream_t s);
void ew_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s);
void scale(const float* x, float k, float* y, int64_t n, cudaStream_t s);              // y = k x
void scale_add(const float* x, float k, float* y, int64_t n, cudaStream_t s);          // y += k x
void mul_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s);     // y += a b

// Dropout with the CPU's counter-based draws (pcgx/pcg/dropout_draw.h): each
// element's draw comes from its index in the whole (logical) tensor,
// `global_strides` of it and this shard's `offset`. add: y += (grad).
void dropout(const float* x, float* y, const BlockGeometry& shard, uint64_t seed, double rate, bool add, cudaStream_t s);

// Softmax along an axis of `len` elements `inner` apart, `outer` times
// (pcg/src/ops/norm_ops.cpp): with `causal`, key j is visible to query q
// iff j <= q, q = q_offset + (o mod rows_q). A contiguous axis of up to
// 1024 runs a warp per row with the row in registers (one read, one
// write); others a block per row.
void softmax(const float* x, float* y, int64_t outer, int64_t len, int64_t inner, bool causal, int64_t rows_q, int64_t q_offset,
             cudaStream_t s);
// dx = y (dy - sum(dy y)) along the axis.
void softmax_backward(const float* y, const float* dy, float* dx, int64_t outer, int64_t len, int64_t inner, cudaStream_t s);
// Rows of d: y = (x - mean) rstd (* gamma + beta); gamma null: not affine.
void layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows, int64_t d, float eps, cudaStream_t s);
// dx = rstd (g - mean(g) - xh mean(g xh)), g = dy gamma; dgamma = sum over
// rows of dy xh, dbeta = sum of dy (gamma null: neither). Scratch:
// `stats` 2 floats per row, `partial` 2 column_chunks(rows, d) x d floats.
void layer_norm_backward(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma, float* dbeta, float* stats,
                             float* partial, int64_t rows, int64_t d, float eps, cudaStream_t s);
// out[0] = sum (p - t)^2 / total, over a grid and then one block through
// `partial` (kLossPartials floats of scratch); dp = k (p - t),
// dt = -k (p - t) with k = 2 dy[0] / total (either may be null).
inline constexpr int64_t kLossPartials = 256;
void mse(const float* p, const float* t, float* out, int64_t n, int64_t total, float* partial, cudaStream_t s);
void mse_backward(const float* p, const float* t, const float* dy, float* dp, float* dt, int64_t n, int64_t total, cudaStream_t s);
// out[0] = sum over rows of (logsumexp(row) - row[label]) / total_rows,
// one block per row into `row_loss` (rows floats of scratch), then summed
// by one block; dx = dy[0] / total_rows (softmax(row) - onehot(label)),
// one block per row.
void cross_entropy(const float* x, const float* labels, float* out, int64_t rows, int64_t classes, int64_t total_rows, float* row_loss,
                   cudaStream_t s);
void cross_entropy_backward(const float* x, const float* labels, const float* dy, float* dx, int64_t rows, int64_t classes,
                                int64_t total_rows, cudaStream_t s);
// y = x with dimensions permuted: for y's element at index (i_0, ...),
// x's element at sum i_d x_strides[d] (x's stride of dimension perm[d]).
// kScatter: the transpose, x[...] = y[i] (a gradient: a permutation
// writes every element of x once).
enum class PermuteOp : int { kGather, kScatter };
struct PermuteGeometry {
  int rank = 0;
  int64_t extent[kMaxRank] = {};     // y's shape
  int64_t x_strides[kMaxRank] = {};  // per y dimension
  int64_t numel = 0;
};
void permute(const PermuteGeometry& g, float* x, float* y, PermuteOp op, cudaStream_t s);

// Embedding rows (pcg/src/ops/embedding_ops.cpp): out[i, c] = the sum over
// the `bag` indices of item i of table[index - row0, c], rows outside this
// shard's [0, rows) skipped; the gradient adds dy's rows back (atomically:
// an index can repeat).
void gather_rows(const float* idx, const float* table, float* out, int64_t items, int64_t bag, int64_t rows, int64_t cols, int64_t row0,
                 cudaStream_t s);
void scatter_rows_add(const float* idx, const float* dy, float* dtable, int64_t items, int64_t bag, int64_t rows, int64_t cols,
                      int64_t row0, cudaStream_t s);

// Optimizer updates (backend.h UpdateRule).
// Mixed precision (low_precision.h): y = x rounded to BF16 (fp16 false) or
// FP16, to nearest even, kept in FP32 storage (y == x: in place); x *=
// factor, setting *nonfinite to 1 when an element of the result is not
// finite.
void round_low(const float* x, float* y, int64_t n, bool fp16, cudaStream_t s);
void unscale(float* x, int64_t n, float factor, int* nonfinite, cudaStream_t s);
void sgd(float* w, const float* g, float* v, int64_t n, float lr, float momentum, cudaStream_t s);
void adam(float* w, const float* g, float* m, float* v, int64_t n, float beta1, float beta2, float one_minus_beta1,
          float one_minus_beta2, float step, float eps, float root_c2, cudaStream_t s);

}  // namespace pcgx::runtime::cuda
