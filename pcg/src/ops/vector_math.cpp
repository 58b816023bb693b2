#include "vector_math.h"

#include "pcgx/pcg/kernel_threads.h"

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <unsupported/Eigen/SpecialFunctions>

namespace pcgx::ops::vec {
namespace {

using Arr = Eigen::Map<Eigen::ArrayXf>;
using CArr = Eigen::Map<const Eigen::ArrayXf>;
using Staged = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64>;
using CRowsArr = Eigen::Map<const Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// Eigen peels unaligned leading elements off a vectorized loop and computes
// them with scalar libm functions, whose results differ from the SIMD
// approximations in the last bits: the same values at two addresses would
// give different exp/erf/sums, and the runtime's shards (one buffer) and
// the reference interpreter's (another) would drift apart. Staging every
// block through 64-byte aligned buffers padded to whole packets sends each
// element down the same SIMD path and fixes the order of every sum, so
// results depend on the values alone.
constexpr size_t kBlock = 512;  // a multiple of every SIMD width
constexpr size_t kPacket = 16;

size_t padded(size_t len) { return (len + kPacket - 1) / kPacket * kPacket; }

// out[i] = f(in_0[i], ..., in_{N-1}[i]) block by block; f gets aligned maps
// of the staged inputs (padding filled with `pad`) and of the result.
template <size_t N, class F>
void staged(std::array<const float*, N> in, float* out, size_t n, float pad, F f) {
  alignas(64) float buf[N + 1][kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t len = std::min(kBlock, n - i), p = padded(len);
    std::array<Staged, N> maps = [&]<size_t... k>(std::index_sequence<k...>) {
      return std::array<Staged, N>{Staged(buf[k], static_cast<Eigen::Index>(p))...};
    }(std::make_index_sequence<N>());
    for (size_t k = 0; k < N; ++k) {
      std::copy_n(in[k] + i, len, buf[k]);
      std::fill(buf[k] + len, buf[k] + p, pad);
    }
    Staged res(buf[N], static_cast<Eigen::Index>(p));
    std::apply([&](auto&... m) { f(res, m...); }, maps);
    std::copy_n(buf[N], len, out + i);
  }
}

// sum of x[i] * y[i] in a fixed order.
float staged_dot(const float* x, const float* y, size_t n) {
  alignas(64) float bx[kBlock], by[kBlock];
  float total = 0.f;
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t len = std::min(kBlock, n - i), p = padded(len);
    std::copy_n(x + i, len, bx), std::fill(bx + len, bx + p, 0.f);
    std::copy_n(y + i, len, by), std::fill(by + len, by + p, 0.f);
    total += (Staged(bx, static_cast<Eigen::Index>(p)) * Staged(by, static_cast<Eigen::Index>(p))).sum();
  }
  return total;
}

float staged_sum(const float* x, size_t n) {
  alignas(64) float bx[kBlock];
  float total = 0.f;
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t len = std::min(kBlock, n - i), p = padded(len);
    std::copy_n(x + i, len, bx), std::fill(bx + len, bx + p, 0.f);
    total += Staged(bx, static_cast<Eigen::Index>(p)).sum();
  }
  return total;
}

// Kernel threads share a loop in pieces of whole staging blocks (or whole
// rows), fixed by the sizes alone, so a piece boundary never changes how an
// element is computed.
constexpr size_t kPiece = 32 * kBlock;

// f(begin, count) over [0, n) in pieces.
template <class F>
void over_elements(size_t n, F f) {
  const auto pieces = static_cast<int64_t>((n + kPiece - 1) / kPiece);
  parallel_pieces(pieces, [&](int64_t p) {
    const size_t begin = static_cast<size_t>(p) * kPiece;
    f(begin, std::min(kPiece, n - begin));
  });
}

// f(first row, rows) over m rows of n in pieces of about kPiece elements.
template <class F>
void over_rows(int64_t m, int64_t n, F f) {
  const int64_t per = std::max<int64_t>(1, static_cast<int64_t>(kPiece) / std::max<int64_t>(n, 1));
  parallel_pieces((m + per - 1) / per, [&](int64_t p) { f(p * per, std::min(per, m - p * per)); });
}

}  // namespace

void add(float* into, const float* x, size_t n) {
  Arr(into, static_cast<Eigen::Index>(n)) += CArr(x, static_cast<Eigen::Index>(n));
}

namespace {

void serial_activate(Act act, float* y, size_t n) {
  switch (act) {
    case Act::kNone: return;
    case Act::kRelu: Arr(y, static_cast<Eigen::Index>(n)) = Arr(y, static_cast<Eigen::Index>(n)).max(0.f); return;
    case Act::kGelu:
      return staged<1>({y}, y, n, 0.f, [](Staged& r, Staged& v) { r = 0.5f * v * (1.f + (v * kInvSqrt2).erf()); });
    case Act::kSigmoid:
      return staged<1>({y}, y, n, 0.f, [](Staged& r, Staged& v) { r = 1.f / (1.f + (-v).exp()); });
    case Act::kTanh: return staged<1>({y}, y, n, 0.f, [](Staged& r, Staged& v) { r = v.tanh(); });
  }
}

void serial_activation_backward(Act act, const float* z, const float* y, const float* dy, float* dz, size_t n) {
  // Each derivative reads z or y, never both (numeric.h's
  // derivative_needs_input): the other may be a freed buffer.
  const auto len = static_cast<Eigen::Index>(n);
  CArr DY(dy, len);
  Arr DZ(dz, len);
  switch (act) {
    case Act::kNone: DZ = DY; return;
    case Act::kRelu: DZ = (CArr(y, len) > 0.f).select(DY, 0.f); return;
    case Act::kSigmoid: DZ = DY * CArr(y, len) * (1.f - CArr(y, len)); return;
    case Act::kTanh: DZ = DY * (1.f - CArr(y, len).square()); return;
    case Act::kGelu: break;
  }
  // gelu(z) = z Phi(z): d/dz = Phi(z) + z phi(z)
  staged<2>({z, dy}, dz, n, 0.f, [](Staged& r, Staged& Z, Staged& D) {
    r = D * (0.5f * (1.f + (Z * kInvSqrt2).erf()) + Z * kInvSqrt2Pi * (-0.5f * Z * Z).exp());
  });
}

void serial_activation_backward_add(Act act, const float* x, const float* y, const float* dy, float* dx, size_t n) {
  alignas(64) float buf[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t len = std::min(kBlock, n - i);
    serial_activation_backward(act, x ? x + i : nullptr, y ? y + i : nullptr, dy + i, buf, len);
    add(dx + i, buf, len);
  }
}

void serial_add_bias(float* y, const float* bias, int64_t m, int64_t n) {
  for (int64_t i = 0; i < m; ++i) add(y + i * n, bias, static_cast<size_t>(n));
}

void serial_softmax_rows(const float* x, float* y, int64_t m, int64_t n) {
  const auto len = static_cast<size_t>(n);
  for (int64_t r = 0; r < m; ++r) {
    const float* in = x + r * n;
    float* out = y + r * n;
    const float shift = *std::max_element(in, in + n);
    staged<1>({in}, out, len, shift, [shift](Staged& res, Staged& v) { res = (v - shift).exp(); });
    const float inv = 1.f / staged_sum(out, len);
    Arr(out, n) *= inv;
  }
}

void serial_softmax_rows_backward_add(const float* y, const float* dy, float* dx, int64_t m, int64_t n) {
  for (int64_t r = 0; r < m; ++r) {
    const float dot = staged_dot(y + r * n, dy + r * n, static_cast<size_t>(n));
    Arr(dx + r * n, n) += CArr(y + r * n, n) * (CArr(dy + r * n, n) - dot);
  }
}


}  // namespace

void activate(Act act, float* y, size_t n) {
  over_elements(n, [&](size_t b, size_t len) { serial_activate(act, y + b, len); });
}

void activation_backward(Act act, const float* z, const float* y, const float* dy, float* dz, size_t n) {
  over_elements(n, [&](size_t b, size_t len) {
    serial_activation_backward(act, z ? z + b : nullptr, y ? y + b : nullptr, dy + b, dz + b, len);
  });
}

void activation_backward_add(Act act, const float* x, const float* y, const float* dy, float* dx, size_t n) {
  over_elements(n, [&](size_t b, size_t len) {
    serial_activation_backward_add(act, x ? x + b : nullptr, y ? y + b : nullptr, dy + b, dx + b, len);
  });
}

void add_bias(float* y, const float* bias, int64_t m, int64_t n) {
  over_rows(m, n, [&](int64_t r, int64_t rows) { serial_add_bias(y + r * n, bias, rows, n); });
}

void add_column_sums(const float* x, int64_t m, int64_t n, float* into) {
  // Pieces of columns: each column is still summed over all rows in order.
  const int64_t per = std::max<int64_t>(256, static_cast<int64_t>(kPiece) / std::max<int64_t>(m, 1)) / 16 * 16;
  parallel_pieces((n + per - 1) / per, [&](int64_t p) {
    const int64_t j = p * per, w = std::min(per, n - j);
    for (int64_t i = 0; i < m; ++i) add(into + j, x + i * n + j, static_cast<size_t>(w));
  });
}

void softmax_rows(const float* x, float* y, int64_t m, int64_t n) {
  over_rows(m, n, [&](int64_t r, int64_t rows) { serial_softmax_rows(x + r * n, y + r * n, rows, n); });
}

void softmax_rows_backward_add(const float* y, const float* dy, float* dx, int64_t m, int64_t n) {
  over_rows(m, n, [&](int64_t r, int64_t rows) { serial_softmax_rows_backward_add(y + r * n, dy + r * n, dx + r * n, rows, n); });
}

}  // namespace pcgx::ops::vec
