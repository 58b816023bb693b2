// Graph::add_like: a node copied from another graph keeps its checked
// output shapes when its inputs have the same shapes, and is inferred and
// checked again when they do not.
#include <gtest/gtest.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph.h"

namespace pcgx {
namespace {

TEST(GraphCopy, SameInputShapesKeepTheNode) {
  Graph a;
  const NodeId x = a.add("Input", {{"shape", IntList{8, 4}}}, {}, "x");
  const NodeId s = a.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{x, 0}});
  const NodeId r = a.add("Relu", {}, {{s, 0}}, "act");
  Graph b;
  const NodeId bx = b.add_like(a, x, {});
  const NodeId bs = b.add_like(a, s, {{bx, 0}});
  const NodeId br = b.add_like(a, r, {{bs, 0}});
  for (const auto& [p, q] : {std::pair{x, bx}, {s, bs}, {r, br}}) {
    EXPECT_EQ(a.node(p).op, b.node(q).op);
    EXPECT_EQ(a.node(p).attrs.values(), b.node(q).attrs.values());
    EXPECT_EQ(a.node(p).outputs, b.node(q).outputs);
    EXPECT_EQ(a.node(p).name, b.node(q).name);
  }
}

TEST(GraphCopy, OtherInputShapesAreInferredAndChecked) {
  Graph a;
  const NodeId x = a.add("Input", {{"shape", IntList{8, 4}}}, {}, "x");
  const NodeId r = a.add("Relu", {}, {{x, 0}});
  const NodeId w = a.add("Weight", {{"shape", IntList{4, 3}}}, {}, "w");
  const NodeId l = a.add("Linear", {}, {{x, 0}, {w, 0}});
  Graph b;
  const NodeId y = b.add("Input", {{"shape", IntList{8, 4}}}, {}, "y");
  const NodeId split = b.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{4}}}, {{y, 0}});
  const NodeId br = b.add_like(a, r, {{split, 0}});
  EXPECT_EQ(b.node(br).outputs[0], b.node(split).outputs[0]);  // Relu keeps the split
  const NodeId v = b.add("Weight", {{"shape", IntList{5, 3}}}, {}, "v");
  EXPECT_THROW(b.add_like(a, l, {{y, 0}, {v, 0}}), Error);  // 4 columns against 5 rows
  EXPECT_THROW(b.add_like(a, r, {{99, 0}}), Error);           // no such node
}

}  // namespace
}  // namespace pcgx
