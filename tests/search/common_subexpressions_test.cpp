// Common-subexpression merging: duplicates go, values stay, sources and
// distinct seeds are never merged.
#include <gtest/gtest.h>

#include <algorithm>

#include "pcgx/search/common_subexpressions.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

size_t count(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const Node& x : g.nodes()) n += x.op->name == op;
  return n;
}

TEST(CommonSubexpressions, MergesRepeatedParallelOperatorsAndKeepsValues) {
  // Two Linears each behind its own Replicate(x): one Replicate remains.
  Graph g("dup");
  const NodeId x = g.add("Input", {{"shape", IntList{8, 6}}}, {}, "x");
  const NodeId a = g.add("Weight", {{"shape", IntList{6, 4}}}, {}, "a");
  const NodeId b = g.add("Weight", {{"shape", IntList{6, 4}}}, {}, "b");
  const NodeId ra = g.add("Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {{a, 0}});
  const NodeId rb = g.add("Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {{b, 0}});
  const NodeId x1 = g.add("Replicate", {{"degree", int64_t{2}}}, {{x, 0}});
  const NodeId x2 = g.add("Replicate", {{"degree", int64_t{2}}}, {{x, 0}});
  const NodeId ya = g.add("Linear", {}, {{x1, 0}, {ra, 0}});
  const NodeId yb = g.add("Linear", {}, {{x2, 0}, {rb, 0}});
  const NodeId s = g.add("EwAdd", {}, {{ya, 0}, {yb, 0}});
  g.add_output({g.add("Combine", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {{s, 0}}), 0});

  const auto merged = merge_common_subexpressions(g);
  ASSERT_TRUE(merged.has_value());
  EXPECT_EQ(count(*merged, "Replicate"), 1u);
  EXPECT_EQ(count(*merged, "Repartition"), 2u);  // different inputs: both stay
  EXPECT_EQ(count(*merged, "Weight"), 2u);
  EXPECT_EQ(merged->size(), g.size() - 1);
  EXPECT_LT(max_difference(g, *merged), 1e-6);
  EXPECT_FALSE(merge_common_subexpressions(*merged).has_value());
}

TEST(CommonSubexpressions, MergesChainsAndKeepsSourcesAndSeedsApart) {
  Graph g("chain");
  const NodeId x = g.add("Input", {{"shape", IntList{4, 4}}}, {}, "x");
  const NodeId y = g.add("Input", {{"shape", IntList{4, 4}}}, {}, "y");  // same shape: not a duplicate
  // relu(x) twice, and a sigmoid of each copy: both levels merge.
  const NodeId r1 = g.add("Relu", {}, {{x, 0}});
  const NodeId r2 = g.add("Relu", {}, {{x, 0}});
  const NodeId s1 = g.add("Sigmoid", {}, {{r1, 0}});
  const NodeId s2 = g.add("Sigmoid", {}, {{r2, 0}});
  const NodeId ry = g.add("Relu", {}, {{y, 0}});
  // Two dropouts of one tensor with different seeds draw different masks.
  const NodeId d1 = g.add("Dropout", {{"rate", 0.5}, {"seed", int64_t{1}}}, {{x, 0}});
  const NodeId d2 = g.add("Dropout", {{"rate", 0.5}, {"seed", int64_t{2}}}, {{x, 0}});
  g.add_output({s1, 0});
  g.add_output({s2, 0});
  g.add_output({ry, 0});
  g.add_output({d1, 0});
  g.add_output({d2, 0});
  const auto merged = merge_common_subexpressions(g);
  ASSERT_TRUE(merged.has_value());
  EXPECT_EQ(count(*merged, "Relu"), 2u);
  EXPECT_EQ(count(*merged, "Sigmoid"), 1u);
  EXPECT_EQ(count(*merged, "Dropout"), 2u);
  EXPECT_EQ(count(*merged, "Input"), 2u);
  ASSERT_EQ(merged->outputs().size(), 5u);
  EXPECT_EQ(merged->outputs()[0], merged->outputs()[1]);
  EXPECT_LT(max_difference(g, *merged), 1e-6);
}

// A residual stream gathered for one reader and split again for another
// (BERT's attention reads the whole of the previous LayerNorm's split
// output, its residual sum the split one): the second reader reads the
// split tensor itself, and the gather stays for the first. Either way
// round: a split joined again is the split's input.
TEST(CommonSubexpressions, ARoundTripOfLayoutChangesReadsWhereItStarted) {
  Graph g("trip");
  const NodeId x = g.add("Input", {{"shape", IntList{8, 6}}}, {}, "x");
  const NodeId w = g.add("Weight", {{"shape", IntList{6, 6}}}, {}, "w");
  const NodeId split = g.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{x, 0}});
  const NodeId norm = g.add("Relu", {}, {{split, 0}});
  const NodeId whole = g.add("Combine", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{norm, 0}});
  const NodeId y = g.add("Linear", {}, {{whole, 0}, {w, 0}});
  const NodeId again = g.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{whole, 0}});
  const NodeId ys = g.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{y, 0}});
  const NodeId sum = g.add("EwAdd", {}, {{again, 0}, {ys, 0}});
  // Another dimension, or another degree, is no round trip.
  const NodeId other = g.add("Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {{whole, 0}});
  const NodeId joined = g.add("Combine", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{g.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{sum, 0}}), 0}});
  g.add_output({g.add("Combine", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{joined, 0}}), 0});
  g.add_output({other, 0});
  const auto merged = merge_common_subexpressions(g);
  ASSERT_TRUE(merged.has_value());
  // The residual read and the sum split then joined went: the sum reads
  // the Relu, the output joins the sum itself.
  const Node& add = *std::find_if(merged->nodes().begin(), merged->nodes().end(), [](const Node& n) { return n.op->name == "EwAdd"; });
  EXPECT_EQ(merged->node(add.inputs[0].node).op->name, "Relu");
  EXPECT_EQ(merged->node(merged->outputs()[0].node).op->name, "Combine");
  EXPECT_EQ(merged->node(merged->node(merged->outputs()[0].node).inputs[0].node).op->name, "EwAdd");
  EXPECT_EQ(count(*merged, "Repartition"), 3u);  // x's split, y's and the other dimension's
  EXPECT_EQ(count(*merged, "Combine"), 2u);      // the gather the Linear reads, the output's
  EXPECT_LT(max_difference(g, *merged), 1e-6);
  EXPECT_FALSE(merge_common_subexpressions(*merged).has_value());
}

}  // namespace
}  // namespace pcgx::search
