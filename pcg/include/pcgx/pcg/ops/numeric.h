#pragma once
// Per-number-system primitives for the reference kernels.
//
// Float is the real semantics. ModP gives each non-linear function an exact
// surrogate that keeps the identities pcgx's rules rely on:
//   clip(x) to [lo, hi] = x if x is a residue, else a square of the bounds
//     (clip(clip(x)) = clip(x); see Num<ModP>::clip).
//   relu(x) = x if x is a quadratic residue mod p, else 0. Since p = 3 mod 4,
//     exactly one of x, -x is a residue, so relu(x) - relu(-x) = x,
//     relu(relu(x)) = relu(x) and relu(a*x) = a*relu(x) for residues a hold
//     as they do for the real relu on positive a.
//   tanh is odd, sigmoid(x) = (1 + tanh(x/2)) / 2, gelu(x) = x * phi(x)
//     with phi(x) + phi(-x) = 1, as for the real functions.
//   exp, log and rsqrt are plain non-linear polynomials; max over a window is
//   the product of (x + 3), symmetric like max and not expressible by the
//   other operators (a sum of squares was: avgpool(maxpool(x)) would have
//   equalled avgpool(x * x)).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "pcgx/pcg/dropout_draw.h"
#include "pcgx/pcg/modular.h"

namespace pcgx::ops {

template <class T>
struct Num;

template <>
struct Num<float> {
  static float zero() { return 0.f; }
  static float one() { return 1.f; }
  static float from_double(double d) { return static_cast<float>(d); }
  static float from_int(int64_t i) { return static_cast<float>(i); }
  static int64_t index(float x) { return static_cast<int64_t>(x); }
  static float relu(float x) { return x > 0.f ? x : 0.f; }
  static float clip(float x, double lo, double hi) { return std::clamp(x, static_cast<float>(lo), static_cast<float>(hi)); }
  static float tanh(float x) { return std::tanh(x); }
  static float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
  static float gelu(float x) { return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f)); }
  static float exp(float x) { return std::exp(x); }
  static float log(float x) { return std::log(x); }
  static float rsqrt(float v, double eps) { return 1.f / std::sqrt(v + static_cast<float>(eps)); }
  static float max_init() { return -INFINITY; }
  static float max_step(float acc, float x) { return std::max(acc, x); }
  static float div(float a, float b) { return a / b; }
};

template <>
struct Num<ModP> {
  static ModP zero() { return ModP(); }
  static ModP one() { return ModP::from_u64(1); }
  static ModP from_double(double d) { return ModP::from_double(d); }
  static ModP from_int(int64_t i) { return ModP::from_int(i); }
  static int64_t index(ModP x) { return x.as_index(); }
  static ModP relu(ModP x) {
    return x.pow((ModP::kPrime - 1) / 2) == one() ? x : zero();
  }
  // Clip to [lo, hi]: x where x is a quadratic residue, else a square
  // that depends on both bounds (so a residue itself, or 0, which maps to
  // itself): clip(clip(x)) = clip(x) as for the real one, and clips of
  // other bounds, Relu among them (0 elsewhere), differ.
  static ModP clip(ModP x, double lo, double hi) {
    if (x.pow((ModP::kPrime - 1) / 2) == one()) return x;
    const ModP m = ModP::from_double(lo) * ModP::from_u64(3) + ModP::from_double(hi) * ModP::from_u64(5) + ModP::from_u64(7);
    return m * m;
  }
  static ModP tanh(ModP x) { return x * x * x + ModP::from_u64(2) * x; }
  static ModP sigmoid(ModP x) {
    const ModP half = ModP::from_u64(2).inverse();
    return half * (one() + tanh(x * half));
  }
  static ModP gelu(ModP x) {
    const ModP half = ModP::from_u64(2).inverse();
    return x * (half + ModP::from_u64(5) * x * x * x + ModP::from_u64(7) * x);
  }
  static ModP exp(ModP x) { return x * x + x + ModP::from_u64(3); }
  static ModP log(ModP x) { return x * x + ModP::from_u64(5); }
  static ModP rsqrt(ModP v, double) { return v * v + ModP::from_u64(2) * v + ModP::from_u64(5); }
  // max over a window: a shifted product, symmetric like max. A sum of
  // squares would equal an average pool of x*x, an identity max lacks.
  static ModP max_init() { return one(); }
  static ModP max_step(ModP acc, ModP x) { return acc * (x + ModP::from_u64(3)); }
  static ModP div(ModP a, ModP b) { return a * b.inverse(); }
};

// A fused activation, resolved from its attribute once per kernel call
// (comparing strings per element cost 10% of a training step).
enum class Act { kNone, kRelu, kGelu, kSigmoid, kTanh };
inline Act activation_kind(const std::string& act) {
  if (act == "none") return Act::kNone;
  if (act == "relu") return Act::kRelu;
  if (act == "gelu") return Act::kGelu;
  if (act == "sigmoid") return Act::kSigmoid;
  return Act::kTanh;
}

template <class T>
T activate(Act act, T x) {
  switch (act) {
    case Act::kNone: return x;
    case Act::kRelu: return Num<T>::relu(x);
    case Act::kGelu: return Num<T>::gelu(x);
    case Act::kSigmoid: return Num<T>::sigmoid(x);
    case Act::kTanh: break;
  }
  return Num<T>::tanh(x);
}

// keep_draw: pcgx/pcg/dropout_draw.h.

// Whether d act(z) / dz needs the input z; the others follow from the
// output y = act(z) (relu: y > 0 exactly when z > 0), so a fused kernel's
// backward need not recompute z.
inline bool derivative_needs_input(Act act) { return act == Act::kGelu; }

// The float derivatives themselves are vec::activation_backward (vector_math.h).

}  // namespace pcgx::ops
