#include "gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <new>

#include "pcgx/pcg/kernel_threads.h"
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

// A product is cut into tiles of C by its shape alone, each computed by
// one serial Eigen product (packing its own panels), so that the kernel
// threads can share the tiles while every element is summed the same way
// whatever the thread count. A tile repacks its A and B panels, costing
// (1/rows + 1/cols) copies per multiply-add (smaller tiles measured 8-15%
// slower on one thread for 512 x 512 x 128 products); tile widths are whole multiples
// of 48 columns, the widest register panel of Eigen's kernels (AVX-512
// float), so no tile adds a narrow remainder panel. Below kTileWork a
// product is not cut.
constexpr Index kTileWork = Index{1} << 22;  // multiply-adds, ~60 us on one core
constexpr Index kMinTileRows = 64, kMinTileCols = 96, kPanel = 48;

Index half_rounded_up(Index x, Index multiple) { return ((x + 1) / 2 + multiple - 1) / multiple * multiple; }

struct Tiling {
  Index rows, cols;  // tile size; the last row and column of tiles may be smaller
};

Tiling tiling(Index m, Index n, Index k) {
  Tiling t{m, n};
  while (t.rows * t.cols * k > kTileWork) {
    const bool cut_cols = t.cols >= 2 * kMinTileCols, cut_rows = t.rows >= 2 * kMinTileRows;
    if (cut_cols && (t.cols >= t.rows || !cut_rows)) t.cols = half_rounded_up(t.cols, kPanel);
    else if (cut_rows) t.rows = half_rounded_up(t.rows, 8);
    else break;
  }
  return t;
}

// C (row-major, ldc) += A * B with A and B row- or column-major.
template <int AOrder, int BOrder>
void product(const float* a, Index lda, const float* b, Index ldb, float* c, Index ldc, Index m, Index k, Index n) {
  if (m == 0 || n == 0 || k == 0) return;
  const Tiling t = tiling(m, n, k);
  const Index tile_rows = (m + t.rows - 1) / t.rows, tile_cols = (n + t.cols - 1) / t.cols;
  parallel_pieces(tile_rows * tile_cols, [&](int64_t piece) {
    const Index i0 = piece / tile_cols * t.rows, j0 = piece % tile_cols * t.cols;
    const Index tm = std::min(t.rows, m - i0), tn = std::min(t.cols, n - j0);
    const float* ta = AOrder == Eigen::RowMajor ? a + i0 * lda : a + i0;
    const float* tb = BOrder == Eigen::RowMajor ? b + j0 : b + j0 * ldb;
    // Eigen expresses a row-major result as the transposed column-major
    // product, so the blocking is for (n x k) * (k x m).
    Blocking blocking(tn, tm, k);
    Eigen::internal::general_matrix_matrix_product<Index, float, AOrder, false, float, BOrder, false, Eigen::RowMajor, 1>::run(
        tm, tn, k, ta, lda, tb, ldb, c + i0 * ldc + j0, 1, ldc, 1.f, blocking, nullptr);
  });
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
