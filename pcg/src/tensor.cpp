#include "pcgx/pcg/tensor.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/modular.h"

namespace pcgx {

std::vector<int64_t> strides_of(std::span<const int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t j = shape.size(); j-- > 1;) s[j - 1] = s[j] * shape[j];
  return s;
}

// Visits every row (innermost contiguous run) of a block: calls
// f(offset_in_full, offset_in_block) for each, rows of length extent.back().
// Allocation-free (the runtime moves blocks every step), ranks up to 8.
template <class F>
static void for_each_row(std::span<const int64_t> full_shape, std::span<const int64_t> offset,
                         std::span<const int64_t> extent, F&& f) {
  const size_t k = full_shape.size();
  if (k == 0) {
    f(int64_t{0}, int64_t{0});
    return;
  }
  if (k > kMaxRank) throw Error("tensor rank " + std::to_string(k) + " is above " + std::to_string(kMaxRank));
  std::array<int64_t, kMaxRank> fs{}, idx{};
  fs[k - 1] = 1;
  for (size_t j = k - 1; j-- > 0;) fs[j] = fs[j + 1] * full_shape[j + 1];
  const int64_t rows = product(extent.subspan(0, k - 1));
  for (int64_t r = 0, boff = 0; r < rows; ++r, boff += extent[k - 1]) {
    int64_t foff = 0;
    for (size_t j = 0; j < k; ++j) foff += (offset[j] + idx[j]) * fs[j];
    f(foff, boff);
    for (size_t j = k - 1; j-- > 0;) {
      if (++idx[j] < extent[j]) break;
      idx[j] = 0;
    }
  }
}

template <class T>
Tensor<T> slice_block(const Tensor<T>& full, std::span<const int64_t> offset, std::span<const int64_t> extent) {
  Tensor<T> out(std::vector<int64_t>(extent.begin(), extent.end()));
  read_block(full, offset, out);
  return out;
}

template <class T>
void read_block(const Tensor<T>& full, std::span<const int64_t> offset, Tensor<T>& out) {
  if (out.numel() == 0) return;
  const int64_t len = out.shape.empty() ? 1 : out.shape.back();
  for_each_row(full.shape, offset, out.shape, [&](int64_t foff, int64_t boff) {
    std::copy_n(full.data.begin() + foff, len, out.data.begin() + boff);
  });
}

template <class T>
void write_block(Tensor<T>& full, std::span<const int64_t> offset, const Tensor<T>& block) {
  if (block.numel() == 0) return;
  const int64_t len = block.shape.empty() ? 1 : block.shape.back();
  for_each_row(full.shape, offset, block.shape, [&](int64_t foff, int64_t boff) {
    std::copy_n(block.data.begin() + boff, len, full.data.begin() + foff);
  });
}

template <class T>
void add_block(Tensor<T>& full, std::span<const int64_t> offset, const Tensor<T>& block) {
  if (block.numel() == 0) return;
  const int64_t len = block.shape.empty() ? 1 : block.shape.back();
  for_each_row(full.shape, offset, block.shape, [&](int64_t foff, int64_t boff) {
    for (int64_t i = 0; i < len; ++i) full.data[static_cast<size_t>(foff + i)] += block.data[static_cast<size_t>(boff + i)];
  });
}

template <class T>
void add_from_block(Tensor<T>& out, const Tensor<T>& full, std::span<const int64_t> offset) {
  if (out.numel() == 0) return;
  const int64_t len = out.shape.empty() ? 1 : out.shape.back();
  for_each_row(full.shape, offset, out.shape, [&](int64_t foff, int64_t boff) {
    for (int64_t i = 0; i < len; ++i) out.data[static_cast<size_t>(boff + i)] += full.data[static_cast<size_t>(foff + i)];
  });
}

template <class T>
ShardedTensor<T> distribute(const Tensor<T>& full, const ParallelTensorShape& shape) {
  ShardedTensor<T> out{shape, {}};
  const int64_t blocks = shape.num_blocks();
  out.shards.reserve(static_cast<size_t>(shape.num_shards()));
  const auto extent = shape.shard_shape();
  std::vector<int64_t> block;
  int64_t slot = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    shape.shard_coords(b, slot, block);
    out.shards.push_back(slice_block(full, shape.block_offset(block), extent));
  }
  for (int64_t c = 1; c < shape.replica; ++c)
    for (int64_t b = 0; b < blocks; ++b) out.shards.push_back(out.shards[static_cast<size_t>(b)]);
  return out;
}

template <class T>
Tensor<T> gather_slot(const ShardedTensor<T>& t, int64_t slot) {
  Tensor<T> full(t.shape.logical_shape());
  const int64_t blocks = t.shape.num_blocks();
  std::vector<int64_t> block;
  int64_t c = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    t.shape.shard_coords(b, c, block);
    write_block(full, t.shape.block_offset(block), t.shards[static_cast<size_t>(slot * blocks + b)]);
  }
  return full;
}

#define PCGX_INSTANTIATE(T)                                                                              \
  template Tensor<T> slice_block(const Tensor<T>&, std::span<const int64_t>, std::span<const int64_t>); \
  template void write_block(Tensor<T>&, std::span<const int64_t>, const Tensor<T>&);                   \
  template void read_block(const Tensor<T>&, std::span<const int64_t>, Tensor<T>&);                    \
  template void add_block(Tensor<T>&, std::span<const int64_t>, const Tensor<T>&);                     \
  template void add_from_block(Tensor<T>&, const Tensor<T>&, std::span<const int64_t>);               \
  template ShardedTensor<T> distribute(const Tensor<T>&, const ParallelTensorShape&);                  \
  template Tensor<T> gather_slot(const ShardedTensor<T>&, int64_t);
PCGX_INSTANTIATE(float)
PCGX_INSTANTIATE(ModP)
#undef PCGX_INSTANTIATE

}  // namespace pcgx
