#pragma once
// Comparing two graphs by the reference interpreter (search tests).
#include <algorithm>
#include <cmath>

#include "pcgx/pcg/interpreter.h"

namespace pcgx::search {

// A graph's outputs on the fixed random inputs every comparison uses.
inline std::vector<Tensor<float>> reference_outputs(const Graph& g) { return evaluate_outputs<float>(g, random_sources<float>(7)); }

// The largest elementwise difference between outputs `va` (of
// reference_outputs) and graph b's, relative.
inline double max_difference(const std::vector<Tensor<float>>& va, const Graph& b) {
  const auto vb = reference_outputs(b);
  double worst = va.size() == vb.size() ? 0 : 1e30;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
    if (va[i].data.size() != vb[i].data.size()) return 1e30;
    for (size_t e = 0; e < va[i].data.size(); ++e)
      worst = std::max(worst, std::fabs(double(va[i].data[e]) - vb[i].data[e]) / (1.0 + std::fabs(double(va[i].data[e]))));
  }
  return worst;
}

// The same between two graphs.
inline double max_difference(const Graph& a, const Graph& b) { return max_difference(reference_outputs(a), b); }

}  // namespace pcgx::search
