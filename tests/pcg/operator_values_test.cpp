// Every operator against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "pcgx/pcg/error.h"
#include "test_util.h"

namespace pcgx {
namespace {

using testing::expect_close;
using testing::run_op;
using testing::tensor;

TEST(OperatorValues, LinearWithBiasAndRelu) {
  auto x = tensor({2, 2}, {1, 2, 3, 4});
  auto w = tensor({2, 3}, {1, 0, -1, 0, 1, -1});
  auto b = tensor({3}, {0.5, -10, 0});
  auto y = run_op("Linear", {{"use_bias", true}, {"activation", std::string("relu")}}, {x, w, b});
  expect_close(y[0], tensor({2, 3}, {1.5, 0, 0, 3.5, 0, 0}));
  auto z = run_op("Linear", {{"use_bias", true}}, {x, w, b});
  expect_close(z[0], tensor({2, 3}, {1.5, -8, -3, 3.5, -6, -7}));
}

TEST(OperatorValues, MatMulAndBatchMatMul) {
  auto a = tensor({1, 2, 2}, {1, 2, 3, 4});
  auto b = tensor({2, 2}, {5, 6, 7, 8});
  expect_close(run_op("MatMul", {}, {a, b})[0], tensor({1, 2, 2}, {19, 22, 43, 50}));
  auto c = tensor({2, 1, 2}, {1, 2, 3, 4});
  auto d = tensor({2, 2, 1}, {1, 1, 2, 0});
  expect_close(run_op("BatchMatMul", {}, {c, d})[0], tensor({2, 1, 1}, {3, 6}));
}

TEST(OperatorValues, Elementwise) {
  auto a = tensor({3}, {-1, 0, 2});
  auto b = tensor({3}, {4, 5, -6});
  expect_close(run_op("EwAdd", {}, {a, b})[0], tensor({3}, {3, 5, -4}));
  expect_close(run_op("EwMul", {}, {a, b})[0], tensor({3}, {-4, 0, -12}));
  expect_close(run_op("ScalarMul", {{"scalar", 0.5}}, {a})[0], tensor({3}, {-0.5, 0, 1}));
  expect_close(run_op("Relu", {}, {a})[0], tensor({3}, {0, 0, 2}));
  expect_close(run_op("Tanh", {}, {a})[0], tensor({3}, {std::tanh(-1.f), 0, std::tanh(2.f)}));
  expect_close(run_op("Sigmoid", {}, {a})[0], tensor({3}, {1 / (1 + std::exp(1.f)), 0.5, 1 / (1 + std::exp(-2.f))}));
  // gelu(x) = x * Phi(x): Phi(-1) = 0.158655, Phi(2) = 0.977250.
  expect_close(run_op("Gelu", {}, {a})[0], tensor({3}, {-0.158655f, 0, 1.954500f}));
  // silu(x) = x * sigmoid(x): sigmoid(-1) = 0.268941, sigmoid(2) = 0.880797.
  expect_close(run_op("Silu", {}, {a})[0], tensor({3}, {-0.268941f, 0, 1.761594f}));
  // ReLU6 and general bounds; a lower bound above the upper one is refused.
  expect_close(run_op("Clip", {{"min", 0.0}, {"max", 6.0}}, {a})[0], tensor({3}, {0, 0, 2}));
  expect_close(run_op("Clip", {{"min", -0.5}, {"max", 1.5}}, {a})[0], tensor({3}, {-0.5, 0, 1.5}));
  EXPECT_THROW(run_op("Clip", {{"min", 1.0}, {"max", 0.0}}, {a}), Error);
}

TEST(OperatorValues, DropoutKeepsOrZeroesAndScales) {
  auto x = tensor({1, 1000}, std::vector<float>(1000, 1.f));
  auto y = run_op("Dropout", {{"rate", 0.25}, {"seed", int64_t{3}}}, {x})[0];
  int kept = 0;
  for (float v : y.data) {
    ASSERT_TRUE(v == 0.f || std::fabs(v - 1.f / 0.75f) < 1e-6);
    kept += v != 0.f;
  }
  EXPECT_NEAR(kept, 750, 60);
  auto again = run_op("Dropout", {{"rate", 0.25}, {"seed", int64_t{3}}}, {x})[0];
  EXPECT_EQ(y.data, again.data);
}

TEST(OperatorValues, SoftmaxAndCausal) {
  auto x = tensor({1, 2}, {0, std::log(3.f)});
  expect_close(run_op("Softmax", {}, {x})[0], tensor({1, 2}, {0.25, 0.75}));
  auto s = tensor({2, 2}, {1, 1, 1, 1});
  expect_close(run_op("Softmax", {{"causal", true}}, {s})[0], tensor({2, 2}, {1, 0, 0.5, 0.5}));
  auto c = tensor({2, 1}, {0, std::log(3.f)});
  expect_close(run_op("Softmax", {{"axis", int64_t{0}}}, {c})[0], tensor({2, 1}, {0.25, 0.75}));
}

TEST(OperatorValues, LayerNormAndBatchNorm) {
  auto x = tensor({1, 2}, {1, 3});
  auto g = tensor({2}, {2, 1});
  auto b = tensor({2}, {0, 10});
  // mean 2, var 1: normalized -1, 1 (eps 0 for exactness).
  expect_close(run_op("LayerNorm", {{"eps", 0.0}}, {x, g, b})[0], tensor({1, 2}, {-2, 11}));
  auto bx = tensor({2, 1, 1, 1}, {1, 3});
  expect_close(run_op("BatchNorm", {{"eps", 0.0}}, {bx, tensor({1}, {1}), tensor({1}, {0})})[0],
               tensor({2, 1, 1, 1}, {-1, 1}));
  // RMSNorm of (3, 4): mean square 12.5, so x / sqrt(12.5) * gamma.
  auto rx = tensor({1, 2}, {3, 4});
  const float r = 1.f / std::sqrt(12.5f);
  expect_close(run_op("RMSNorm", {{"eps", 0.0}}, {rx, tensor({2}, {2, 1})})[0], tensor({1, 2}, {6 * r, 4 * r}));
}

TEST(OperatorValues, ConcatSplitReshapeTranspose) {
  auto a = tensor({2, 1}, {1, 2});
  auto b = tensor({2, 2}, {3, 4, 5, 6});
  auto c = run_op("Concat", {{"axis", int64_t{1}}}, {a, b})[0];
  expect_close(c, tensor({2, 3}, {1, 3, 4, 2, 5, 6}));
  auto parts = run_op("Split", {{"axis", int64_t{1}}, {"sizes", IntList{1, 2}}}, {c});
  expect_close(parts[0], a);
  expect_close(parts[1], b);
  expect_close(run_op("Reshape", {{"shape", IntList{3, 2}}}, {c})[0], tensor({3, 2}, {1, 3, 4, 2, 5, 6}));
  expect_close(run_op("Transpose", {{"perm", IntList{1, 0}}}, {c})[0], tensor({3, 2}, {1, 2, 3, 5, 4, 6}));
}

TEST(OperatorValues, EmbeddingAndBag) {
  auto idx = tensor({2, 2}, {2, 0, 1, 1});
  auto table = tensor({3, 2}, {1, 2, 3, 4, 5, 6});
  const std::vector<DataType> dt{DataType::kInt64, DataType::kFloat32};
  expect_close(run_op("Embedding", {}, {idx, table}, dt)[0], tensor({2, 2, 2}, {5, 6, 1, 2, 3, 4, 3, 4}));
  expect_close(run_op("EmbeddingBag", {}, {idx, table}, dt)[0], tensor({2, 2}, {6, 8, 6, 8}));
}

TEST(OperatorValues, ConvGroupsAndPadding) {
  // 1x1x3x3 input, 3x3 kernel of ones with padding 1: each output sums its neighbourhood.
  auto x = tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto w = tensor({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  auto y = run_op("Conv2D", {{"pad_h", int64_t{1}}, {"pad_w", int64_t{1}}}, {x, w})[0];
  expect_close(y, tensor({1, 1, 3, 3}, {12, 21, 16, 27, 45, 33, 24, 39, 28}));
  // Two groups of one channel each: channel c only sees input channel c.
  auto x2 = tensor({1, 2, 1, 1}, {2, 3});
  auto w2 = tensor({2, 1, 1, 1}, {10, 100});
  expect_close(run_op("Conv2D", {{"groups", int64_t{2}}}, {x2, w2})[0], tensor({1, 2, 1, 1}, {20, 300}));
  auto s = run_op("Conv2D", {{"stride_h", int64_t{2}}, {"stride_w", int64_t{2}}}, {x, tensor({1, 1, 1, 1}, {1})})[0];
  expect_close(s, tensor({1, 1, 2, 2}, {1, 3, 7, 9}));
}

TEST(OperatorValues, Pooling) {
  auto x = tensor({1, 1, 2, 4}, {1, 5, 2, 0, 3, 4, 8, 1});
  expect_close(run_op("Pool2D", {{"kernel_h", int64_t{2}}, {"kernel_w", int64_t{2}}}, {x})[0],
               tensor({1, 1, 1, 2}, {5, 8}));
  expect_close(run_op("Pool2D", {{"kernel_h", int64_t{2}}, {"kernel_w", int64_t{2}}, {"mode", std::string("avg")}}, {x})[0],
               tensor({1, 1, 1, 2}, {3.25, 2.75}));
}

TEST(OperatorValues, Losses) {
  auto logits = tensor({2, 2}, {0, 0, std::log(3.f), 0});
  auto labels = tensor({2}, {1, 0});
  // Row 0: -log(1/2); row 1: -log(3/4); mean of the two.
  const float want = 0.5f * (std::log(2.f) - std::log(0.75f));
  expect_close(run_op("SoftmaxCrossEntropy", {}, {logits, labels}, {DataType::kFloat32, DataType::kInt64})[0],
               tensor({}, {want}));
  expect_close(run_op("MSELoss", {}, {tensor({2}, {1, 2}), tensor({2}, {0, 4})})[0], tensor({}, {2.5}));
}

}  // namespace
}  // namespace pcgx

namespace pcgx {
namespace {

// The parallel operators move shards exactly as the docs/design.md table says.
ShardedTensor<float> run_parallel(const std::string& op, const Attributes& given, const ShardedTensor<float>& x) {
  const OpDef& def = OpRegistry::global().get(op);
  const Attributes a = normalize_attributes(def.attrs, given, op);
  const ParallelTensorShape in = x.shape;
  const auto shapes = infer_output_shapes(def, a, std::span(&in, 1), op);
  const ShardedTensor<float>* p = &x;
  return evaluate_op<float>(def, a, std::span(&p, 1), shapes)[0];
}

TEST(OperatorValues, ParallelOperatorsMoveShardsAsSpecified) {
  auto x = testing::tensor({4}, {1, 2, 3, 4});
  auto whole = distribute(x, ParallelTensorShape::unpartitioned(x.shape));
  auto split = run_parallel("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, whole);
  ASSERT_EQ(split.shards.size(), 2u);
  EXPECT_EQ(split.shards[0].data, (std::vector<float>{1, 2}));
  EXPECT_EQ(split.shards[1].data, (std::vector<float>{3, 4}));
  // Shard i splits into i*k .. i*k+k-1.
  auto finer = run_parallel("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, split);
  ASSERT_EQ(finer.shards.size(), 4u);
  EXPECT_EQ(finer.shards[2].data, (std::vector<float>{3}));
  auto rep = run_parallel("Replicate", {{"degree", int64_t{2}}}, split);
  ASSERT_EQ(rep.shards.size(), 4u);
  EXPECT_EQ(rep.shards[2].data, (std::vector<float>{1, 2}));  // slot 1, block 0
  rep.shards[2].data = {10, 20};
  auto red = run_parallel("Reduce", {{"degree", int64_t{2}}}, rep);
  ASSERT_EQ(red.shards.size(), 2u);
  EXPECT_EQ(red.shards[0].data, (std::vector<float>{11, 22}));
  EXPECT_EQ(red.shards[1].data, (std::vector<float>{6, 8}));
  auto all = run_parallel("AllReduce", {{"degree", int64_t{2}}}, rep);
  ASSERT_EQ(all.shards.size(), 4u);
  EXPECT_EQ(all.shards[2].data, (std::vector<float>{11, 22}));
  auto back = run_parallel("Combine", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, split);
  EXPECT_EQ(back.shards[0].data, x.data);
}

}  // namespace
}  // namespace pcgx
