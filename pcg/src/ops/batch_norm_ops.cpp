// BatchNorm (training mode: batch statistics) and its parts BatchSum,
// BatchSquares and BatchNormApply, which make it data parallel exactly.
//
// BatchNorm(x, gamma, beta) normalizes each channel (dimension 1) over the
// batch and space. Its statistics span the samples, so as one operator it
// splits only by channels; with `group` > 0 it normalizes each group of
// `group` consecutive samples on its own (what PyTorch DDP computes with
// `group` samples per device), and then splits the batch in whole groups.
//
// Synchronized statistics, exactly: BatchNorm(x) = BatchNormApply(x, sum,
// squares) with sum = BatchSum(x), the sum of x per channel, and squares =
// BatchSquares(x, sum), the sum of (x - sum / n)^2 (n: the elements per
// channel of the whole x). Split along any other dimension both give
// partial sums (replica slots), whose Reduce then Replicate is an
// all-reduce of C numbers; BatchNormApply then runs on each shard with the
// statistics copied. Two passes, as BatchNorm takes them: the one-pass
// E[x^2] - E[x]^2 from float sums loses the variance of a channel whose
// mean is large (inception-v3-tiny trained 4% apart after one update).
// The gradients need no rule of their own: the statistics' gradients flow
// back through the same parallel operators (Replicate's dual sums them).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "pcgx/pcg/ops/numeric.h"
#include "op_families.h"
#include "pcgx/pcg/ops/op_helpers.h"
#include "scratch.h"

namespace pcgx::ops {
namespace {

constexpr int kCopy = ParallelKind::kCopy;
constexpr int kPartial = ParallelKind::kPartial;

// N, C, S (the product of the spatial sizes) of x[N, C, ...].
struct Layout {
  int64_t n, c, s;
  size_t at(int64_t i, int64_t ch, int64_t j) const { return static_cast<size_t>((i * c + ch) * s + j); }
};
Layout layout_of(const std::vector<int64_t>& shape) {
  const int64_t n = shape[0], c = shape[1];
  int64_t s = 1;
  for (size_t d = 2; d < shape.size(); ++d) s *= shape[d];
  return {n, c, s};
}

int64_t group_of(const Attributes& a, int64_t batch) {
  const int64_t g = a.get_int("group");
  return g > 0 ? g : batch;
}

template <class T>
void batch_norm_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  Tensor<T>& y = a.out[0];
  const Layout l = layout_of(x.shape);
  const int64_t group = group_of(a.attrs, l.n);
  const double eps = a.attrs.get_float("eps");
  const T inv_n = Num<T>::div(Num<T>::one(), Num<T>::from_int(group * l.s));
  for (int64_t g0 = 0; g0 < l.n; g0 += group)
    for (int64_t c = 0; c < l.c; ++c) {
      T mean = Num<T>::zero(), var = Num<T>::zero();
      if constexpr (std::is_same_v<T, float>) {
        // Sums of thousands of floats in double, as BatchSum and
        // BatchSquares take them: the two forms then agree to rounding.
        double m = 0, v = 0;
        for (int64_t n = g0; n < g0 + group; ++n)
          for (int64_t s = 0; s < l.s; ++s) m += x.data[l.at(n, c, s)];
        m /= static_cast<double>(group * l.s);
        for (int64_t n = g0; n < g0 + group; ++n)
          for (int64_t s = 0; s < l.s; ++s) v += (x.data[l.at(n, c, s)] - m) * (x.data[l.at(n, c, s)] - m);
        mean = static_cast<float>(m), var = static_cast<float>(v);
      } else {
        for (int64_t n = g0; n < g0 + group; ++n)
          for (int64_t s = 0; s < l.s; ++s) mean += x.data[l.at(n, c, s)];
        mean *= inv_n;
        for (int64_t n = g0; n < g0 + group; ++n)
          for (int64_t s = 0; s < l.s; ++s) {
            const T dv = x.data[l.at(n, c, s)] - mean;
            var += dv * dv;
          }
      }
      const T scale = Num<T>::rsqrt(var * inv_n, eps) * a.in[1]->data[static_cast<size_t>(c)];
      const T shift = a.in[2]->data[static_cast<size_t>(c)];
      for (int64_t n = g0; n < g0 + group; ++n)
        for (int64_t s = 0; s < l.s; ++s) y.data[l.at(n, c, s)] = (x.data[l.at(n, c, s)] - mean) * scale + shift;
    }
}

// The elements per channel the statistics of a shard of x are taken over:
// the whole tensor's (its logical shape, not the shard's).
int64_t statistics_count(const TaskContext& ctx) {
  const auto& dims = ctx.input_shapes[0].dims;  // no logical_shape(): kernels do not allocate
  int64_t n = dims[0].size;
  for (size_t d = 2; d < dims.size(); ++d) n *= dims[d].size;
  return n;
}

// out[c] = sum of x over batch and space.
template <class T>
void batch_sum_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  const Layout l = layout_of(x.shape);
  for (int64_t c = 0; c < l.c; ++c) {
    if constexpr (std::is_same_v<T, float>) {
      double sum = 0;
      for (int64_t n = 0; n < l.n; ++n)
        for (int64_t s = 0; s < l.s; ++s) sum += x.data[l.at(n, c, s)];
      a.out[0].data[static_cast<size_t>(c)] = static_cast<float>(sum);
    } else {
      T sum = Num<T>::zero();
      for (int64_t n = 0; n < l.n; ++n)
        for (int64_t s = 0; s < l.s; ++s) sum += x.data[l.at(n, c, s)];
      a.out[0].data[static_cast<size_t>(c)] = sum;
    }
  }
}

// out[c] = sum of (x - mean)^2, mean = sum[c] / n over the whole x.
template <class T>
void batch_squares_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  const Layout l = layout_of(x.shape);
  const T inv_n = Num<T>::div(Num<T>::one(), Num<T>::from_int(statistics_count(a.ctx)));
  for (int64_t c = 0; c < l.c; ++c) {
    const T mean = a.in[1]->data[static_cast<size_t>(c)] * inv_n;
    if constexpr (std::is_same_v<T, float>) {
      double acc = 0;
      for (int64_t n = 0; n < l.n; ++n)
        for (int64_t s = 0; s < l.s; ++s) {
          const double d = static_cast<double>(x.data[l.at(n, c, s)]) - static_cast<double>(mean);
          acc += d * d;
        }
      a.out[0].data[static_cast<size_t>(c)] = static_cast<float>(acc);
    } else {
      T acc = Num<T>::zero();
      for (int64_t n = 0; n < l.n; ++n)
        for (int64_t s = 0; s < l.s; ++s) {
          const T d = x.data[l.at(n, c, s)] - mean;
          acc += d * d;
        }
      a.out[0].data[static_cast<size_t>(c)] = acc;
    }
  }
}

template <class T>
void batch_norm_apply_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  const Tensor<T>& sum = *a.in[1];
  const Tensor<T>& squares = *a.in[2];
  Tensor<T>& y = a.out[0];
  const Layout l = layout_of(x.shape);
  const double eps = a.attrs.get_float("eps");
  const T inv_n = Num<T>::div(Num<T>::one(), Num<T>::from_int(statistics_count(a.ctx)));
  for (int64_t c = 0; c < l.c; ++c) {
    const T mean = sum.data[static_cast<size_t>(c)] * inv_n;
    T var = squares.data[static_cast<size_t>(c)] * inv_n;
    if constexpr (std::is_same_v<T, float>) var = std::max(var, 0.f);  // a sum of squares; negative only as input
    const T scale = Num<T>::rsqrt(var, eps) * a.in[3]->data[static_cast<size_t>(c)];
    const T shift = a.in[4]->data[static_cast<size_t>(c)];
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t s = 0; s < l.s; ++s) y.data[l.at(n, c, s)] = (x.data[l.at(n, c, s)] - mean) * scale + shift;
  }
}

// Normalization over `count` elements at x[base + j * step], j < count, with
// per-group scale gamma_g (1 when null): with xh = (x - mean) * rstd and
// g = dy * gamma, dx = rstd * (g - mean(g) - xh * mean(g * xh)); adds
// sum(dy * xh) and sum(dy) to dgamma and dbeta when given.
void normalize_grad(const float* x, const float* dy, float* dx, int64_t count, int64_t step, double eps, float gamma,
                    float* dgamma, float* dbeta) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < count; ++j) mean += x[j * step];
  mean /= static_cast<double>(count);
  for (int64_t j = 0; j < count; ++j) var += (x[j * step] - mean) * (x[j * step] - mean);
  const double rstd = 1.0 / std::sqrt(var / static_cast<double>(count) + eps);
  double sum_g = 0, sum_gx = 0, sum_dy = 0, sum_dyx = 0;
  for (int64_t j = 0; j < count; ++j) {
    const double xh = (x[j * step] - mean) * rstd, d = dy[j * step];
    sum_g += d * gamma, sum_gx += d * gamma * xh, sum_dy += d, sum_dyx += d * xh;
  }
  const double n = static_cast<double>(count);
  for (int64_t j = 0; j < count; ++j) {
    const double xh = (x[j * step] - mean) * rstd;
    dx[j * step] += static_cast<float>(rstd * (dy[j * step] * gamma - sum_g / n - xh * sum_gx / n));
  }
  if (dgamma) *dgamma += static_cast<float>(sum_dyx);
  if (dbeta) *dbeta += static_cast<float>(sum_dy);
}

void batch_norm_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const Layout l = layout_of(x.shape);
  const int64_t group = group_of(a.attrs, l.n);
  const double eps = a.attrs.get_float("eps");
  // Gather each channel of a group contiguously so normalize_grad sees one run.
  const auto count = static_cast<size_t>(group * l.s);
  float* xc = scratch_floats(ScratchSlot::kA, count);
  float* dyc = scratch_floats(ScratchSlot::kB, count);
  float* dxc = scratch_floats(ScratchSlot::kC, count);
  for (int64_t g0 = 0; g0 < l.n; g0 += group)
    for (int64_t c = 0; c < l.c; ++c) {
      for (int64_t n = 0; n < group; ++n)
        for (int64_t s = 0; s < l.s; ++s) {
          const size_t i = l.at(g0 + n, c, s), j = static_cast<size_t>(n * l.s + s);
          xc[j] = x.data[i], dyc[j] = a.out_grad[0]->data[i], dxc[j] = 0.f;
        }
      normalize_grad(xc, dyc, dxc, group * l.s, 1, eps, a.in[1]->data[static_cast<size_t>(c)],
                     &a.in_grad[1].data[static_cast<size_t>(c)], &a.in_grad[2].data[static_cast<size_t>(c)]);
      for (int64_t n = 0; n < group; ++n)
        for (int64_t s = 0; s < l.s; ++s) a.in_grad[0].data[l.at(g0 + n, c, s)] += dxc[static_cast<size_t>(n * l.s + s)];
    }
}

// d sum / dx = 1.
void batch_sum_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const auto& ds = a.out_grad[0]->data;
  const Layout l = layout_of(x.shape);
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t c = 0; c < l.c; ++c)
      for (int64_t s = 0; s < l.s; ++s) a.in_grad[0].data[l.at(n, c, s)] += ds[static_cast<size_t>(c)];
}

// q = sum (x - s/n)^2: dq/dx = 2 (x - mu); dq/ds = -2 sum (x - mu) / n over
// this shard (zero over the whole x, not over a part of it).
void batch_squares_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const auto& dq = a.out_grad[0]->data;
  const Layout l = layout_of(x.shape);
  const double n_all = static_cast<double>(statistics_count(a.ctx));
  for (int64_t c = 0; c < l.c; ++c) {
    const double mean = a.in[1]->data[static_cast<size_t>(c)] / n_all, g = dq[static_cast<size_t>(c)];
    double centred = 0;
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t s = 0; s < l.s; ++s) {
        const size_t i = l.at(n, c, s);
        const double d = x.data[i] - mean;
        a.in_grad[0].data[i] += static_cast<float>(2 * g * d);
        centred += d;
      }
    a.in_grad[1].data[static_cast<size_t>(c)] += static_cast<float>(-2 * g * centred / n_all);
  }
}

// y = (x - mu) rstd gamma + beta with mu = sum / n, var = squares / n,
// rstd = (var + eps)^-1/2. Holding the statistics fixed, dx = dy gamma
// rstd; through them, dsum = -sum dy gamma rstd / n and dsquares =
// -sum dy gamma (x - mu) rstd^3 / (2n), over this shard (the copies'
// gradients are summed by the parallel operators that copied them).
void batch_norm_apply_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const auto& sum = a.in[1]->data;
  const auto& squares = a.in[2]->data;
  const auto& dy = a.out_grad[0]->data;
  const Layout l = layout_of(x.shape);
  const double eps = a.attrs.get_float("eps");
  const double n_all = static_cast<double>(statistics_count(a.ctx));
  for (int64_t c = 0; c < l.c; ++c) {
    const double mean = sum[static_cast<size_t>(c)] / n_all, var = std::max(squares[static_cast<size_t>(c)] / n_all, 0.0);
    const double rstd = 1.0 / std::sqrt(var + eps), gamma = a.in[3]->data[static_cast<size_t>(c)];
    double sum_dy = 0, sum_dyx = 0;  // x centred
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t s = 0; s < l.s; ++s) {
        const size_t i = l.at(n, c, s);
        const double d = dy[i], xc = x.data[i] - mean;
        a.in_grad[0].data[i] += static_cast<float>(d * gamma * rstd);
        sum_dy += d, sum_dyx += d * xc;
      }
    a.in_grad[1].data[static_cast<size_t>(c)] += static_cast<float>(-gamma * rstd * sum_dy / n_all);
    a.in_grad[2].data[static_cast<size_t>(c)] += static_cast<float>(-gamma * rstd * rstd * rstd * sum_dyx / (2 * n_all));
    a.in_grad[3].data[static_cast<size_t>(c)] += static_cast<float>(rstd * sum_dyx);
    a.in_grad[4].data[static_cast<size_t>(c)] += static_cast<float>(sum_dy);
  }
}

double per_element(std::span<const TensorType> in, double f) { return f * static_cast<double>(product(in[0].shape)); }

void require_channels(const TensorType& t, int64_t channels, const std::string& what) {
  PCGX_REQUIRE(t.shape == std::vector<int64_t>{channels}, what + " must have shape [" + std::to_string(channels) + "], got " + shape_str(t.shape));
}

}  // namespace

void register_batch_norm_ops(OpRegistry& r) {
  OpDef bn;
  bn.name = "BatchNorm";
  bn.summary = "normalizes each channel (dimension 1) over batch and space (per group of `group` samples when > 0), then * gamma + beta";
  bn.attrs = {value_attr(float_attr("eps", 1e-5, "added to the variance")),
              int_attr("group", 0, "samples per statistics group (0: the whole batch)",
                       [](const AttrValue& v) -> std::optional<std::string> {
                         if (std::get<int64_t>(v) < 0) return "must not be negative";
                         return std::nullopt;
                       })};
  bn.input_names = {"x", "gamma", "beta"};
  bn.min_inputs = bn.max_inputs = 3;
  bn.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    require_min_rank(in[0], 2, "BatchNorm input x");
    require_float(in[0], "BatchNorm input x");
    require_channels(in[1], in[0].shape[1], "gamma");
    require_channels(in[2], in[0].shape[1], "beta");
    const int64_t g = a.get_int("group");
    PCGX_REQUIRE(g == 0 || in[0].shape[0] % g == 0, "group " + std::to_string(g) + " does not divide the batch of " +
                                                         std::to_string(in[0].shape[0]));
    return std::vector<TensorType>{in[0]};
  };
  bn.kinds = [](const Attributes& a, std::span<const TensorType> in) {
    std::vector<ParallelKind> kinds{{"channel", {1, 0, 0}, {1}, 0}};
    if (const int64_t g = a.get_int("group"); g > 0) kinds.push_back({"batch", {0, kCopy, kCopy}, {0}, in[0].shape[0] / g});
    return kinds;
  };
  PCGX_KERNELS(bn, batch_norm_k);
  bn.grad_f32 = &batch_norm_grad;
  bn.backward_reads = reads(0b011, 0);  // x and gamma, not beta
  bn.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return per_element(in, 8); };
  bn.smt = {{"batch_norm", 3, {"eps", "group"}}};
  r.add(bn);

  OpDef sum;
  sum.name = "BatchSum";
  sum.summary = "per channel (dimension 1): the sum of x over batch and space, shape [C]";
  sum.input_names = {"x"};
  sum.min_inputs = sum.max_inputs = 1;
  sum.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    require_min_rank(in[0], 2, "BatchSum input x");
    require_float(in[0], "BatchSum input x");
    return std::vector<TensorType>{{{in[0].shape[1]}, DataType::kFloat32}};
  };
  sum.kinds = [](const Attributes&, std::span<const TensorType> in) {
    std::vector<ParallelKind> kinds{{"channel", {1}, {0}, 0}};
    for (int d = 0; d < static_cast<int>(in[0].shape.size()); ++d)
      if (d != 1) kinds.push_back({d == 0 ? "batch" : "dim" + std::to_string(d), {d}, {kPartial}, 0});
    return kinds;
  };
  PCGX_KERNELS(sum, batch_sum_k);
  sum.grad_f32 = &batch_sum_grad;
  sum.backward_reads = reads(0, 0);  // a sum's gradient is its output's, spread
  sum.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return per_element(in, 1); };
  sum.smt = {{"batch_sum", 1}};
  r.add(sum);

  OpDef squares;
  squares.name = "BatchSquares";
  squares.summary = "per channel (dimension 1): the sum of (x - sum / n)^2 over batch and space, n the elements per channel of x";
  squares.input_names = {"x", "sum"};
  squares.min_inputs = squares.max_inputs = 2;
  squares.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    require_min_rank(in[0], 2, "BatchSquares input x");
    require_float(in[0], "BatchSquares input x");
    require_channels(in[1], in[0].shape[1], "sum");
    return std::vector<TensorType>{{{in[0].shape[1]}, DataType::kFloat32}};
  };
  squares.kinds = [](const Attributes&, std::span<const TensorType> in) {
    std::vector<ParallelKind> kinds{{"channel", {1, 0}, {0}, 0}};
    for (int d = 0; d < static_cast<int>(in[0].shape.size()); ++d)
      if (d != 1) kinds.push_back({d == 0 ? "batch" : "dim" + std::to_string(d), {d, kCopy}, {kPartial}, 0});
    return kinds;
  };
  PCGX_KERNELS(squares, batch_squares_k);
  squares.grad_f32 = &batch_squares_grad;
  squares.backward_reads = reads(0b11, 0);
  squares.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return per_element(in, 3); };
  squares.smt = {{"batch_squares", 2}};
  r.add(squares);

  OpDef apply;
  apply.name = "BatchNormApply";
  apply.summary = "BatchNorm from given statistics of the whole x (BatchSum, BatchSquares): (x - sum/n) / sqrt(squares/n + eps) * gamma + beta";
  apply.attrs = {value_attr(float_attr("eps", 1e-5, "added to the variance"))};
  apply.input_names = {"x", "sum", "squares", "gamma", "beta"};
  apply.min_inputs = apply.max_inputs = 5;
  apply.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    require_min_rank(in[0], 2, "BatchNormApply input x");
    require_float(in[0], "BatchNormApply input x");
    const int64_t c = in[0].shape[1];
    require_channels(in[1], c, "sum");
    require_channels(in[2], c, "squares");
    require_channels(in[3], c, "gamma");
    require_channels(in[4], c, "beta");
    return std::vector<TensorType>{in[0]};
  };
  apply.kinds = [](const Attributes&, std::span<const TensorType> in) {
    std::vector<ParallelKind> kinds{{"channel", {1, 0, 0, 0, 0}, {1}, 0}};
    for (int d = 0; d < static_cast<int>(in[0].shape.size()); ++d)
      if (d != 1) kinds.push_back({d == 0 ? "batch" : "dim" + std::to_string(d), {d, kCopy, kCopy, kCopy, kCopy}, {d}, 0});
    return kinds;
  };
  PCGX_KERNELS(apply, batch_norm_apply_k);
  apply.grad_f32 = &batch_norm_apply_grad;
  apply.backward_reads = reads(0b01111, 0);  // not beta
  apply.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return per_element(in, 4); };
  apply.smt = {{"batch_norm_apply", 5, {"eps"}}};
  r.add(apply);
}

}  // namespace pcgx::ops
