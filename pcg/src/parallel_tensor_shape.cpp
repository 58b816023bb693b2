#include "pcgx/pcg/parallel_tensor_shape.h"

#include <sstream>

namespace pcgx {

std::string_view to_string(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "float32";
    case DataType::kInt64: return "int64";
  }
  return "?";
}

std::optional<DataType> parse_data_type(std::string_view s) {
  if (s == "float32" || s == "f32") return DataType::kFloat32;
  if (s == "int64" || s == "i64") return DataType::kInt64;
  return std::nullopt;
}

int64_t byte_size(DataType t) { return t == DataType::kInt64 ? 8 : 4; }

ParallelTensorShape ParallelTensorShape::unpartitioned(std::span<const int64_t> sizes, DataType dtype) {
  ParallelTensorShape s;
  s.dtype = dtype;
  for (int64_t n : sizes) s.dims.push_back({n, 1, 1});
  return s;
}

std::vector<int64_t> ParallelTensorShape::logical_shape() const {
  std::vector<int64_t> v;
  v.reserve(dims.size());
  for (const auto& d : dims) v.push_back(d.size);
  return v;
}

std::vector<int64_t> ParallelTensorShape::shard_shape() const {
  std::vector<int64_t> v;
  v.reserve(dims.size());
  for (const auto& d : dims) v.push_back(d.size / d.degree);
  return v;
}

int64_t ParallelTensorShape::slices() const {
  int64_t p = 1;
  for (const auto& d : dims) p *= d.pipeline;
  return p;
}

std::vector<int64_t> ParallelTensorShape::slice_shape() const {
  std::vector<int64_t> v;
  v.reserve(dims.size());
  for (const auto& d : dims) v.push_back(d.size / d.degree / d.pipeline);
  return v;
}

int64_t ParallelTensorShape::num_elements() const {
  int64_t n = 1;
  for (const auto& d : dims) n *= d.size;
  return n;
}

int64_t ParallelTensorShape::shard_elements() const {
  int64_t n = 1;
  for (const auto& d : dims) n *= d.size / d.degree;
  return n;
}

int64_t ParallelTensorShape::num_blocks() const {
  int64_t n = 1;
  for (const auto& d : dims) n *= d.degree;
  return n;
}

int64_t ParallelTensorShape::total_bytes() const { return num_elements() * byte_size(dtype); }

bool ParallelTensorShape::is_unpartitioned() const {
  if (replica != 1) return false;
  for (const auto& d : dims)
    if (d.degree != 1 || d.pipeline != 1) return false;
  return true;
}

int64_t ParallelTensorShape::shard_index(int64_t slot, std::span<const int64_t> block) const {
  int64_t idx = slot;
  for (size_t j = 0; j < dims.size(); ++j) idx = idx * dims[j].degree + block[j];
  return idx;
}

void ParallelTensorShape::shard_coords(int64_t index, int64_t& slot, std::vector<int64_t>& block) const {
  block.resize(dims.size());
  for (size_t j = dims.size(); j-- > 0;) {
    block[j] = index % dims[j].degree;
    index /= dims[j].degree;
  }
  slot = index;
}

std::vector<int64_t> ParallelTensorShape::block_offset(std::span<const int64_t> block) const {
  std::vector<int64_t> off(dims.size());
  for (size_t j = 0; j < dims.size(); ++j) off[j] = block[j] * (dims[j].size / dims[j].degree);
  return off;
}

namespace {
std::string too_large() { return "the tensor is too large (over 2^62 bytes or 2^20 shards)"; }
}  // namespace

std::optional<std::string> ParallelTensorShape::invalid_reason() const {
  if (replica < 1) return "replica degree " + std::to_string(replica) + " must be at least 1";
  for (size_t j = 0; j < dims.size(); ++j) {
    const auto& d = dims[j];
    if (d.size >= 1 && d.degree >= 1 && d.pipeline >= 1 && d.size % d.degree == 0 && (d.size / d.degree) % d.pipeline == 0)
      continue;  // valid: no message to build
    const std::string where = "dimension " + std::to_string(j);
    if (d.size < 1) return where + " has size " + std::to_string(d.size) + " (must be positive)";
    if (d.degree < 1) return where + " has degree " + std::to_string(d.degree) + " (must be positive)";
    if (d.pipeline < 1) return where + " has pipeline degree " + std::to_string(d.pipeline);
    if (d.size % d.degree != 0)
      return where + ": degree " + std::to_string(d.degree) + " does not divide size " + std::to_string(d.size);
    if ((d.size / d.degree) % d.pipeline != 0)
      return where + ": pipeline degree " + std::to_string(d.pipeline) + " does not divide block size " +
             std::to_string(d.size / d.degree);
  }
  // Counts every consumer computes in 64 bits (bytes of all copies) must
  // not wrap; shard numbers are bounded too (kMaxShards).
  int64_t bytes = byte_size(dtype), shards = replica;
  for (const auto& d : dims)
    if (__builtin_mul_overflow(bytes, d.size, &bytes) || __builtin_mul_overflow(shards, d.degree, &shards))
      return too_large();
  if (__builtin_mul_overflow(bytes, replica, &bytes) || bytes > (int64_t{1} << 62) || shards > kMaxShards) return too_large();
  return std::nullopt;
}

std::string ParallelTensorShape::to_string() const {
  std::ostringstream os;
  os << (dtype == DataType::kInt64 ? "i64" : "f32") << '[';
  for (size_t j = 0; j < dims.size(); ++j) {
    if (j) os << ", ";
    os << dims[j].size;
    if (dims[j].degree != 1) os << '/' << dims[j].degree;
    if (dims[j].pipeline != 1) os << "|p" << dims[j].pipeline;
  }
  os << ']';
  if (replica != 1) os << " r" << replica;
  return os.str();
}

}  // namespace pcgx
