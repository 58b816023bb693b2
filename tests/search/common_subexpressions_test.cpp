// Common-subexpression merging: duplicates go, values stay, sources and
// distinct seeds are never merged.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace pcgx::search
