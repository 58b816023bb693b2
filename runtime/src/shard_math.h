#pragma once
// Whole-shard arithmetic the executor's passes share (internal to runtime/).
#include <algorithm>

#include "pcgx/pcg/tensor.h"

namespace pcgx::runtime {

inline void zero(Tensor<float>& t) { std::fill(t.data.begin(), t.data.end(), 0.f); }

inline void add_into(Tensor<float>& into, const Tensor<float>& x) {
  for (size_t i = 0; i < into.data.size(); ++i) into.data[i] += x.data[i];
}

}  // namespace pcgx::runtime
