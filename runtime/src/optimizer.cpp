#include "pcgx/runtime/optimizer.h"

#include <cmath>

#include "pcgx/pcg/error.h"

namespace pcgx::runtime {

void validate(const OptimizerOptions& o) {
  if (o.kind != "sgd" && o.kind != "adam") throw Error("--optimizer: unknown optimizer '" + o.kind + "' (sgd, adam)");
  if (!(o.lr > 0) || !std::isfinite(o.lr)) throw Error("--lr: the learning rate must be positive");
  if (o.momentum < 0 || o.momentum >= 1) throw Error("--momentum: must lie in [0, 1)");
}

Optimizer::Optimizer(OptimizerOptions options) : o_(std::move(options)) { validate(o_); }

void Optimizer::step(std::span<Tensor<float>* const> params, std::span<const Tensor<float>* const> grads) {
  if (m_.empty()) {
    for (const Tensor<float>* p : params) {
      m_.emplace_back(p->data.size(), 0.f);
      if (o_.kind == "adam") v_.emplace_back(p->data.size(), 0.f);
    }
  }
  ++steps_;
  const auto lr = static_cast<float>(o_.lr);
  if (o_.kind == "sgd") {
    const auto mu = static_cast<float>(o_.momentum);
    for (size_t i = 0; i < params.size(); ++i) {
      auto& w = params[i]->data;
      const auto& g = grads[i]->data;
      auto& v = m_[i];
      for (size_t e = 0; e < w.size(); ++e) {
        v[e] = mu * v[e] + g[e];
        w[e] -= lr * v[e];
      }
    }
    return;
  }
  const double c1 = 1.0 - std::pow(o_.beta1, static_cast<double>(steps_));
  const double c2 = 1.0 - std::pow(o_.beta2, static_cast<double>(steps_));
  const auto b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2);
  const auto step = static_cast<float>(o_.lr / c1), eps = static_cast<float>(o_.eps);
  const auto root_c2 = static_cast<float>(std::sqrt(c2));
  for (size_t i = 0; i < params.size(); ++i) {
    auto& w = params[i]->data;
    const auto& g = grads[i]->data;
    auto &m = m_[i], &v = v_[i];
    for (size_t e = 0; e < w.size(); ++e) {
      m[e] = b1 * m[e] + (1 - b1) * g[e];
      v[e] = b2 * v[e] + (1 - b2) * g[e] * g[e];
      w[e] -= step * m[e] / (std::sqrt(v[e]) / root_c2 + eps);
    }
  }
}

}  // namespace pcgx::runtime
