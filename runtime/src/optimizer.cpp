#include "pcgx/runtime/optimizer.h"

#include <cmath>

#include "pcgx/pcg/error.h"

namespace pcgx::runtime {

const char* name(OptimizerKind kind) { return kind == OptimizerKind::kAdam ? "adam" : "sgd"; }

void validate(const OptimizerOptions& o) {
  if (!(o.lr > 0) || !std::isfinite(o.lr)) throw FieldError("OptimizerOptions.lr", "the learning rate must be positive");
  if (o.momentum < 0 || o.momentum >= 1) throw FieldError("OptimizerOptions.momentum", "must lie in [0, 1)");
}

OptimizerState priced_as(const OptimizerOptions& o) {
  return o.kind == OptimizerKind::kAdam ? OptimizerState::kAdam : OptimizerState::kMomentum;
}

Optimizer::Optimizer(OptimizerOptions options, Backend& backend) : o_(std::move(options)), backend_(backend) { validate(o_); }

std::span<const ParameterSlot> Optimizer::state(std::span<const Buffer> params) {
  if (slots_.empty()) {
    for (const Buffer& p : params) {
      ParameterSlot& s = slots_.emplace_back();
      s.m = backend_.allocate(backend_.shape(p));
      if (o_.kind == OptimizerKind::kAdam) s.v = backend_.allocate(backend_.shape(p));
    }
  }
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].w = params[i];
  return slots_;
}

void Optimizer::step(std::span<const Buffer> params, std::span<const Buffer> grads) {
  const bool adam = o_.kind == OptimizerKind::kAdam;
  state(params);
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].g = grads[i];
  ++steps_;
  UpdateRule r;
  r.lr = static_cast<float>(o_.lr);
  if (!adam) {
    r.kind = UpdateRule::Kind::kSgd;
    r.momentum = static_cast<float>(o_.momentum);
    backend_.update(r, slots_);
    return;
  }
  r.kind = UpdateRule::Kind::kAdam;
  const double c1 = 1.0 - std::pow(o_.beta1, static_cast<double>(steps_));
  const double c2 = 1.0 - std::pow(o_.beta2, static_cast<double>(steps_));
  // 1 - beta in double, then rounded, as PyTorch computes it from Python
  // floats: 1 - float(0.999) is 9.9999e-4, a drift of 1e-5 in 20 steps.
  r.beta1 = static_cast<float>(o_.beta1), r.beta2 = static_cast<float>(o_.beta2);
  r.one_minus_beta1 = static_cast<float>(1.0 - o_.beta1), r.one_minus_beta2 = static_cast<float>(1.0 - o_.beta2);
  r.step = static_cast<float>(o_.lr / c1), r.eps = static_cast<float>(o_.eps);
  r.root_c2 = static_cast<float>(std::sqrt(c2));
  backend_.update(r, slots_);
}

}  // namespace pcgx::runtime
