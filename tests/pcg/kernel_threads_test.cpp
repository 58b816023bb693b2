// Kernel threads (kernel_threads.h): the float kernels cut their work by
// shape alone, so any thread count gives the same bits, and the tiled GEMM
// still computes the product.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "pcgx/pcg/gradients.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/kernel_threads.h"
#include "pcgx/pcg/zoo.h"
#include "test_util.h"

namespace pcgx {
namespace {

struct Threads {
  explicit Threads(int n) { set_kernel_threads(n); }
  ~Threads() { set_kernel_threads(1); }
};

// Every value and every gradient of g (output 0 as the loss), flattened.
std::vector<float> forward_and_backward(const Graph& g, uint64_t seed) {
  const SourceFn<float> src = random_sources<float>(seed);
  const auto values = evaluate<float>(g, src);
  std::vector<ShardedTensor<float>> seeds{loss_seed(g.shape(g.outputs().at(0)))};
  for (size_t o = 1; o < g.outputs().size(); ++o) seeds.push_back(zeros_like(g.shape(g.outputs()[o])));
  const auto grads = evaluate_gradients(g, values, seeds);
  std::vector<float> all;
  for (const auto* side : {&values, &grads})
    for (const auto& node : *side)
      for (const auto& out : node)
        for (const auto& shard : out.shards) all.insert(all.end(), shard.data.begin(), shard.data.end());
  return all;
}

void expect_same_bits_on_any_thread_count(const Graph& g) {
  const std::vector<float> one = forward_and_backward(g, 7);
  ASSERT_GT(one.size(), 100000u) << "large enough to be cut into pieces";
  for (int threads : {2, 3, 8}) {
    Threads t(threads);
    const std::vector<float> many = forward_and_backward(g, 7);
    ASSERT_EQ(many.size(), one.size());
    size_t differ = 0;
    for (size_t i = 0; i < one.size(); ++i) differ += std::memcmp(&one[i], &many[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << g.name() << " with " << threads << " threads";
  }
}

TEST(KernelThreads, EncoderBlockGivesTheSameBits) {
  // 256 tokens: the feed-forward products are tiled, softmax and gelu run in pieces.
  expect_same_bits_on_any_thread_count(encoder_block_regression("block", 4, 64, 128, 4, 512));
}

TEST(KernelThreads, WideMlpGivesTheSameBits) {
  expect_same_bits_on_any_thread_count(build_model("mlp", {{"batch", 96}, {"hidden", 640}, {"layers", 3}}));
}

TEST(KernelThreads, RejectsZero) {
  EXPECT_THROW(set_kernel_threads(0), std::invalid_argument);
  EXPECT_EQ(kernel_threads(), 1);
}

// The tiled product against a double-precision one, at shapes that leave
// partial tiles in both directions, on one thread and on three.
TEST(KernelThreads, TiledProductIsTheProduct) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{130, 700, 333}, {517, 64, 1000}, {64, 2048, 129}}) {
    Tensor<float> x({m, k}), w({k, n});
    for (auto& v : x.data) v = u(rng);
    for (auto& v : w.data) v = u(rng);
    Tensor<float> expect({m, n});
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += double(x.data[size_t(i * k + p)]) * w.data[size_t(p * n + j)];
        expect.data[size_t(i * n + j)] = static_cast<float>(s);
      }
    for (int threads : {1, 3}) {
      Threads t(threads);
      testing::expect_close(testing::run_op("MatMul", {}, {x, w})[0], expect, 1e-4, 1e-4);
    }
  }
}

}  // namespace
}  // namespace pcgx
