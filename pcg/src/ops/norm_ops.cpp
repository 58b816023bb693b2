// Softmax (optionally causal), LayerNorm and RMSNorm. Normalized dimensions cannot
// be split: statistics over a shard would differ from statistics over the
// tensor. BatchNorm is in batch_norm_ops.cpp.
#include "pcgx/pcg/ops/numeric.h"
#include "op_families.h"
#include "pcgx/pcg/ops/op_helpers.h"
#include "scratch.h"
#include "vector_math.h"

namespace pcgx::ops {
namespace {

constexpr int kCopy = ParallelKind::kCopy;

int softmax_axis(const Attributes& a, size_t rank) {
  const int64_t ax = a.get_int("axis");
  return static_cast<int>(ax < 0 ? ax + static_cast<int64_t>(rank) : ax);
}

template <class T>
void softmax_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  Tensor<T>& y = a.out[0];
  const size_t rank = x.shape.size();
  const int axis = softmax_axis(a.attrs, rank);
  const bool causal = a.attrs.get_bool("causal");
  const int64_t len = x.shape[static_cast<size_t>(axis)];
  const int64_t inner = product(std::span(x.shape).subspan(static_cast<size_t>(axis) + 1));
  const int64_t outer = x.numel() / (len * inner);
  if constexpr (std::is_same_v<T, float>) {
    if (!causal && inner == 1) return vec::softmax_rows(x.data.data(), y.data.data(), outer, len);
  }
  const int64_t rows_q = causal ? x.shape[rank - 2] : 1;
  const int64_t q_offset = causal ? a.ctx.output_offsets[0][rank - 2] : 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T* in = x.data.data() + o * len * inner + i;
      T* out = y.data.data() + o * len * inner + i;
      // With a causal mask, key j is visible to query q iff j <= q.
      const int64_t visible = causal ? q_offset + (o % rows_q) + 1 : len;
      T shift = Num<T>::zero();
      if constexpr (std::is_same_v<T, float>) {
        shift = -INFINITY;
        for (int64_t j = 0; j < std::min(len, visible); ++j) shift = std::max(shift, in[j * inner]);
      }
      T sum = Num<T>::zero();
      for (int64_t j = 0; j < len; ++j) {
        const T e = j < visible ? Num<T>::exp(in[j * inner] - shift) : Num<T>::zero();
        out[j * inner] = e;
        sum += e;
      }
      const T inv = Num<T>::div(Num<T>::one(), sum);
      for (int64_t j = 0; j < len; ++j) out[j * inner] *= inv;
    }
}

template <class T>
void layer_norm_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  Tensor<T>& y = a.out[0];
  const int64_t d = x.shape.back(), rows = x.numel() / d;
  const bool affine = a.attrs.get_bool("affine");
  const double eps = a.attrs.get_float("eps");
  const T inv_d = Num<T>::div(Num<T>::one(), Num<T>::from_int(d));
  for (int64_t r = 0; r < rows; ++r) {
    const T* in = x.data.data() + r * d;
    T* out = y.data.data() + r * d;
    T mean = Num<T>::zero(), var = Num<T>::zero();
    for (int64_t j = 0; j < d; ++j) mean += in[j];
    mean *= inv_d;
    for (int64_t j = 0; j < d; ++j) var += (in[j] - mean) * (in[j] - mean);
    const T scale = Num<T>::rsqrt(var * inv_d, eps);
    for (int64_t j = 0; j < d; ++j) {
      T v = (in[j] - mean) * scale;
      if (affine) v = v * a.in[1]->data[static_cast<size_t>(j)] + a.in[2]->data[static_cast<size_t>(j)];
      out[j] = v;
    }
  }
}

// RMSNorm (Zhang & Sennrich 2019; LLaMA's norm): y = x * rsqrt(mean(x^2) + eps) * gamma
// over the last dimension, no centring and no bias.
template <class T>
void rms_norm_k(const KernelArgs<T>& a) {
  const Tensor<T>& x = *a.in[0];
  const T* gamma = a.in[1]->data.data();
  Tensor<T>& y = a.out[0];
  const int64_t d = x.shape.back(), rows = x.numel() / d;
  const double eps = a.attrs.get_float("eps");
  const T inv_d = Num<T>::div(Num<T>::one(), Num<T>::from_int(d));
  for (int64_t r = 0; r < rows; ++r) {
    const T* in = x.data.data() + r * d;
    T* out = y.data.data() + r * d;
    T ms = Num<T>::zero();
    for (int64_t j = 0; j < d; ++j) ms += in[j] * in[j];
    const T scale = Num<T>::rsqrt(ms * inv_d, eps);
    for (int64_t j = 0; j < d; ++j) out[j] = in[j] * scale * gamma[j];
  }
}

// Gradients.
// Softmax: dx_j = y_j (dy_j - sum_k dy_k y_k) along the axis (masked keys
// have y = 0 and get none).
void softmax_grad(const GradArgs& a) {
  const Tensor<float>& y = *a.out[0];
  const auto& dy = a.out_grad[0]->data;
  auto& dx = a.in_grad[0].data;
  const int axis = softmax_axis(a.attrs, y.shape.size());
  const int64_t len = y.shape[static_cast<size_t>(axis)];
  const int64_t inner = product(std::span(y.shape).subspan(static_cast<size_t>(axis) + 1));
  const int64_t outer = y.numel() / (len * inner);
  if (inner == 1) return vec::softmax_rows_backward_add(y.data.data(), dy.data(), dx.data(), outer, len);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * len * inner + i;
      float dot = 0.f;
      for (int64_t j = 0; j < len; ++j) dot += dy[static_cast<size_t>(base + j * inner)] * y.data[static_cast<size_t>(base + j * inner)];
      for (int64_t j = 0; j < len; ++j) {
        const auto e = static_cast<size_t>(base + j * inner);
        dx[e] += y.data[e] * (dy[e] - dot);
      }
    }
}

// LayerNorm: per row, with xh = (x - mean) * rstd and g = dy * gamma,
// dx = rstd * (g - mean(g) - xh * mean(g * xh)), dgamma += dy * xh,
// dbeta += dy (normalize_grad's formula, one pass per quantity: this is a
// tenth of a transformer block's backward).
void layer_norm_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const int64_t d = x.shape.back(), rows = x.numel() / d;
  const bool affine = a.attrs.get_bool("affine");
  const double eps = a.attrs.get_float("eps");
  const double n = static_cast<double>(d);
  float* xh = scratch_floats(ScratchSlot::kA, static_cast<size_t>(d));
  float* g = scratch_floats(ScratchSlot::kB, static_cast<size_t>(d));
  const float* gamma = affine ? a.in[1]->data.data() : nullptr;
  float* dgamma = affine ? a.in_grad[1].data.data() : nullptr;
  float* dbeta = affine ? a.in_grad[2].data.data() : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data.data() + r * d;
    const float* dyr = a.out_grad[0]->data.data() + r * d;
    float* dxr = a.in_grad[0].data.data() + r * d;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += xr[j];
    mean /= n;
    for (int64_t j = 0; j < d; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    const double rstd = 1.0 / std::sqrt(var / n + eps);
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < d; ++j) {
      xh[j] = static_cast<float>((xr[j] - mean) * rstd);
      g[j] = affine ? dyr[j] * gamma[j] : dyr[j];
      sum_g += g[j], sum_gx += static_cast<double>(g[j]) * xh[j];
    }
    const auto mg = static_cast<float>(sum_g / n), mgx = static_cast<float>(sum_gx / n), rs = static_cast<float>(rstd);
    for (int64_t j = 0; j < d; ++j) dxr[j] += rs * (g[j] - mg - xh[j] * mgx);
    if (!affine) continue;
    for (int64_t j = 0; j < d; ++j) dgamma[j] += dyr[j] * xh[j], dbeta[j] += dyr[j];
  }
}

// RMSNorm: per row, with r = rsqrt(mean(x^2) + eps), xh = x * r and
// g = dy * gamma: dx = r * (g - xh * mean(g * xh)), dgamma += dy * xh.
void rms_norm_grad(const GradArgs& a) {
  const Tensor<float>& x = *a.in[0];
  const int64_t d = x.shape.back(), rows = x.numel() / d;
  const double eps = a.attrs.get_float("eps");
  const double n = static_cast<double>(d);
  const float* gamma = a.in[1]->data.data();
  float* dgamma = a.in_grad[1].data.data();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data.data() + r * d;
    const float* dyr = a.out_grad[0]->data.data() + r * d;
    float* dxr = a.in_grad[0].data.data() + r * d;
    double ms = 0;
    for (int64_t j = 0; j < d; ++j) ms += static_cast<double>(xr[j]) * xr[j];
    const double rstd = 1.0 / std::sqrt(ms / n + eps);
    double sum_gx = 0;
    for (int64_t j = 0; j < d; ++j) sum_gx += static_cast<double>(dyr[j]) * gamma[j] * xr[j] * rstd;
    const auto mgx = static_cast<float>(sum_gx / n), rs = static_cast<float>(rstd);
    for (int64_t j = 0; j < d; ++j) {
      const float xh = xr[j] * rs;
      dxr[j] += rs * (dyr[j] * gamma[j] - xh * mgx);
      dgamma[j] += dyr[j] * xh;
    }
  }
}

double per_element(std::span<const TensorType> in, double f) { return f * static_cast<double>(product(in[0].shape)); }

}  // namespace

void register_norm_ops(OpRegistry& r) {
  OpDef sm;
  sm.name = "Softmax";
  sm.summary = "softmax along one axis; causal masks key j > query i on the last two axes";
  sm.attrs = {with_domain(int_attr("axis", -1, "normalized axis; negative counts from the end"), GenDomain::kDim),
              bool_attr("causal", false, "mask keys after the query (axis must be the last, rank >= 2)")};
  sm.input_names = {"x"};
  sm.min_inputs = sm.max_inputs = 1;
  sm.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    require_min_rank(in[0], 1, "Softmax input x");
    require_float(in[0], "Softmax input x");
    const int rank = static_cast<int>(in[0].shape.size());
    const int axis = softmax_axis(a, in[0].shape.size());
    PCGX_REQUIRE(axis >= 0 && axis < rank, "axis " + std::to_string(a.get_int("axis")) + " out of range for rank " +
                                          std::to_string(rank));
    if (a.get_bool("causal"))
      PCGX_REQUIRE(rank >= 2 && axis == rank - 1, "a causal softmax needs rank >= 2 and the last axis");
    return std::vector<TensorType>{in[0]};
  };
  sm.kinds = [](const Attributes& a, std::span<const TensorType> in) {
    auto kinds = elementwise_kinds(in[0].shape.size(), 1);
    kinds.erase(kinds.begin() + softmax_axis(a, in[0].shape.size()));
    return kinds;
  };
  PCGX_KERNELS(sm, softmax_k);
  sm.grad_f32 = &softmax_grad;
  sm.backward_reads = reads(0, 1);  // y (dy - <y, dy>)
  sm.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return per_element(in, 5); };
  sm.smt = {{"softmax", 1, {{"axis", SmtCode::kAxis}}, 0, {{"causal", false}}},
            {"softmax_causal", 1, {{"axis", SmtCode::kAxis}}, 0, {{"causal", true}}}};
  sm.any_rank = true;
  r.add(sm);

  OpDef ln;
  ln.name = "LayerNorm";
  ln.summary = "normalizes the last dimension; affine: * gamma + beta";
  ln.attrs = {value_attr(float_attr("eps", 1e-5, "added to the variance")), bool_attr("affine", true, "take gamma and beta inputs")};
  ln.input_names = {"x", "gamma", "beta"};
  ln.min_inputs = 1;
  ln.max_inputs = 3;
  ln.arity = [](const Attributes& a) { return a.get_bool("affine") ? 3 : 1; };
  ln.infer_types = [](const Attributes& a, std::span<const TensorType> in) {
    require_min_rank(in[0], 1, "LayerNorm input x");
    require_float(in[0], "LayerNorm input x");
    if (a.get_bool("affine"))
      for (size_t i = 1; i < 3; ++i)
        PCGX_REQUIRE(in[i].shape == std::vector<int64_t>{in[0].shape.back()},
                std::string(i == 1 ? "gamma" : "beta") + " must have shape [" + std::to_string(in[0].shape.back()) +
                    "], got " + shape_str(in[i].shape));
    return std::vector<TensorType>{in[0]};
  };
  ln.kinds = [](const Attributes& a, std::span<const TensorType> in) {
    const bool affine = a.get_bool("affine");
    std::vector<ParallelKind> kinds;
    for (int d = 0; d + 1 < static_cast<int>(in[0].shape.size()); ++d) {
      std::vector<int> ins{d};
      if (affine) ins.insert(ins.end(), {kCopy, kCopy});
      kinds.push_back({"dim" + std::to_string(d), ins, {d}, 0});
    }
    return kinds;
  };
  PCGX_KERNELS(ln, layer_norm_k);
  ln.grad_f32 = &layer_norm_grad;
  ln.backward_reads = reads(0b011, 0);  // x and gamma (its statistics computed again), not beta
  ln.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return per_element(in, 8); };
  ln.smt = {{"layer_norm", 1, {"eps"}, 0, {{"affine", false}}}, {"layer_norm_affine", 3, {"eps"}, 0, {{"affine", true}}}};
  // gamma and beta: two 1-d weights, or its rules could only state gamma == beta
  ln.pool_inputs = {PoolInput::kVectorWeights, PoolInput::kVectorWeights};
  r.add(ln);

  OpDef rms;
  rms.name = "RMSNorm";
  rms.summary = "x / sqrt(mean(x^2) + eps) * gamma over the last dimension (LLaMA's norm)";
  rms.attrs = {value_attr(float_attr("eps", 1e-6, "added to the mean square"))};
  rms.input_names = {"x", "gamma"};
  rms.min_inputs = rms.max_inputs = 2;
  rms.infer_types = [](const Attributes&, std::span<const TensorType> in) {
    require_min_rank(in[0], 1, "RMSNorm input x");
    require_float(in[0], "RMSNorm input x");
    PCGX_REQUIRE(in[1].shape == std::vector<int64_t>{in[0].shape.back()},
                 "gamma must have shape [" + std::to_string(in[0].shape.back()) + "], got " + shape_str(in[1].shape));
    return std::vector<TensorType>{in[0]};
  };
  rms.kinds = [](const Attributes&, std::span<const TensorType> in) {
    std::vector<ParallelKind> kinds;
    for (int d = 0; d + 1 < static_cast<int>(in[0].shape.size()); ++d) kinds.push_back({"dim" + std::to_string(d), {d, kCopy}, {d}, 0});
    return kinds;
  };
  PCGX_KERNELS(rms, rms_norm_k);
  rms.grad_f32 = &rms_norm_grad;
  rms.backward_reads = reads(0b11, 0);
  rms.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return per_element(in, 4); };
  rms.smt = {{"rms_norm", 2, {"eps"}}};
  rms.pool_inputs = {PoolInput::kVectorWeights};
  r.add(rms);

}

}  // namespace pcgx::ops
