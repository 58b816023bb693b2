// source_layout.h's weight_copy and parameter_copies: which layouts hold a
// Weight's values, and which block of it each shard holds, checked against
// the reference interpreter's shards; a transposed copy split the same way
// in the Weight's coordinates is the same parameter, split another way or
// computed (ScalarMul, Reshape) it is not.
#include <gtest/gtest.h>

#include <algorithm>

#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/zoo.h"

namespace pcgx {
namespace {

Attributes dim_degree(int64_t dim, int64_t k) { return {{"dim", dim}, {"degree", k}}; }
Attributes degree(int64_t k) { return {{"degree", k}}; }

struct Layouts {
  Graph g;
  TensorRef w, rows, rows_t, cols_t, scaled, reshaped;
  TensorRef w3, rotated;  // V[2, 3, 4] read as [4, 2, 3] (perm {2, 0, 1}, not its own inverse), its last dimension split
};

// W[6, 4] read through five layouts, each by a Relu.
Layouts layouts() {
  GraphBuilder b("copies");
  Layouts l;
  l.w = b.weight("W", {6, 4});
  l.rows = b.op("Replicate", degree(2), {b.op("Repartition", dim_degree(0, 3), {l.w})});
  // W's rows split by 3, transposed: the same blocks as `rows`.
  l.rows_t = b.op("Replicate", degree(2), {b.op("Repartition", dim_degree(1, 3), {b.transpose(l.w, {1, 0})})});
  // Transposed and split on W's columns: other blocks.
  l.cols_t = b.op("Replicate", degree(2), {b.op("Repartition", dim_degree(0, 2), {b.transpose(l.w, {1, 0})})});
  l.scaled = b.op("Replicate", degree(2), {b.scalar_mul(l.w, 2.0)});
  l.reshaped = b.op("Replicate", degree(2), {b.reshape(l.w, {4, 6})});
  l.w3 = b.weight("V", {2, 3, 4});
  l.rotated = b.op("Replicate", degree(2), {b.op("Repartition", dim_degree(0, 2), {b.transpose(l.w3, {2, 0, 1})})});
  for (TensorRef t : {l.rows, l.rows_t, l.cols_t, l.scaled, l.reshaped, l.rotated}) b.unary("Relu", t);
  l.g = b.finish();
  return l;
}

std::vector<float> sorted(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(WeightCopy, EachShardHoldsTheBlockOfTheWeightItNames) {
  const Layouts l = layouts();
  const GraphValues<float> values = evaluate(l.g, random_sources<float>(7));
  for (TensorRef t : {l.rows, l.rows_t, l.cols_t, l.rotated}) {
    const auto c = weight_copy(l.g, t);
    ASSERT_TRUE(c.has_value());
    const TensorRef source = t == l.rotated ? l.w3 : l.w;
    const Tensor<float>& w = values[static_cast<size_t>(source.node)][0].shards[0];
    EXPECT_EQ(c->weight, source.node);
    EXPECT_EQ(c->replica, 2);
    const ParallelTensorShape& s = l.g.shape(t);
    ParallelTensorShape in_w = l.g.shape(source);
    for (size_t j = 0; j < in_w.dims.size(); ++j) in_w.dims[j].degree = c->degrees[j];
    const ShardedTensor<float>& held = values[static_cast<size_t>(t.node)][0];
    for (int64_t shard = 0; shard < s.num_shards(); ++shard) {
      int64_t slot = 0;
      std::vector<int64_t> block;
      in_w.shard_coords(c->weight_block(s, shard), slot, block);
      const Tensor<float> expected = slice_block(w, in_w.block_offset(block), in_w.shard_shape());
      // (Transposed, the same values in another order; the draws are distinct.)
      EXPECT_EQ(sorted(held.shards[static_cast<size_t>(shard)].data), sorted(expected.data)) << "shard " << shard;
    }
  }
}

TEST(WeightCopy, ATransposedCopySplitAlikeIsTheSameParameter) {
  const Layouts l = layouts();
  const auto rows = weight_copy(l.g, l.rows), rows_t = weight_copy(l.g, l.rows_t), cols_t = weight_copy(l.g, l.cols_t);
  ASSERT_TRUE(rows && rows_t && cols_t);
  EXPECT_EQ(rows->degrees, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(cols_t->degrees, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(weight_copy(l.g, l.rotated)->degrees, (std::vector<int64_t>{1, 1, 2}));
  EXPECT_TRUE(rows->same_parameter(*rows_t));
  EXPECT_FALSE(rows->same_parameter(*cols_t));
  // Computed layouts hold other values.
  EXPECT_FALSE(weight_copy(l.g, l.scaled).has_value());
  EXPECT_FALSE(weight_copy(l.g, l.reshaped).has_value());
  const SourceLayouts src = source_layouts(l.g);
  const std::map<TensorRef, TensorRef> copies = parameter_copies(l.g, src);
  ASSERT_EQ(copies.size(), 1U);
  EXPECT_EQ(copies.begin()->first, l.rows_t);
  EXPECT_EQ(copies.begin()->second, l.rows);
}

// GPT ties its LM head to the word embedding table, which the embedding
// reads as it is and the head transposed: one parameter. LLaMA's head is
// a weight of its own.
TEST(WeightCopy, GptsTiedHeadIsACopyOfItsEmbeddingTable) {
  const Graph gpt = build_model("gpt-tiny", {});
  const std::map<TensorRef, TensorRef> copies = parameter_copies(gpt, source_layouts(gpt));
  ASSERT_EQ(copies.size(), 1U);
  EXPECT_TRUE(gpt.node(copies.begin()->first.node).op->permutes != nullptr);
  EXPECT_TRUE(gpt.node(copies.begin()->second.node).op->is_weight);
  const Graph llama = build_model("llama-tiny", {});
  EXPECT_TRUE(parameter_copies(llama, source_layouts(llama)).empty());
}

}  // namespace
}  // namespace pcgx
