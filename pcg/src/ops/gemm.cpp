#include "gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <new>

#include "scratch.h"

// Eigen's own `C.noalias() += A * B` allocates its packing buffers on every
// call (heap above 128 KiB); in a training step that is one malloc/free pair
// per product, and glibc returning the freed top of the heap to the kernel
// made every step page-fault those buffers in again (30% of an MLP step).
// Here the same blocked algorithm (Eigen's GEBP kernels, selected for the
// build machine's vector units) runs with its packing buffers in a
// per-thread workspace that only grows: after the first step of a given
// size no product allocates. This uses Eigen's internal product entry
// point, which has kept this signature since Eigen 3.3.
static_assert(EIGEN_VERSION_AT_LEAST(3, 3, 0), "pcgx's GEMM needs Eigen 3.3 or newer");

namespace pcgx::ops {
namespace {

using Eigen::Index;

// Packing buffers sized by Eigen's cache-aware blocking for one product,
// placed in the calling thread's workspace.
class Blocking : public Eigen::internal::level3_blocking<float, float> {
 public:
  Blocking(Index m, Index n, Index k) {
    m_kc = k, m_mc = m, m_nc = n;
    Eigen::internal::computeProductBlockingSizes<float, float, 1, Index>(m_kc, m_mc, m_nc, Index{1});
    // Eigen's kernels read up to one SIMD packet past a packed panel.
    const size_t pad = 64;
    const size_t a = static_cast<size_t>(m_mc * m_kc) + pad, b = static_cast<size_t>(m_kc * m_nc) + pad;
    float* base = scratch_floats(ScratchSlot::kGemm, a + b);
    m_blockA = base;
    m_blockB = base + a;
  }
};

// C (row-major, ldc) += A * B with A and B row- or column-major.
template <int AOrder, int BOrder>
void product(const float* a, Index lda, const float* b, Index ldb, float* c, Index ldc, Index m, Index k, Index n) {
  if (m == 0 || n == 0 || k == 0) return;
  // Eigen expresses a row-major result as the transposed column-major
  // product, so the blocking is for (n x k) * (k x m).
  Blocking blocking(n, m, k);
  Eigen::internal::general_matrix_matrix_product<Index, float, AOrder, false, float, BOrder, false, Eigen::RowMajor, 1>::run(
      m, n, k, a, lda, b, ldb, c, 1, ldc, 1.f, blocking, nullptr);
}

}  // namespace

void gemm(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n, bool accumulate) {
  if (!accumulate) std::memset(c, 0, static_cast<size_t>(m * n) * sizeof(float));
  product<Eigen::RowMajor, Eigen::RowMajor>(a, k, b, n, c, n, m, k, n);
}

void gemm_add(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t k, int64_t n) {
  // A transposed row-major matrix is the same memory read column-major.
  if (!trans_a && !trans_b) product<Eigen::RowMajor, Eigen::RowMajor>(a, k, b, n, c, n, m, k, n);
  if (trans_a && !trans_b) product<Eigen::ColMajor, Eigen::RowMajor>(a, m, b, n, c, n, m, k, n);
  if (!trans_a && trans_b) product<Eigen::RowMajor, Eigen::ColMajor>(a, k, b, k, c, n, m, k, n);
  if (trans_a && trans_b) product<Eigen::ColMajor, Eigen::ColMajor>(a, m, b, k, c, n, m, k, n);
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
