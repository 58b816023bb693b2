// Elementwise operators: EwAdd, EwMul, ScalarMul, Relu, Gelu, Sigmoid, Tanh,
// Silu, Reciprocal, Clip, Dropout. Every dimension can be split; inputs must agree exactly.
#include "pcgx/pcg/ops/numeric.h"
#include "op_families.h"
#include "pcgx/pcg/ops/op_helpers.h"
#include "vector_math.h"

namespace pcgx::ops {
namespace {

template <class T, class F>
void unary_apply(const KernelArgs<T>& a, F f) {
  const auto& x = a.in[0]->data;
  auto& y = a.out[0].data;
  for (size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
}

// An activation: vectorized for float, the exact surrogate for ModP.
template <Act act, class T>
void activation_k(const KernelArgs<T>& a) {
  if constexpr (std::is_same_v<T, float>) {
    std::copy(a.in[0]->data.begin(), a.in[0]->data.end(), a.out[0].data.begin());
    vec::activate(act, a.out[0].data.data(), a.out[0].data.size());
  } else {
    unary_apply(a, [](T x) { return activate(act, x); });
  }
}
template <class T> void relu_k(const KernelArgs<T>& a) { activation_k<Act::kRelu>(a); }
template <class T> void gelu_k(const KernelArgs<T>& a) { activation_k<Act::kGelu>(a); }
template <class T> void sigmoid_k(const KernelArgs<T>& a) { activation_k<Act::kSigmoid>(a); }
template <class T> void tanh_k(const KernelArgs<T>& a) { activation_k<Act::kTanh>(a); }
// SiLU (swish): x * sigmoid(x), LLaMA's gate activation.
template <class T>
void silu_k(const KernelArgs<T>& a) {
  if constexpr (std::is_same_v<T, float>) {
    const auto& x = a.in[0]->data;
    auto& y = a.out[0].data;
    std::copy(x.begin(), x.end(), y.begin());
    vec::activate(Act::kSigmoid, y.data(), y.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] *= x[i];
  } else {
    unary_apply(a, [](T x) { return x * Num<T>::sigmoid(x); });
  }
}
// 1 / x (ONNX's Reciprocal, and the divisor of Div). Exact surrogate: the
// modular inverse (0's is 0), an involution that turns products into
// products, as the real reciprocal does.
template <class T>
void reciprocal_k(const KernelArgs<T>& a) {
  unary_apply(a, [](T x) { return Num<T>::div(Num<T>::one(), x); });
}
// Clip (ONNX's, PyTorch's clamp and ReLU6): x limited to [min, max].
template <class T>
void clip_k(const KernelArgs<T>& a) {
  const double lo = a.attrs.get_float("min"), hi = a.attrs.get_float("max");
  unary_apply(a, [lo, hi](T x) { return Num<T>::clip(x, lo, hi); });
}
template <class T>
void scalar_mul_k(const KernelArgs<T>& a) {
  const T s = Num<T>::from_double(a.attrs.get_float("scalar"));
  unary_apply(a, [s](T x) { return x * s; });
}
template <class T>
void add_k(const KernelArgs<T>& a) {
  const auto &x = a.in[0]->data, &y = a.in[1]->data;
  auto& z = a.out[0].data;
  for (size_t i = 0; i < z.size(); ++i) z[i] = x[i] + y[i];
}
template <class T>
void mul_k(const KernelArgs<T>& a) {
  const auto &x = a.in[0]->data, &y = a.in[1]->data;
  auto& z = a.out[0].data;
  for (size_t i = 0; i < z.size(); ++i) z[i] = x[i] * y[i];
}

template <class T>
void dropout_k(const KernelArgs<T>& a) {
  const double rate = a.attrs.get_float("rate");
  const auto seed = static_cast<uint64_t>(a.attrs.get_int("seed"));
  const T scale = Num<T>::from_double(1.0 / (1.0 - rate));
  const auto& x = a.in[0]->data;
  auto& y = a.out[0].data;
  for_each_global_index(a.ctx.output_shapes[0], a.ctx.output_offsets[0], a.out[0].shape,
                        [&](int64_t i, int64_t g) {
                          const auto k = static_cast<size_t>(i);
                          y[k] = keep_draw(seed, static_cast<uint64_t>(g)) >= rate ? x[k] * scale : Num<T>::zero();
                        });
}

// Gradients: dx = dy * f'(x), from x or y as is cheaper, and only from
// that one (the registry's backward_reads says which: the other may be
// freed by then).
template <Act act>
void activation_grad(const GradArgs& a) {
  vec::activation_backward_add(act, a.in[0]->data.data(), a.out[0]->data.data(), a.out_grad[0]->data.data(),
                               a.in_grad[0].data.data(), a.in_grad[0].data.size());
}
void relu_grad(const GradArgs& a) { activation_grad<Act::kRelu>(a); }
void gelu_grad(const GradArgs& a) { activation_grad<Act::kGelu>(a); }
void sigmoid_grad(const GradArgs& a) { activation_grad<Act::kSigmoid>(a); }
void tanh_grad(const GradArgs& a) { activation_grad<Act::kTanh>(a); }
// silu'(x) = s + x s (1 - s), s = sigmoid(x).
void silu_grad(const GradArgs& a) {
  const auto &x = a.in[0]->data, &dy = a.out_grad[0]->data;
  auto& dx = a.in_grad[0].data;
  for (size_t i = 0; i < dx.size(); ++i) {
    const float s = Num<float>::sigmoid(x[i]);
    dx[i] += dy[i] * (s * (1.f + x[i] * (1.f - s)));
  }
}
// (1/x)' = -1/x^2 = -y^2.
void reciprocal_grad(const GradArgs& a) {
  const auto &y = a.out[0]->data, &dy = a.out_grad[0]->data;
  auto& dx = a.in_grad[0].data;
  for (size_t i = 0; i < dx.size(); ++i) dx[i] -= dy[i] * y[i] * y[i];
}
// The gradient passes where min <= x <= max, as PyTorch's clamp's does.
void clip_grad(const GradArgs& a) {
  const auto lo = static_cast<float>(a.attrs.get_float("min")), hi = static_cast<float>(a.attrs.get_float("max"));
  const auto &x = a.in[0]->data, &dy = a.out_grad[0]->data;
  auto& dx = a.in_grad[0].data;
  for (size_t i = 0; i < dx.size(); ++i)
    if (x[i] >= lo && x[i] <= hi) dx[i] += dy[i];
}
void scalar_mul_grad(const GradArgs& a) {
  const auto s = static_cast<float>(a.attrs.get_float("scalar"));
  const auto& dy = a.out_grad[0]->data;
  auto& dx = a.in_grad[0].data;
  for (size_t i = 0; i < dx.size(); ++i) dx[i] += dy[i] * s;
}
void add_grad(const GradArgs& a) {
  const auto& dy = a.out_grad[0]->data;
  for (int i = 0; i < 2; ++i)
    for (size_t j = 0; j < dy.size(); ++j) a.in_grad[static_cast<size_t>(i)].data[j] += dy[j];
}
void mul_grad(const GradArgs& a) {
  const auto &x = a.in[0]->data, &y = a.in[1]->data, &dz = a.out_grad[0]->data;
  for (size_t j = 0; j < dz.size(); ++j) {
    a.in_grad[0].data[j] += dz[j] * y[j];
    a.in_grad[1].data[j] += dz[j] * x[j];
  }
}
void dropout_grad(const GradArgs& a) {
  const double rate = a.attrs.get_float("rate");
  const auto seed = static_cast<uint64_t>(a.attrs.get_int("seed"));
  const auto scale = static_cast<float>(1.0 / (1.0 - rate));
  const auto& dy = a.out_grad[0]->data;
  auto& dx = a.in_grad[0].data;
  for_each_global_index(a.ctx.output_shapes[0], a.ctx.output_offsets[0], a.out[0]->shape,
                        [&](int64_t i, int64_t g) {
                          const auto k = static_cast<size_t>(i);
                          if (keep_draw(seed, static_cast<uint64_t>(g)) >= rate) dx[k] += dy[k] * scale;
                        });
}

OpDef unary(const std::string& name, const std::string& summary) {
  OpDef d;
  d.name = name;
  d.summary = summary;
  d.input_names = {"x"};
  d.min_inputs = d.max_inputs = 1;
  d.infer_types = [name](const Attributes&, std::span<const TensorType> in) {
    require_float(in[0], name + " input");
    return std::vector<TensorType>{in[0]};
  };
  d.kinds = [](const Attributes&, std::span<const TensorType> in) { return elementwise_kinds(in[0].shape.size(), 1); };
  d.flops = [](const Attributes&, std::span<const TensorType> in, auto) {
    return static_cast<double>(product(in[0].shape));
  };
  return d;
}

OpDef binary(const std::string& name, const std::string& summary) {
  OpDef d = unary(name, summary);
  d.input_names = {"a", "b"};
  d.min_inputs = d.max_inputs = 2;
  d.infer_types = [name](const Attributes&, std::span<const TensorType> in) {
    require_float(in[0], name + " input 0");
    require_same_shape(in[0], in[1], name);
    return std::vector<TensorType>{in[0]};
  };
  d.kinds = [](const Attributes&, std::span<const TensorType> in) { return elementwise_kinds(in[0].shape.size(), 2); };
  return d;
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  OpDef add = binary("EwAdd", "elementwise sum of two tensors of one shape");
  PCGX_KERNELS(add, add_k);
  add.grad_f32 = &add_grad;
  add.backward_reads = reads(0, 0);
  add.smt = {{"ew_add", 2}};
  add.elementwise = true;
  add.dropout_add = DropoutAddPart::kSum;
  add.any_rank = true;
  r.add(add);
  OpDef mul = binary("EwMul", "elementwise product of two tensors of one shape");
  PCGX_KERNELS(mul, mul_k);
  mul.grad_f32 = &mul_grad;
  mul.backward_reads = reads(0b11, 0);
  mul.smt = {{"ew_mul", 2}};
  mul.elementwise = true;
  mul.any_rank = true;
  r.add(mul);

  OpDef relu = unary("Relu", "max(x, 0)");
  PCGX_KERNELS(relu, relu_k);
  relu.grad_f32 = &relu_grad;
  relu.backward_reads = reads(0, 1);  // y > 0 where x > 0
  relu.smt = {{"relu", 1}};
  relu.elementwise = true;
  relu.any_rank = true;
  r.add(relu);
  OpDef gelu = unary("Gelu", "x * Phi(x)");
  PCGX_KERNELS(gelu, gelu_k);
  gelu.grad_f32 = &gelu_grad;
  gelu.backward_reads = reads(1, 0);
  gelu.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return 8.0 * static_cast<double>(product(in[0].shape)); };
  gelu.smt = {{"gelu", 1}};
  gelu.elementwise = true;
  gelu.any_rank = true;
  r.add(gelu);
  OpDef sigmoid = unary("Sigmoid", "1 / (1 + exp(-x))");
  PCGX_KERNELS(sigmoid, sigmoid_k);
  sigmoid.grad_f32 = &sigmoid_grad;
  sigmoid.backward_reads = reads(0, 1);  // y (1 - y)
  sigmoid.flops = gelu.flops;
  sigmoid.smt = {{"sigmoid", 1}};
  sigmoid.elementwise = true;
  sigmoid.any_rank = true;
  r.add(sigmoid);
  OpDef tanh = unary("Tanh", "hyperbolic tangent");
  PCGX_KERNELS(tanh, tanh_k);
  tanh.grad_f32 = &tanh_grad;
  tanh.backward_reads = reads(0, 1);  // 1 - y^2
  tanh.flops = gelu.flops;
  tanh.smt = {{"tanh", 1}};
  tanh.elementwise = true;
  tanh.any_rank = true;
  r.add(tanh);

  OpDef silu = unary("Silu", "x * sigmoid(x) (SiLU, swish)");
  PCGX_KERNELS(silu, silu_k);
  silu.grad_f32 = &silu_grad;
  silu.backward_reads = reads(1, 0);
  silu.flops = [](const Attributes&, std::span<const TensorType> in, auto) { return 5.0 * static_cast<double>(product(in[0].shape)); };
  silu.smt = {{"silu", 1}};
  silu.elementwise = true;
  silu.any_rank = true;
  r.add(silu);

  OpDef reciprocal = unary("Reciprocal", "1 / x");
  PCGX_KERNELS(reciprocal, reciprocal_k);
  reciprocal.grad_f32 = &reciprocal_grad;
  reciprocal.backward_reads = reads(0, 1);  // -y^2
  reciprocal.smt = {{"reciprocal", 1}};
  reciprocal.elementwise = true;
  reciprocal.any_rank = true;
  r.add(reciprocal);

  OpDef clip = unary("Clip", "x limited to [min, max] (ReLU6: min 0, max 6)");
  clip.attrs = {float_attr("min", std::nullopt, "the lower bound"), float_attr("max", std::nullopt, "the upper bound")};
  auto clip_types = clip.infer_types;
  clip.infer_types = [clip_types](const Attributes& a, std::span<const TensorType> in) {
    PCGX_REQUIRE(a.get_float("min") <= a.get_float("max"),
                 "Clip: min " + std::to_string(a.get_float("min")) + " is above max " + std::to_string(a.get_float("max")));
    return clip_types(a, in);
  };
  PCGX_KERNELS(clip, clip_k);
  clip.grad_f32 = &clip_grad;
  clip.backward_reads = reads(1, 0);
  clip.smt = {{"clip", 1, {{"min", SmtCode::kFraction}, {"max", SmtCode::kFraction}}}};
  clip.elementwise = true;
  clip.any_rank = true;
  r.add(clip);

  OpDef smul = unary("ScalarMul", "x * scalar");
  smul.attrs = {with_domain(float_attr("scalar", std::nullopt, "the constant factor"), GenDomain::kScalar)};
  PCGX_KERNELS(smul, scalar_mul_k);
  smul.grad_f32 = &scalar_mul_grad;
  smul.backward_reads = reads(0, 0);
  smul.weight_layout = true;
  smul.smt = {{"scalar_mul", 1, {{"scalar", SmtCode::kFraction}}}};
  smul.elementwise = true;
  smul.any_rank = true;
  r.add(smul);

  OpDef drop = unary("Dropout", "zeroes elements with probability rate, scales the rest by 1/(1-rate)");
  drop.attrs = {value_attr(float_attr("rate", 0.1, "probability of dropping an element")),
                value_attr(int_attr("seed", 0, "mask seed: the mask is a function of (seed, element index)"))};
  auto base_types = drop.infer_types;
  drop.infer_types = [base_types](const Attributes& a, std::span<const TensorType> in) {
    const double rate = a.get_float("rate");
    PCGX_REQUIRE(rate >= 0.0 && rate < 1.0, "attribute 'rate' must lie in [0, 1), got " + std::to_string(rate));
    return base_types(a, in);
  };
  PCGX_KERNELS(drop, dropout_k);
  drop.grad_f32 = &dropout_grad;
  drop.backward_reads = reads(0, 0);  // the mask is drawn again from (seed, index)
  drop.smt = {{"dropout", 1, {"rate", "seed"}}};
  drop.elementwise = true;
  drop.dropout_add = DropoutAddPart::kDropout;
  r.add(drop);
}

}  // namespace pcgx::ops
