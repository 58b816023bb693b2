#include "gemm.h"

#include <Eigen/Core>

namespace pcgx::ops {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void gemm(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n, bool accumulate) {
  Eigen::Map<const RowMajor> A(a, m, k);
  Eigen::Map<const RowMajor> B(b, k, n);
  Eigen::Map<RowMajor> C(c, m, n);
  if (accumulate) {
    C.noalias() += A * B;
  } else {
    C.noalias() = A * B;
  }
}

void gemm_add(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t k, int64_t n) {
  Eigen::Map<RowMajor> C(c, m, n);
  // A transposed row-major matrix is the same memory read column-major.
  using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  if (!trans_a && !trans_b) C.noalias() += Eigen::Map<const RowMajor>(a, m, k) * Eigen::Map<const RowMajor>(b, k, n);
  if (trans_a && !trans_b) C.noalias() += Eigen::Map<const ColMajor>(a, m, k) * Eigen::Map<const RowMajor>(b, k, n);
  if (!trans_a && trans_b) C.noalias() += Eigen::Map<const RowMajor>(a, m, k) * Eigen::Map<const ColMajor>(b, k, n);
  if (trans_a && trans_b) C.noalias() += Eigen::Map<const ColMajor>(a, m, k) * Eigen::Map<const ColMajor>(b, k, n);
}

void gemm(const ModP* a, const ModP* b, ModP* c, int64_t m, int64_t k, int64_t n, bool accumulate) {
  if (!accumulate) std::fill(c, c + m * n, ModP());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const ModP x = a[i * k + p];
      if (x == ModP()) continue;
      const ModP* brow = b + p * n;
      ModP* crow = c + i * n;
      for (int64_t j = 0; j < n; ++j) crow[j] += x * brow[j];
    }
}

}  // namespace pcgx::ops
