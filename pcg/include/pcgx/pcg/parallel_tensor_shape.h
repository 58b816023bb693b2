#pragma once
// Parallel tensor shapes (docs/design.md, "Parallel tensors").
//
// A parallel tensor has a logical shape [n_0..n_{k-1}], a degree d_j per
// dimension (d_j divides n_j) and a replica degree r. It is stored as
// r * prod(d_j) shards; shard (c; i_0..i_{k-1}) holds, of replica slot c, the
// block [i_j*n_j/d_j, (i_j+1)*n_j/d_j) of every dimension j.
//
// Canonical shard order: shards are numbered row-major over (c, i_0, ...,
// i_{k-1}), replica slot outermost, each block index ascending. Rules and
// fingerprints are relative to this order.
//
// A dimension may also be pipelined: processed in `pipeline` sequential
// micro-slices (Pipeline/Batch). Pipelining changes scheduling, not which
// values a shard holds, so it does not change the shard count.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pcgx {

enum class DataType : uint8_t { kFloat32, kInt64 };

std::string_view to_string(DataType t);
std::optional<DataType> parse_data_type(std::string_view s);
int64_t byte_size(DataType t);

struct ParallelDim {
  int64_t size = 1;
  int64_t degree = 1;
  int64_t pipeline = 1;
  bool operator==(const ParallelDim&) const = default;
};

// The most shards one tensor may have: a million devices' worth. More is
// a malformed file, not a plan, and would make every consumer that keeps a
// record per shard (the interpreter, the runtime) allocate without bound.
inline constexpr int64_t kMaxShards = int64_t{1} << 20;

struct ParallelTensorShape {
  std::vector<ParallelDim> dims;
  int64_t replica = 1;
  DataType dtype = DataType::kFloat32;

  static ParallelTensorShape unpartitioned(std::span<const int64_t> sizes,
                                           DataType dtype = DataType::kFloat32);

  int rank() const { return static_cast<int>(dims.size()); }
  std::vector<int64_t> logical_shape() const;
  std::vector<int64_t> shard_shape() const;
  // One pipeline micro-slice of a shard (the shard itself when no
  // dimension is pipelined): what one task processes at a time.
  std::vector<int64_t> slice_shape() const;
  // How many micro-slices a shard is processed in (the product of the
  // pipeline degrees; 1 when nothing is pipelined).
  int64_t slices() const;
  int64_t num_elements() const;        // logical, one replica
  int64_t shard_elements() const;
  int64_t num_blocks() const;          // prod(d_j)
  int64_t num_shards() const { return replica * num_blocks(); }
  int64_t total_bytes() const;         // logical bytes, one replica
  bool is_unpartitioned() const;       // every degree, pipeline and replica 1

  // Canonical shard numbering.
  int64_t shard_index(int64_t slot, std::span<const int64_t> block) const;
  void shard_coords(int64_t index, int64_t& slot, std::vector<int64_t>& block) const;
  // Global offset of a shard's block in each dimension.
  std::vector<int64_t> block_offset(std::span<const int64_t> block) const;

  // Why this shape is inconsistent (a degree that does not divide its size,
  // a non-positive size, over 2^62 bytes or kMaxShards shards, ...), or
  // nothing when it is valid.
  std::optional<std::string> invalid_reason() const;

  // e.g. "f32[8/2, 16, 4|p2] r2": size/degree, |p for pipelined, r replica.
  std::string to_string() const;

  bool operator==(const ParallelTensorShape&) const = default;
};

}  // namespace pcgx
