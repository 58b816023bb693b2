// Softplus, log(1 + exp(x)), as a pcgx plugin: one OpDef registered with
// OpRegistration, and the directory of its axioms and opset named with
// PluginData. Nothing in pcgx changes; `pcgx --plugin softplus.so` loads it
// (docs/adding-an-operator.md, "As a plugin").
#include <algorithm>
#include <cmath>

#include "pcgx/pcg/ops/numeric.h"
#include "pcgx/pcg/ops/op_helpers.h"
#include "pcgx/pcg/plugin.h"
#include "pcgx/pcg/registry.h"

namespace {

using pcgx::ModP;

// The float function, and its exact surrogate modulo p for the generator's
// fingerprints. The real softplus keeps softplus(x) - softplus(-x) = x (its
// odd part is x / 2), so the surrogate is x / 2 plus an even function of
// degree 2 with a non-zero constant: it keeps that identity and breaks
// linearity and commuting with a sum of partial results, as softplus does.
float softplus(float x) { return std::max(x, 0.f) + std::log1p(std::exp(-std::fabs(x))); }
ModP softplus(ModP x) { return x * ModP::from_u64(2).inverse() + x * x + ModP::from_u64(3); }

template <class T>
void softplus_kernel(const pcgx::KernelArgs<T>& a) {
  const auto& x = a.in[0]->data;
  auto& y = a.out[0].data;
  for (size_t i = 0; i < x.size(); ++i) y[i] = softplus(x[i]);
}

// d softplus / dx = sigmoid(x); added into in_grad, which arrives shaped.
void softplus_grad(const pcgx::GradArgs& a) {
  const auto &x = a.in[0]->data, &dy = a.out_grad[0]->data;
  auto& dx = a.in_grad[0].data;
  for (size_t i = 0; i < dx.size(); ++i) dx[i] += dy[i] * pcgx::ops::Num<float>::sigmoid(x[i]);
}

void add_softplus(pcgx::OpRegistry& r) {
  using namespace pcgx::ops;
  pcgx::OpDef d;
  d.name = "Softplus";
  d.summary = "log(1 + exp(x)) (a plugin's operator)";
  d.op_class = pcgx::OpClass::kCompute;
  d.input_names = {"x"};
  d.min_inputs = d.max_inputs = 1;
  d.infer_types = [](const pcgx::Attributes&, std::span<const pcgx::TensorType> in) {
    require_float(in[0], "Softplus input");
    return std::vector<pcgx::TensorType>{in[0]};
  };
  // Elementwise: any dimension splits, replica slots are computed slot by slot.
  d.kinds = [](const pcgx::Attributes&, std::span<const pcgx::TensorType> in) { return elementwise_kinds(in[0].shape.size(), 1); };
  PCGX_KERNELS(d, softplus_kernel);
  d.grad_f32 = &softplus_grad;
  d.backward_reads = reads(1, 0);  // the gradient reads x
  d.flops = [](const pcgx::Attributes&, std::span<const pcgx::TensorType> in, auto) {
    return 4.0 * static_cast<double>(pcgx::product(in[0].shape));
  };
  d.smt = {{"softplus", 1}};
  d.elementwise = true;
  d.any_rank = true;
  r.add(std::move(d));
}

const pcgx::OpRegistration registration(&add_softplus);
// softplus/axioms/*.smt2 and softplus/opsets/*.json, beside this library.
const pcgx::PluginData data("softplus");

}  // namespace
