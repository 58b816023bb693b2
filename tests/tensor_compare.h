#pragma once
// Tensors compared at their own scale: max |a - b| / max |b|, with max |b|
// at least `floor`; infinite where an element of either is not finite (a
// NaN left by a kernel that did not write it, an overflow), which a plain
// max would pass over. The floor matters where a value is zero in exact
// arithmetic and holds rounding noise after training (an attention key's
// bias: softmax ignores a shift per row), different in every run order.
#include <algorithm>
#include <cmath>
#include <limits>

#include "pcgx/pcg/tensor.h"

namespace pcgx::testing {

inline double relative_difference(const Tensor<float>& a, const Tensor<float>& b, double floor = 1e-12) {
  // Tensors of different sizes (one of them a freed value's empty copy) are
  // as different as can be, never silently equal.
  if (a.data.size() != b.data.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = floor;
  for (size_t i = 0; i < a.data.size(); ++i) {
    if (!std::isfinite(a.data[i]) || !std::isfinite(b.data[i])) return std::numeric_limits<double>::infinity();
    num = std::max(num, static_cast<double>(std::fabs(a.data[i] - b.data[i])));
    den = std::max(den, static_cast<double>(std::fabs(b.data[i])));
  }
  return num / den;
}

}  // namespace pcgx::testing
