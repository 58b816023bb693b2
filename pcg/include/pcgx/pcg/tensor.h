#pragma once
// Dense row-major tensors (one shard, or one whole logical tensor) and
// sharded tensors (every shard of a parallel tensor, in canonical order).
// T is float for numerics or ModP for exact fingerprints; index tensors hold
// their integer values in T.
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "pcgx/pcg/parallel_tensor_shape.h"

namespace pcgx {

// The highest rank the allocation-free index walks (block copies, transpose,
// global element indices) handle: they keep their indices in fixed arrays.
inline constexpr size_t kMaxRank = 8;

inline int64_t product(std::span<const int64_t> v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * b; });
}

template <class T>
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<T> data;

  Tensor() = default;
  explicit Tensor(std::vector<int64_t> s) : shape(std::move(s)), data(static_cast<size_t>(product(shape))) {}
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int rank() const { return static_cast<int>(shape.size()); }
  bool operator==(const Tensor&) const = default;
};

template <class T>
struct ShardedTensor {
  ParallelTensorShape shape;
  std::vector<Tensor<T>> shards;  // canonical shard order
};

// Row-major strides of `shape`.
std::vector<int64_t> strides_of(std::span<const int64_t> shape);

// Copies the block of `full` starting at `offset` with extent `extent`.
template <class T>
Tensor<T> slice_block(const Tensor<T>& full, std::span<const int64_t> offset, std::span<const int64_t> extent);
// Writes `block` into `full` at `offset`.
template <class T>
void write_block(Tensor<T>& full, std::span<const int64_t> offset, const Tensor<T>& block);
// The same without allocating, for the runtime's per-step data movement:
// out (pre-shaped to the block's extent) = the block of `full` at `offset`;
// full[offset + block] += block; out += the block of `full` at `offset`.
template <class T>
void read_block(const Tensor<T>& full, std::span<const int64_t> offset, Tensor<T>& out);
template <class T>
void add_block(Tensor<T>& full, std::span<const int64_t> offset, const Tensor<T>& block);
template <class T>
void add_from_block(Tensor<T>& out, const Tensor<T>& full, std::span<const int64_t> offset);

// Lays a logical tensor out as `shape` prescribes, every replica slot a copy.
template <class T>
ShardedTensor<T> distribute(const Tensor<T>& full, const ParallelTensorShape& shape);
// Reassembles the logical tensor held by one replica slot.
template <class T>
Tensor<T> gather_slot(const ShardedTensor<T>& t, int64_t slot);

}  // namespace pcgx
