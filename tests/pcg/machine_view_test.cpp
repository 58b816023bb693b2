// Machine views with one stride per task-grid dimension, and the placement
// built on them.
#include <gtest/gtest.h>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/pcg/placement.h"

namespace pcgx {
namespace {

TEST(MachineView, OneDimensionalAndStrided) {
  const std::vector<int64_t> grid{2, 4};  // tasks row-major: t = 4 i + j
  const MachineView plain{3, 2, {}};
  EXPECT_EQ(plain.device(5, grid), 3 + 10);
  EXPECT_EQ(plain.last_device(grid), 3 + 14);
  // The inner dimension (4) across nodes of 4... here: inner stride 2, outer 1.
  const MachineView strided{0, 1, {1, 2}};
  EXPECT_EQ(strided.device(0, grid), 0);
  EXPECT_EQ(strided.device(1, grid), 2);   // (0, 1)
  EXPECT_EQ(strided.device(4, grid), 1);   // (1, 0)
  EXPECT_EQ(strided.device(7, grid), 7);   // (1, 3)
  EXPECT_EQ(strided.last_device(grid), 7);
  // Spread: 2 tasks over 8 devices, one per node of 4.
  EXPECT_EQ((MachineView{0, 1, {4}}).device(1, std::vector<int64_t>{2}), 4);
}

// y = Relu(Replicate(x)): the Replicate's output lives where Relu's tasks
// run, whatever their view; x's shard with the first reader that reads it.
TEST(Placement, ShardsFollowTheirReadersViews) {
  Graph g("p");
  const NodeId x = g.add("Input", {{"shape", IntList{8, 4}}}, {}, "x");
  const NodeId s = g.add("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {{x, 0}});
  const NodeId r = g.add("Replicate", {{"degree", int64_t{2}}}, {{s, 0}});
  const NodeId y = g.add("Relu", {}, {{r, 0}});
  g.add_output({y, 0});
  std::vector<MachineView> views(g.size());
  views[static_cast<size_t>(y)] = {0, 1, {}};
  // Relu's grid: (slot 2, rows 2); tasks 0..3 on devices 0..3.
  Placement p(g, views, 8);
  EXPECT_EQ(p.tasks(y).grid.extents, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(p.owners({r, 0}), (std::vector<int64_t>{0, 1, 2, 3}));
  // Replicate reads shard i for slots 0 and 1 (outputs i and 2 + i): the
  // last move decides, so x's row-block i lives with slot 1.
  EXPECT_EQ(p.owners({s, 0}), (std::vector<int64_t>{2, 3}));
  // Slots inside a pair of devices, rows across: strides (slot 1, rows 4).
  p.set_view(y, {0, 1, {1, 4}});
  EXPECT_EQ(p.task_devices(y), (std::vector<int64_t>{0, 4, 1, 5}));
  EXPECT_EQ(p.owners({r, 0}), (std::vector<int64_t>{0, 4, 1, 5}));
  EXPECT_EQ(p.owners({s, 0}), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(p.devices_needed(), 6);
}

// A shard no one reads stays where it comes from: the copy a first-copy
// Split (along the replica axis) leaves behind lives with the Relu task
// that made it, on device 6, not on device 0 (where a shard with no home
// used to go: a message, and across pipeline stages one no schedule sends).
TEST(Placement, AShardNoOneReadsStaysWhereItComesFrom) {
  Graph g("first copy");
  const NodeId x = g.add("Input", {{"shape", IntList{8, 4}}}, {}, "x");
  const NodeId r = g.add("Replicate", {{"degree", int64_t{2}}}, {{x, 0}});
  const NodeId y = g.add("Relu", {}, {{r, 0}});
  const NodeId first = g.add("Split", {{"axis", int64_t{-1}}, {"sizes", IntList{1, 1}}}, {{y, 0}});
  const NodeId z = g.add("Sigmoid", {}, {{first, 0}});
  g.add_output({z, 0});
  std::vector<MachineView> views(g.size());
  views[static_cast<size_t>(y)] = {5, 1, {}};  // the two copies on devices 5 and 6
  views[static_cast<size_t>(z)] = {5, 1, {}};
  const Placement p(g, views, 8);
  EXPECT_EQ(p.owners({y, 0}), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(p.owners({first, 0}), (std::vector<int64_t>{5}));
  EXPECT_EQ(p.owners({first, 1}), (std::vector<int64_t>{6}));
}

}  // namespace
}  // namespace pcgx
