#pragma once
// The fixed pool of graph inputs the generator draws from: activations
// x1..x3 (rank ndims), matrices w1, w2, and where the opset needs them
// index tensors and convolution kernels. The first tensor of each family
// also comes in every parallel state reachable in one step (split on one
// dimension by one degree, or replicated), so that rules whose inputs are
// already distributed fit in the operator budget.
//
// Fingerprint values: every shard of every pool tensor is drawn
// independently, so replica slots are unrelated values (they may be partial
// sums in a real graph) and no rule is proposed that holds only for copies.
#include <string>
#include <vector>

#include "pcgx/generator/config.h"
#include "pcgx/pcg/modular.h"
#include "pcgx/pcg/parallel_tensor_shape.h"
#include "pcgx/pcg/tensor.h"

namespace pcgx::gen {

struct PoolTensor {
  std::string name;            // "x1", "x1.d2x2" (dim 2 split 2 ways), "w1.r2" (replica 2)
  std::string base;            // "x1"
  bool weight = false;         // a Weight node rather than an Input
  int64_t index_range = 0;     // int64 index tensors: values in [0, index_range)
  ParallelTensorShape shape;
  int group = 0;               // tensors in one group may be renamed into each other
};

std::vector<PoolTensor> build_pool(const GeneratorConfig& config);

// Independent random shards for pool tensor `t` (see above).
template <class T>
ShardedTensor<T> pool_values(const PoolTensor& t, uint64_t seed);

}  // namespace pcgx::gen
