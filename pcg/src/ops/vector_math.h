#pragma once
// Float loops of the kernels that dominate a training step after the GEMMs
// (internal to pcg/src/ops): activations and their derivatives, softmax
// rows, bias addition, column sums. They are compiled for the build
// machine's vector units like gemm.cpp (PCGX_NATIVE_GEMM), and evaluate exp
// and erf with Eigen's vectorized approximations (a few ulp from libm's;
// libm's scalar erf was 17% of a transformer-block step).
#include <cstddef>
#include <cstdint>

#include "pcgx/pcg/ops/numeric.h"

namespace pcgx::ops::vec {

// y = act(y), in place.
void activate(Act act, float* y, size_t n);
// dz = dy * act'(z) with y = act(z); z is read only for gelu (may be null otherwise).
void activation_backward(Act act, const float* z, const float* y, const float* dy, float* dz, size_t n);
// dx += dy * act'(x) with y = act(x); x is read only for gelu.
void activation_backward_add(Act act, const float* x, const float* y, const float* dy, float* dx, size_t n);
// y[i, :] += bias for each of m rows of n.
void add_bias(float* y, const float* bias, int64_t m, int64_t n);
// into[j] += sum over i of x[i, j] (m rows of n).
void add_column_sums(const float* x, int64_t m, int64_t n, float* into);
// y = softmax(x) over each contiguous row of n (m rows); rows may alias.
void softmax_rows(const float* x, float* y, int64_t m, int64_t n);
// dx += y * (dy - <dy, y>) over each contiguous row of n.
void softmax_rows_backward_add(const float* y, const float* dy, float* dx, int64_t m, int64_t n);
// into += x
void add(float* into, const float* x, size_t n);

}  // namespace pcgx::ops::vec
