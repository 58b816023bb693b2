#pragma once
// C[M,N] (+)= A[M,K] * B[K,N], row-major. Float goes through Eigen.
#include <cstdint>

#include "pcgx/pcg/modular.h"

namespace pcgx::ops {

void gemm(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n, bool accumulate);
void gemm(const ModP* a, const ModP* b, ModP* c, int64_t m, int64_t k, int64_t n, bool accumulate);
// C[M,N] += op(A) * op(B) where op(A) is M x K (A stored K x M when
// transposed) and op(B) is K x N (stored N x K when transposed): the
// products of backward passes.
void gemm_add(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t k, int64_t n);

}  // namespace pcgx::ops
