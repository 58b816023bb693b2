#pragma once
// C[M,N] (+)= A[M,K] * B[K,N], row-major. Float goes through Eigen.
#include <cstdint>

#include "pcgx/pcg/modular.h"

namespace pcgx::ops {

void gemm(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n, bool accumulate);
void gemm(const ModP* a, const ModP* b, ModP* c, int64_t m, int64_t k, int64_t n, bool accumulate);

}  // namespace pcgx::ops
