// What the cost model charges for communication: one meaning of weight
// synchronization, layout changes as collectives, overlap of the gradient
// buckets with the backward pass.
#include <gtest/gtest.h>

#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/relayout.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"
#include "search/toy_machines.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

Machine two_level() { return two_level_machine(); }

Efficiency plain() {
  Efficiency e;
  e.launch = 0;
  e.fallback = {1.0, 1.0, 2.0, false};
  return e;
}

TensorRef add(Graph& g, const std::string& op, Attributes a, std::vector<TensorRef> in, const std::string& name = "") {
  return {g.add(op, std::move(a), in, name), 0};
}

// q = x Wq and k = x Wk, data parallel over `k` devices, the two weights
// replicated on their own (`concat` false) or as Split(Replicate(Concat(Wk, Wq)))
// (unity's rule unity-c01085 applied in reverse).
Graph projections(bool concat, int64_t k) {
  Graph g("qk");
  const TensorRef x = add(g, "Input", {{"shape", IntList{64, 256}}}, {}, "x");
  const TensorRef wq = add(g, "Weight", {{"shape", IntList{256, 512}}}, {}, "wq");
  const TensorRef wk = add(g, "Weight", {{"shape", IntList{256, 512}}}, {}, "wk");
  const TensorRef xs = add(g, "Repartition", {{"dim", int64_t{0}}, {"degree", k}}, {x});
  TensorRef rq, rk;
  if (concat) {
    const TensorRef both = add(g, "Concat", {{"axis", int64_t{1}}}, {wk, wq});
    const TensorRef rep = add(g, "Replicate", {{"degree", k}}, {both});
    const NodeId split = g.add("Split", {{"axis", int64_t{1}}, {"sizes", IntList{512, 512}}}, {rep});
    rk = {split, 0}, rq = {split, 1};
  } else {
    rq = add(g, "Replicate", {{"degree", k}}, {wq});
    rk = add(g, "Replicate", {{"degree", k}}, {wk});
  }
  const TensorRef q = add(g, "Linear", {}, {xs, rq}, "q");
  const TensorRef kk = add(g, "Linear", {}, {xs, rk}, "k");
  g.add_output(add(g, "Combine", {{"dim", int64_t{0}}, {"degree", k}}, {q}));
  g.add_output(add(g, "Combine", {{"dim", int64_t{0}}, {"degree", k}}, {kk}));
  return g;
}

TEST(WeightSynchronization, OneMeaningWhateverTheLayoutsForm) {
  for (int64_t k : {4, 8}) {
    // As many devices as tasks: the DP has no room to run q and k apart.
    const CostModel cm(two_level().with_devices(k), plain());
    const MachineMapper mapper(cm);
    const Graph a = projections(false, k), b = projections(true, k);
    ASSERT_LT(max_difference(a, b), 1e-5);
    const Strategy sa = mapper.map(a), sb = mapper.map(b);
    ASSERT_TRUE(sa.estimate.feasible && sb.estimate.feasible);
    EXPECT_GT(sa.estimate.sync, 0.0);
    EXPECT_DOUBLE_EQ(sa.estimate.sync, sb.estimate.sync) << k;
    EXPECT_DOUBLE_EQ(sa.estimate.time, sb.estimate.time) << k;
    EXPECT_DOUBLE_EQ(sa.estimate.communication, sb.estimate.communication) << k;
    EXPECT_EQ(sa.estimate.memory, sb.estimate.memory) << k;
    EXPECT_DOUBLE_EQ(mapper.time(a), mapper.time(b)) << k;
  }
}

TEST(WeightSynchronization, AWeightIsNeverBroadcastForward) {
  // Replicating a weight costs only its gradient's all-reduce: the forward
  // pass of the data-parallel Linear moves nothing but the output.
  const Machine m = two_level().with_devices(4);
  const CostModel cm(m, plain());
  const Graph g = projections(false, 4);
  const Strategy s = MachineMapper(cm).map(g);
  const GroupShape node = strided_group(m, 0, 1, 4);
  const double gathers = 2 * 2 * collective_time(m, Collective::kGather, node, 64 * 512 * 4);
  // One bucket: the all-reduce, and its copies in and out (4 bytes moved
  // per byte at the toy's 100 GB/s).
  const double sync = collective_time(m, Collective::kAllReduce, node, 2 * 256 * 512 * 4) + 4.0 * (2 * 256 * 512 * 4) / 1e11;
  EXPECT_NEAR(s.estimate.sync, sync, 1e-12);
  EXPECT_NEAR(s.estimate.communication, gathers + s.estimate.sync - s.estimate.sync_hidden, 1e-12);
}

// x [64, 64] split by rows over 4 devices, re-split by columns: one
// all-to-all among the same 4 devices (forward and backward), not a gather
// to one device and a scatter from it.
TEST(LayoutChange, CombineThenRepartitionIsAnAllToAll) {
  const Machine m = two_level();
  const CostModel cm(m, plain());
  Graph g("a2a");
  const TensorRef x = add(g, "Input", {{"shape", IntList{64, 64}}}, {}, "x");
  const TensorRef a = add(g, "Relu", {}, {add(g, "Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{4}}}, {x})});
  const TensorRef c = add(g, "Combine", {{"dim", int64_t{0}}, {"degree", int64_t{4}}}, {a});
  const TensorRef r = add(g, "Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{4}}}, {c});
  const TensorRef b = add(g, "Relu", {}, {r});
  g.add_output(add(g, "Combine", {{"dim", int64_t{1}}, {"degree", int64_t{4}}}, {b}));
  std::vector<MachineView> views(g.size());
  views[static_cast<size_t>(a.node)] = views[static_cast<size_t>(b.node)] = {0, 1, {}};
  const Placement p(g, views, 8);
  const auto t = cm.layout_change_time(p, c.node, r.node, 0);
  ASSERT_TRUE(t.has_value());
  const double one = collective_time(m, Collective::kAllToAll, strided_group(m, 0, 1, 4), 16 * 64 * 4);
  EXPECT_DOUBLE_EQ(t->forward, one);
  EXPECT_DOUBLE_EQ(t->backward, one);
  // Priced apart, the same pair gathers to one device and scatters again: slower.
  const Seconds apart{cm.parallel_time(p, c.node, 0).forward + cm.parallel_time(p, r.node, 0).forward, 0};
  EXPECT_LT(one, apart.forward);
  // Shifted onto the second node, the same collective over its devices.
  EXPECT_DOUBLE_EQ(cm.layout_change_time(p, c.node, r.node, 4)->forward,
                   collective_time(m, Collective::kAllToAll, strided_group(m, 4, 1, 4), 16 * 64 * 4));
  // The DP charges the collective, not the two operators.
  const Strategy s = MachineMapper(cm).map(g);
  const double out = 2 * collective_time(m, Collective::kGather, strided_group(m, 0, 1, 4), 64 * 64 * 4);
  EXPECT_NEAR(s.estimate.communication, 2 * one + out, 1e-12);
}

// A tensor split by rows over 2 devices, re-split by columns over 4: no
// collective of one group fits, so every device sends each other the blocks
// they share.
TEST(LayoutChange, ReSplittingToOtherDevicesIsAnExchange) {
  const Machine m = two_level();
  const CostModel cm(m, plain());
  Graph g("exchange");
  const TensorRef x = add(g, "Input", {{"shape", IntList{64, 64}}}, {}, "x");
  const TensorRef a = add(g, "Relu", {}, {add(g, "Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {x})});
  const TensorRef c = add(g, "Combine", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {a});
  const TensorRef r = add(g, "Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{4}}}, {c});
  g.add_output(add(g, "Relu", {}, {r}));
  std::vector<MachineView> views(g.size());
  views[static_cast<size_t>(a.node)] = {0, 1, {}};
  views[static_cast<size_t>(g.outputs()[0].node)] = {4, 1, {}};  // the columns on the other node
  const Placement p(g, views, 8);
  const auto t = cm.layout_change_time(p, c.node, r.node, 0);
  ASSERT_TRUE(t.has_value());
  // Device 0 holds rows 0-31, device 1 rows 32-63; devices 4..7 want 16
  // columns each: every pair shares 32 x 16 floats (2 KiB). Each side's 2
  // (4) devices drive 2 adapters: 2 x 4 blocks = 16 KiB cross the network.
  const double block = 32 * 16 * 4;
  EXPECT_DOUBLE_EQ(t->forward, 1e-5 + 8 * block / 2e9);
  EXPECT_DOUBLE_EQ(t->backward, t->forward);
}

// Partial sums of a reduction-parallel Linear reduced and replicated again
// over the same devices: one all-reduce.
TEST(LayoutChange, ReduceThenReplicateIsAnAllReduce) {
  const Machine m = two_level();
  const CostModel cm(m, plain());
  Graph g("ar");
  const TensorRef x = add(g, "Input", {{"shape", IntList{32, 64}}}, {}, "x");
  const TensorRef w = add(g, "Weight", {{"shape", IntList{64, 16}}}, {}, "w");
  const TensorRef xs = add(g, "Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{8}}}, {x});
  const TensorRef ws = add(g, "Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{8}}}, {w});
  const TensorRef y = add(g, "Linear", {}, {xs, ws});
  ASSERT_EQ(g.shape(y).replica, 8);
  const TensorRef red = add(g, "Reduce", {{"degree", int64_t{8}}}, {y});
  const TensorRef rep = add(g, "Replicate", {{"degree", int64_t{8}}}, {red});
  const TensorRef z = add(g, "Relu", {}, {rep});
  g.add_output(z);
  std::vector<MachineView> views(g.size());
  views[static_cast<size_t>(y.node)] = views[static_cast<size_t>(z.node)] = {0, 1, {}};
  const Placement p(g, views, 8);
  const auto t = cm.layout_change_time(p, red.node, rep.node, 0);
  ASSERT_TRUE(t.has_value());
  const double ar = collective_time(m, Collective::kAllReduce, strided_group(m, 0, 1, 8), 32 * 16 * 4);
  EXPECT_DOUBLE_EQ(t->forward, ar);
  EXPECT_DOUBLE_EQ(t->backward, ar);
  // Not the same devices (the reader runs on devices 4..11): the pieces the
  // runtime sends, each copy summing the 8 partial sums, all at once.
  views[static_cast<size_t>(z.node)] = {4, 1, {}};
  const Placement q(g, views, 8);
  std::vector<Transfer> pieces;
  for (const Piece& pc : relayout_pieces(g.shape(y), g.shape(rep), 8, 8))
    pieces.push_back({q.owner(y, pc.in_shard), q.owner(rep, pc.out_shard), static_cast<double>(pc.elements() * 4)});
  EXPECT_EQ(pieces.size(), 64u);
  const auto other = cm.layout_change_time(q, red.node, rep.node, 0);
  ASSERT_TRUE(other.has_value());
  EXPECT_DOUBLE_EQ(other->forward, exchange_time(m, pieces));
}

// A deep data-parallel MLP: the buckets of the last layers' gradients are
// all-reduced while the backward pass goes on through the first layers.
TEST(WeightSynchronization, BucketsOverlapTheBackwardPass) {
  const Machine m = two_level();
  Graph g("deep");
  TensorRef h = add(g, "Input", {{"shape", IntList{512, 512}}}, {}, "x");
  for (int i = 0; i < 8; ++i) {
    const TensorRef w = add(g, "Weight", {{"shape", IntList{512, 512}}}, {}, "w" + std::to_string(i));
    h = add(g, "Linear", {{"activation", std::string("relu")}}, {h, w}, "fc" + std::to_string(i));
  }
  g.add_output(h);
  const Graph dp = data_parallel(g, 8);
  CommOptions small;
  small.bucket_bytes = 1 << 20;  // one weight per bucket
  const CostModel cm(m, plain(), {}, small);
  const Strategy s = MachineMapper(cm).map(dp);
  ASSERT_TRUE(s.estimate.feasible);
  EXPECT_EQ(s.estimate.buckets, 8);
  EXPECT_GT(s.estimate.sync_hidden, 0.0);
  EXPECT_LT(s.estimate.sync_hidden, s.estimate.sync);  // the first layer's bucket comes last
  // Time = everything else + the exposed part only.
  const double exposed = s.estimate.sync - s.estimate.sync_hidden;
  EXPECT_NEAR(s.estimate.time, s.estimate.compute + s.estimate.communication, 1e-12);
  EXPECT_GE(s.estimate.communication, exposed);
  // One bucket for all: nothing can start before the backward pass ends.
  const CostModel one(m, plain(), {}, CommOptions{1e12});
  const Strategy t = MachineMapper(one).map(dp);
  EXPECT_EQ(t.estimate.buckets, 1);
  EXPECT_NEAR(t.estimate.sync_hidden, 0.0, 1e-15);
}

// Unity's hybrid rewrite Add(x, y) = Reduce(2)(Concat_replica(x, y)) with
// both slots on one device: no collective runs, but the runtime still sums
// the slots there, an elementwise add priced as EwAdd's (two slots read,
// one written, at the device's memory bandwidth, with a launch; backward,
// EwAdd's ratio), not free, so that a search gains nothing by it.
TEST(LayoutChange, ReplicaSlotsSummedOnOneDeviceCostAnAdd) {
  const Machine m = two_level();
  Efficiency e = plain();
  e.launch = 2e-6;
  const CostModel cm(m, e);
  Graph g("hybrid-add");
  const TensorRef x = add(g, "Input", {{"shape", IntList{64, 256}}}, {}, "x");
  const TensorRef y = add(g, "Input", {{"shape", IntList{64, 256}}}, {}, "y");
  const TensorRef a = add(g, "Relu", {}, {x}), b = add(g, "Relu", {}, {y});
  const TensorRef r = add(g, "Reduce", {{"degree", int64_t{2}}}, {add(g, "Concat", {{"axis", int64_t{-1}}}, {a, b})});
  const TensorRef sum = add(g, "EwAdd", {}, {a, b});
  g.add_output(r), g.add_output(sum);
  std::vector<MachineView> views(g.size());
  views[static_cast<size_t>(a.node)] = views[static_cast<size_t>(b.node)] = views[static_cast<size_t>(sum.node)] = {0, 1, {}};
  const Placement p(g, views, 8);
  const Seconds t = cm.parallel_time(p, r.node, 0);
  const double add_time = 3.0 * 64 * 256 * 4 / m.device.memory_bandwidth + 2e-6;
  EXPECT_DOUBLE_EQ(t.forward, add_time);
  EXPECT_DOUBLE_EQ(t.backward, 2 * add_time);
  const Seconds kernel = cm.task_time(g, g.node(sum.node));
  EXPECT_DOUBLE_EQ(t.forward, kernel.forward);
  // Run in one step with the layout change after it (here a Replicate on
  // the same device): the sum is still the add, not free.
  Graph h("hybrid-add-then-copy");
  const TensorRef hx = add(h, "Input", {{"shape", IntList{64, 256}}}, {}, "x");
  const TensorRef hy = add(h, "Input", {{"shape", IntList{64, 256}}}, {}, "y");
  const TensorRef ha = add(h, "Relu", {}, {hx}), hb = add(h, "Relu", {}, {hy});
  const TensorRef hr = add(h, "Reduce", {{"degree", int64_t{2}}}, {add(h, "Concat", {{"axis", int64_t{-1}}}, {ha, hb})});
  const TensorRef copies = add(h, "Replicate", {{"degree", int64_t{2}}}, {hr});
  h.add_output(add(h, "Relu", {}, {copies}));
  std::vector<MachineView> hv(h.size());
  hv[static_cast<size_t>(ha.node)] = hv[static_cast<size_t>(hb.node)] = {0, 1, {}};
  hv[static_cast<size_t>(h.outputs()[0].node)] = {0, 0, {}};  // both copies' tasks on device 0
  const Placement hp(h, hv, 8);
  const auto fused = cm.layout_change_time(hp, hr.node, copies.node, 0);
  ASSERT_TRUE(fused.has_value());
  EXPECT_GE(fused->forward, add_time);
}

// A replica-axis Concat whose copies go to other devices sends them:
// Concat(a, a) of a Relu's output on device 0, read by a Linear's two
// tasks (its weight's columns split 2 ways) on devices 0 and 1, sends a's
// 256 KiB to device 1 (and its gradient back), priced in the estimate as
// a lone message each way, as the simulator runs it. Unity's search had
// replicated tensors this way at the price of a local copy.
TEST(LayoutChange, AReplicaConcatSendsItsCopiesToOtherDevices) {
  const Machine m = two_level().with_devices(2);
  const CostModel cm(m, plain());
  Graph g("copies");
  const TensorRef x = add(g, "Input", {{"shape", IntList{256, 256}}}, {}, "x");
  const TensorRef a = add(g, "Relu", {}, {x}, "a");
  const TensorRef both = add(g, "Concat", {{"axis", int64_t{-1}}}, {a, a});
  const TensorRef w = add(g, "Weight", {{"shape", IntList{256, 4096}}, {"degrees", IntList{1, 2}}}, {}, "w");
  const TensorRef y = add(g, "Linear", {}, {both, w}, "fc");
  g.add_output(y);
  std::vector<MachineView> views(g.size());
  views[static_cast<size_t>(a.node)] = {0, 1, {}};
  views[static_cast<size_t>(y.node)] = {0, 1, {}};  // task j on device j
  const Placement p(g, views, 2);
  const double message = 1e-6 + 256.0 * 256 * 4 / 1e10;  // 256 KiB over the fast link
  const Seconds sent = cm.parallel_time(p, both.node, 0);
  EXPECT_DOUBLE_EQ(sent.forward, message);
  EXPECT_DOUBLE_EQ(sent.backward, message);
  // The mapping's estimate of the plan counts the message both ways, and
  // the simulator, at the mapping's views, agrees.
  const Strategy st = MachineMapper(cm).map(g);
  ASSERT_TRUE(st.estimate.feasible);
  const Placement chosen(g, st.views, 2);
  ASSERT_NE(chosen.owner(both, 0), chosen.owner(both, 1)) << "the Linear's tasks on both devices";
  EXPECT_NEAR(st.estimate.communication, 2 * message, 1e-12);
  EXPECT_NEAR(Simulator(g, st.views, cm).time(), st.estimate.time, 1e-9 * st.estimate.time);
  // Both copies on a's device: nothing sent.
  views[static_cast<size_t>(y.node)] = {0, 0, {}};
  const Seconds local = cm.parallel_time(Placement(g, views, 2), both.node, 0);
  EXPECT_EQ(local.total(), 0.0);
}

// A replica-axis Split dealing its slots out to readers on other devices
// sends them: a Relu's two slot-wise tasks on devices 0 and 1, split into
// their two copies, each read by a Relu on the other device, swap 256 KiB
// (and the gradients back), one exchange each way. The simulator, which
// prices the copies as the mapping DP does (Problem::shard_copies_seconds),
// takes that much longer than with each copy read where it is. A Split
// taking one copy and leaving the rest unread (a pipeline boundary's
// first copy) is priced by the pipeline, not here.
TEST(LayoutChange, AReplicaSplitSendsItsSlotsToOtherDevices) {
  const Machine m = two_level().with_devices(2);
  const CostModel cm(m, plain());
  Graph g("slots");
  const TensorRef x = add(g, "Input", {{"shape", IntList{256, 256}}, {"replica", int64_t{2}}}, {}, "x");
  const TensorRef a = add(g, "Relu", {}, {x}, "a");
  const NodeId split = g.add("Split", {{"axis", int64_t{-1}}, {"sizes", IntList{1, 1}}}, {a});
  const TensorRef b0 = add(g, "Relu", {}, {{split, 0}}, "b0"), b1 = add(g, "Relu", {}, {{split, 1}}, "b1");
  g.add_output(b0), g.add_output(b1);
  std::vector<MachineView> local(g.size());
  local[static_cast<size_t>(a.node)] = {0, 1, {}};  // slot c on device c
  local[static_cast<size_t>(b0.node)] = {0, 1, {}};
  local[static_cast<size_t>(b1.node)] = {1, 1, {}};
  std::vector<MachineView> swapped = local;
  swapped[static_cast<size_t>(b0.node)] = {1, 1, {}};
  swapped[static_cast<size_t>(b1.node)] = {0, 1, {}};
  const double message = 1e-6 + 256.0 * 256 * 4 / 1e10;  // 256 KiB over the fast link, both ways at once
  EXPECT_EQ(cm.parallel_time(Placement(g, local, 2), split, 0).total(), 0.0);
  const Seconds sent = cm.parallel_time(Placement(g, swapped, 2), split, 0);
  EXPECT_DOUBLE_EQ(sent.forward, message);
  EXPECT_DOUBLE_EQ(sent.backward, message);
  const double apart = Simulator(g, swapped, cm).time() - Simulator(g, local, cm).time();
  EXPECT_NEAR(apart, 2 * message, 1e-9);
  // The mapping's estimate agrees with the simulator at the views it picks.
  const Strategy st = MachineMapper(cm).map(g);
  ASSERT_TRUE(st.estimate.feasible);
  EXPECT_NEAR(Simulator(g, st.views, cm).time(), st.estimate.time, 1e-9 * st.estimate.time);
}

}  // namespace
}  // namespace pcgx::search
