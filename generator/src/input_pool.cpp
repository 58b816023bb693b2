#include "pcgx/generator/input_pool.h"

#include <numeric>

#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/stable_hash.h"

namespace pcgx::gen {

int64_t GeneratorConfig::base_size() const {
  int64_t l = 1;
  for (int64_t d : degrees) l = std::lcm(l, d);
  return std::max<int64_t>(4, 2 * l);
}

namespace {

void add_family(std::vector<PoolTensor>& pool, const std::string& stem, int count, std::vector<int64_t> shape,
                bool weight, int64_t index_range, DataType dtype, const std::vector<int64_t>& degrees,
                std::vector<int>& next_group) {
  const int group = next_group[0]++;
  for (int i = 1; i <= count; ++i) {
    PoolTensor t;
    t.base = stem + std::to_string(i);
    t.name = t.base;
    t.weight = weight;
    t.index_range = index_range;
    t.shape = ParallelTensorShape::unpartitioned(shape, dtype);
    t.group = group;
    pool.push_back(t);
  }
  // Parallel variants of the first tensor: each one its own group.
  PoolTensor first = pool[pool.size() - static_cast<size_t>(count)];
  for (size_t d = 0; d < shape.size(); ++d)
    for (int64_t k : degrees) {
      PoolTensor v = first;
      v.name = first.base + ".d" + std::to_string(d) + "x" + std::to_string(k);
      v.shape.dims[d].degree = k;
      v.group = next_group[0]++;
      pool.push_back(v);
    }
  for (int64_t k : degrees) {
    PoolTensor v = first;
    v.name = first.base + ".r" + std::to_string(k);
    v.shape.replica = k;
    v.group = next_group[0]++;
    pool.push_back(v);
  }
}

}  // namespace

std::vector<PoolTensor> build_pool(const GeneratorConfig& c) {
  const int64_t n = c.base_size();
  std::vector<PoolTensor> pool;
  std::vector<int> group{0};
  add_family(pool, "x", 3, std::vector<int64_t>(static_cast<size_t>(c.ndims), n), false, 0, DataType::kFloat32,
             c.degrees, group);
  add_family(pool, "w", 2, {n, n}, true, 0, DataType::kFloat32, c.degrees, group);
  if (c.opset.index_inputs) add_family(pool, "i", 1, {n, n}, false, n, DataType::kInt64, c.degrees, group);
  if (c.opset.vector_weights > 0) add_family(pool, "g", c.opset.vector_weights, {n}, true, 0, DataType::kFloat32, c.degrees, group);
  if (c.opset.conv_kernels) add_family(pool, "k", 2, {n, n, 3, 3}, true, 0, DataType::kFloat32, c.degrees, group);
  return pool;
}

template <class T>
ShardedTensor<T> pool_values(const PoolTensor& t, uint64_t seed) {
  ShardedTensor<T> s{t.shape, {}};
  const uint64_t key = hash_string(t.name) ^ (seed * 0x9E3779B97F4A7C15ULL);
  const TensorType shard_type{t.shape.shard_shape(), t.shape.dtype};
  for (int64_t i = 0; i < t.shape.num_shards(); ++i)
    s.shards.push_back(random_tensor<T>(shard_type, key + static_cast<uint64_t>(i) * 7919, t.index_range));
  return s;
}

template ShardedTensor<float> pool_values<float>(const PoolTensor&, uint64_t);
template ShardedTensor<ModP> pool_values<ModP>(const PoolTensor&, uint64_t);

}  // namespace pcgx::gen
