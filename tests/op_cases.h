#pragma once
// One small case per way of calling each compute operator (attributes and
// input types), shared by the tests that must cover every operator: the
// parallel forms against the unpartitioned result (tests/pcg) and the
// runtime's promise of no allocation after the first step
// (tests/runtime_alloc). A new operator adds its cases here once.
#include <ostream>
#include <string>
#include <vector>

#include "pcgx/pcg/attributes.h"
#include "pcgx/pcg/operator.h"

namespace pcgx {

struct OpCase {
  std::string label;
  std::string op;
  Attributes attrs;
  std::vector<TensorType> inputs;
  std::vector<int64_t> index_range;  // per input, for int64 inputs
};

inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.label; }

inline TensorType f32(std::vector<int64_t> s) { return {std::move(s), DataType::kFloat32}; }
inline TensorType i64(std::vector<int64_t> s) { return {std::move(s), DataType::kInt64}; }

inline std::vector<OpCase> op_cases() {
  return {
      {"linear", "Linear", {}, {f32({4, 6}), f32({6, 4})}, {}},
      {"linear_relu", "Linear", {{"activation", std::string("relu")}}, {f32({4, 6}), f32({6, 4})}, {}},
      {"linear_bias_3d", "Linear", {{"use_bias", true}}, {f32({2, 4, 6}), f32({6, 4}), f32({4})}, {}},
      {"linear_bias_gelu", "Linear", {{"use_bias", true}, {"activation", std::string("gelu")}},
       {f32({4, 6}), f32({6, 4}), f32({4})}, {}},
      {"matmul", "MatMul", {}, {f32({2, 4, 6}), f32({6, 4})}, {}},
      {"batch_matmul", "BatchMatMul", {}, {f32({2, 4, 6}), f32({2, 6, 4})}, {}},
      {"ew_add", "EwAdd", {}, {f32({4, 6}), f32({4, 6})}, {}},
      {"ew_mul", "EwMul", {}, {f32({4, 6}), f32({4, 6})}, {}},
      {"scalar_mul", "ScalarMul", {{"scalar", 0.375}}, {f32({4, 6})}, {}},
      {"relu", "Relu", {}, {f32({4, 6})}, {}},
      {"gelu", "Gelu", {}, {f32({4, 6})}, {}},
      {"sigmoid", "Sigmoid", {}, {f32({4, 6})}, {}},
      {"tanh", "Tanh", {}, {f32({4, 6})}, {}},
      {"silu", "Silu", {}, {f32({4, 6})}, {}},
      {"reciprocal", "Reciprocal", {}, {f32({4, 6})}, {}},
      {"clip", "Clip", {{"min", -0.5}, {"max", 0.75}}, {f32({4, 6})}, {}},
      {"dropout", "Dropout", {{"rate", 0.5}, {"seed", int64_t{7}}}, {f32({4, 6})}, {}},
      {"softmax", "Softmax", {}, {f32({4, 6})}, {}},
      {"softmax_axis0", "Softmax", {{"axis", int64_t{0}}}, {f32({4, 6})}, {}},
      {"softmax_causal", "Softmax", {{"causal", true}}, {f32({2, 4, 4})}, {}},
      {"layer_norm", "LayerNorm", {}, {f32({4, 6}), f32({6}), f32({6})}, {}},
      {"rms_norm", "RMSNorm", {}, {f32({4, 2, 6}), f32({6})}, {}},
      {"batch_norm", "BatchNorm", {}, {f32({4, 4, 2, 2}), f32({4}), f32({4})}, {}},
      {"batch_norm_groups", "BatchNorm", {{"group", int64_t{2}}}, {f32({4, 4, 2, 2}), f32({4}), f32({4})}, {}},
      {"batch_sum", "BatchSum", {}, {f32({4, 4, 2, 2})}, {}},
      {"batch_squares", "BatchSquares", {}, {f32({4, 4, 2, 2}), f32({4})}, {}},
      {"batch_norm_apply", "BatchNormApply", {}, {f32({4, 4, 2, 2}), f32({4}), f32({4}), f32({4}), f32({4})}, {}},
      {"concat", "Concat", {{"axis", int64_t{1}}}, {f32({4, 2}), f32({4, 4})}, {}},
      {"split", "Split", {{"axis", int64_t{1}}, {"sizes", IntList{2, 4}}}, {f32({4, 6})}, {}},
      {"reshape_split_last", "Reshape", {{"shape", IntList{4, 2, 3}}}, {f32({4, 6})}, {}},
      {"reshape_merge", "Reshape", {{"shape", IntList{8, 6}}}, {f32({2, 4, 6})}, {}},
      {"transpose", "Transpose", {{"perm", IntList{2, 0, 1}}}, {f32({2, 4, 6})}, {}},
      {"embedding", "Embedding", {}, {i64({4, 2}), f32({8, 4})}, {8, 0}},
      {"embedding_bag", "EmbeddingBag", {}, {i64({4, 2}), f32({8, 4})}, {8, 0}},
      {"conv", "Conv2D", {{"pad_h", int64_t{1}}, {"pad_w", int64_t{1}}}, {f32({2, 4, 5, 5}), f32({4, 4, 3, 3})}, {}},
      {"conv_bias_relu_stride", "Conv2D",
       {{"use_bias", true}, {"activation", std::string("relu")}, {"stride_h", int64_t{2}}, {"stride_w", int64_t{2}}},
       {f32({2, 4, 5, 5}), f32({4, 4, 3, 3}), f32({4})}, {}},
      {"conv_groups", "Conv2D", {{"groups", int64_t{2}}}, {f32({2, 4, 4, 4}), f32({4, 2, 3, 3})}, {}},
      {"pool_max", "Pool2D", {{"kernel_h", int64_t{2}}, {"kernel_w", int64_t{2}}}, {f32({2, 4, 6, 6})}, {}},
      {"pool_avg_pad", "Pool2D",
       {{"kernel_h", int64_t{3}}, {"kernel_w", int64_t{3}}, {"stride_h", int64_t{1}}, {"stride_w", int64_t{1}},
        {"pad_h", int64_t{1}}, {"pad_w", int64_t{1}}, {"mode", std::string("avg")}},
       {f32({2, 4, 4, 4})}, {}},
      {"cross_entropy", "SoftmaxCrossEntropy", {}, {f32({4, 6}), i64({4})}, {0, 6}},
      {"class_logsumexp", "ClassLogSumExp", {{"blocks", int64_t{2}}}, {f32({4, 6})}, {}},
      {"cross_entropy_apply", "CrossEntropyApply", {}, {f32({4, 6}), i64({4}), f32({4, 2})}, {0, 6, 0}},
      {"mse", "MSELoss", {}, {f32({4, 6}), f32({4, 6})}, {}},
  };
}

}  // namespace pcgx
