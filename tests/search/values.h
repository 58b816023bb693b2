#pragma once
// Comparing two graphs by the reference interpreter (search tests).
#include <algorithm>
#include <cmath>

#include "pcgx/pcg/interpreter.h"

namespace pcgx::search {

// The largest elementwise difference between two graphs' outputs, relative.
inline double max_difference(const Graph& a, const Graph& b) {
  const auto va = evaluate_outputs<float>(a, random_sources<float>(7));
  const auto vb = evaluate_outputs<float>(b, random_sources<float>(7));
  double worst = va.size() == vb.size() ? 0 : 1e30;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
    if (va[i].data.size() != vb[i].data.size()) return 1e30;
    for (size_t e = 0; e < va[i].data.size(); ++e)
      worst = std::max(worst, std::fabs(double(va[i].data[e]) - vb[i].data[e]) / (1.0 + std::fabs(double(va[i].data[e]))));
  }
  return worst;
}

}  // namespace pcgx::search
