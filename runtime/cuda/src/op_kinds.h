#pragma once
// How the CUDA backend reads an operator (cuda_backend.cpp and the files
// beside it): which of its kernels runs it, and the geometry its kernels
// take from the operator's attributes and shard shapes.
#include <array>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "cudnn_conv.h"
#include "kernels.h"
#include "vision_kernels.h"
#include "pcgx/pcg/operator.h"
#include "pcgx/runtime/backend.h"

namespace pcgx::runtime::cuda {

// The operators with kernels of this backend; the rest run on the host.
enum class Kind : uint8_t {
  kHost, kEwAdd, kEwMul, kScalarMul, kRelu, kGelu, kSigmoid, kTanh, kDropout, kLinear, kMatMul, kBatchMatMul,
  kSoftmax, kLayerNorm, kMSELoss, kCrossEntropy, kReshape, kTranspose, kConcat, kSplit, kEmbedding, kEmbeddingBag,
  kConv2D, kPool2D, kBatchNorm, kBatchSum, kBatchSquares, kBatchNormApply
};

inline Kind kind_of(const OpDef& op) {
  static const std::pair<const char*, Kind> kinds[] = {
      {"EwAdd", Kind::kEwAdd}, {"EwMul", Kind::kEwMul},   {"ScalarMul", Kind::kScalarMul}, {"Relu", Kind::kRelu},
      {"Gelu", Kind::kGelu},   {"Sigmoid", Kind::kSigmoid}, {"Tanh", Kind::kTanh},         {"Dropout", Kind::kDropout},
      {"Linear", Kind::kLinear}, {"MatMul", Kind::kMatMul}, {"BatchMatMul", Kind::kBatchMatMul},
      {"Softmax", Kind::kSoftmax}, {"LayerNorm", Kind::kLayerNorm}, {"MSELoss", Kind::kMSELoss},
      {"SoftmaxCrossEntropy", Kind::kCrossEntropy}, {"Reshape", Kind::kReshape}, {"Transpose", Kind::kTranspose},
      {"Concat", Kind::kConcat}, {"Split", Kind::kSplit}, {"Embedding", Kind::kEmbedding}, {"EmbeddingBag", Kind::kEmbeddingBag},
#ifdef PCGX_HAVE_CUDNN
      {"Conv2D", Kind::kConv2D},
#endif
      {"Pool2D", Kind::kPool2D}, {"BatchNorm", Kind::kBatchNorm}, {"BatchSum", Kind::kBatchSum},
      {"BatchSquares", Kind::kBatchSquares}, {"BatchNormApply", Kind::kBatchNormApply}};
  for (const auto& [name, k] : kinds)
    if (op.name == name) return k;
  return Kind::kHost;
}

inline Act act_of(Kind k) {
  switch (k) {
    case Kind::kRelu: return Act::kRelu;
    case Kind::kGelu: return Act::kGelu;
    case Kind::kSigmoid: return Act::kSigmoid;
    case Kind::kTanh: return Act::kTanh;
    default: return Act::kNone;
  }
}

// Linear's "activation" attribute (the registry's names).
inline Act act_named(const std::string& a) {
  if (a == "relu") return Act::kRelu;
  if (a == "gelu") return Act::kGelu;
  if (a == "sigmoid") return Act::kSigmoid;
  if (a == "tanh") return Act::kTanh;
  return Act::kNone;
}

// Softmax's geometry (pcg/src/ops/norm_ops.cpp): the axis's length, the
// elements after it, the rows before it.
struct Axis {
  int64_t outer = 1, len = 1, inner = 1;
  size_t axis = 0;
};
inline Axis softmax_axis(const Attributes& a, const std::vector<int64_t>& shape) {
  const int64_t ax = a.get_int("axis");
  Axis r;
  r.axis = static_cast<size_t>(ax < 0 ? ax + static_cast<int64_t>(shape.size()) : ax);
  r.len = shape[r.axis];
  for (size_t d = r.axis + 1; d < shape.size(); ++d) r.inner *= shape[d];
  r.outer = product(shape) / (r.len * r.inner);
  return r;
}

// Transpose's: y's shape and, per y dimension, x's stride of perm[d].
inline PermuteGeometry permute_geometry(const std::vector<int64_t>& x, const std::vector<int64_t>& y, const IntList& perm) {
  PermuteGeometry g;
  g.rank = static_cast<int>(y.size());
  if (g.rank > kMaxRank) throw Error("cuda: Transpose of rank " + std::to_string(g.rank) + " is above " + std::to_string(kMaxRank));
  std::vector<int64_t> xs(x.size(), 1);
  for (size_t d = x.size(); d-- > 1;) xs[d - 1] = xs[d] * x[d];
  g.numel = 1;
  for (size_t d = 0; d < y.size(); ++d) g.extent[d] = y[d], g.x_strides[d] = xs[static_cast<size_t>(perm[d])], g.numel *= y[d];
  return g;
}

// Concat and Split along a data axis: piece i of the whole (Concat's
// output, Split's input) starts at the sum of the earlier pieces' extents.
// `f(piece, offset)` per piece.
template <class F>
void along_axis(const Attributes& a, std::span<const Buffer* const> pieces, const std::deque<std::vector<int64_t>>& shapes, F&& f) {
  const auto axis = static_cast<size_t>(a.get_int("axis"));
  std::array<int64_t, kMaxRank> offset{};
  for (const Buffer* p : pieces) {
    const auto& ps = shapes[static_cast<size_t>(p->id)];
    f(*p, std::span<const int64_t>(offset.data(), ps.size()));
    offset[axis] += ps[axis];
  }
}

// Conv2D's geometry from its shards' shapes and attributes.
inline ConvGeometry conv_geometry(const Attributes& a, const std::vector<int64_t>& x, const std::vector<int64_t>& w, const std::vector<int64_t>& y) {
  ConvGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.cg = w[1], g.kh = w[2], g.kw = w[3];
  g.ho = y[2], g.wo = y[3];
  g.sh = a.get_int("stride_h"), g.sw = a.get_int("stride_w"), g.ph = a.get_int("pad_h"), g.pw = a.get_int("pad_w");
  return g;
}

inline PoolGeometry pool_geometry(const Attributes& a, const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
  PoolGeometry g;
  g.planes = x[0] * x[1], g.h = x[2], g.w = x[3], g.ho = y[2], g.wo = y[3];
  g.kh = a.get_int("kernel_h"), g.kw = a.get_int("kernel_w");
  g.sh = a.get_int("stride_h") ? a.get_int("stride_h") : g.kh;
  g.sw = a.get_int("stride_w") ? a.get_int("stride_w") : g.kw;
  g.ph = a.get_int("pad_h"), g.pw = a.get_int("pad_w");
  g.max = a.get_string("mode") == "max";
  return g;
}

// x[N, C, S...] of a BatchNorm-family shard: statistics per `group`
// samples (BatchNorm's attribute; the whole shard for the others).
inline ChannelGeometry channel_geometry(const std::vector<int64_t>& x, int64_t group) {
  ChannelGeometry g;
  g.n = x[0], g.c = x[1], g.s = 1;
  for (size_t d = 2; d < x.size(); ++d) g.s *= x[d];
  g.group = group > 0 ? group : std::max<int64_t>(g.n, 1);  // an empty shard: no sets, no division by zero
  return g;
}

// The elements per channel of the whole (logical) x a statistic spans
// (batch_norm_ops.cpp's statistics_count).
inline int64_t statistics_count(const TaskContext& ctx) {
  const auto& dims = ctx.input_shapes[0].dims;
  int64_t n = dims[0].size;
  for (size_t d = 2; d < dims.size(); ++d) n *= dims[d].size;
  return n;
}

}  // namespace pcgx::runtime::cuda
