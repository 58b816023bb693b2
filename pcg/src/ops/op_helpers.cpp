#include "pcgx/pcg/ops/op_helpers.h"

#include "pcgx/pcg/ops/numeric.h"

namespace pcgx::ops {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

void require_float(const TensorType& t, const std::string& what) {
  PCGX_REQUIRE(t.dtype == DataType::kFloat32, what + " must be float32, got " + std::string(to_string(t.dtype)));
}

void require_rank(const TensorType& t, int rank, const std::string& what) {
  PCGX_REQUIRE(static_cast<int>(t.shape.size()) == rank,
          what + " must have rank " + std::to_string(rank) + ", got shape " + shape_str(t.shape));
}

void require_min_rank(const TensorType& t, int rank, const std::string& what) {
  PCGX_REQUIRE(static_cast<int>(t.shape.size()) >= rank,
          what + " must have rank at least " + std::to_string(rank) + ", got shape " + shape_str(t.shape));
}

void require_same_shape(const TensorType& a, const TensorType& b, const std::string& what) {
  PCGX_REQUIRE(a.shape == b.shape && a.dtype == b.dtype,
          what + ": shapes differ: " + shape_str(a.shape) + " vs " + shape_str(b.shape));
}

std::vector<ParallelKind> elementwise_kinds(size_t rank, size_t inputs) {
  std::vector<ParallelKind> kinds;
  for (size_t d = 0; d < rank; ++d)
    kinds.push_back({"dim" + std::to_string(d), std::vector<int>(inputs, static_cast<int>(d)), {static_cast<int>(d)}, 0});
  return kinds;
}

}  // namespace pcgx::ops

namespace pcgx::ops {

BackwardReads fused_activation_reads(const Attributes& a) {
  const Act act = activation_kind(a.get_string("activation"));
  if (act == Act::kNone) return {0b011, 0};
  if (derivative_needs_input(act)) return {0b111, 0};  // z = x W + b again
  return {0b011, 1};
}

}  // namespace pcgx::ops
