// The cost model and machine mapping on hand-worked cases.
#include <gtest/gtest.h>

#include <cmath>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/collectives.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "search/toy_machines.h"
#include "search/values.h"

namespace pcgx::search {
namespace {


// move_time looks at one period of the link spans; it must equal the
// slowest of all shard pairs, here on a three-level machine (pairs of
// devices, nodes of 6, the machine) at every pair of starts.
TEST(CostModel, MoveTimeIsTheSlowestShardPair) {
  Machine m;
  m.name = "three-levels";
  m.nodes = 4;
  m.devices_per_node = 6;
  m.device = {"toy", 1e12, 1e11, 1e9};
  m.links = {{"pair", 2, 4e10, 1e-7}, {"node", 6, 1e10, 1e-6}, {"network", 0, 1e9, 1e-5}};
  const CostModel cm(m, toy_efficiency());
  for (int64_t degree : {1, 2, 3, 4, 6, 8}) {
    const std::vector<int64_t> shape{24, 1000};
    ParallelTensorShape s = ParallelTensorShape::unpartitioned(shape, DataType::kFloat32);
    s.dims[0].degree = degree;
    for (int64_t from = 0; from + degree <= 24; ++from)
      for (int64_t to = 0; to + degree <= 24; ++to) {
        double worst = 0;
        for (int64_t i = 0; i < degree; ++i) worst = std::max(worst, send_time(m, from + i, to + i, shard_bytes(s)));
        EXPECT_DOUBLE_EQ(cm.move_time(s, from, to), worst) << "degree " << degree << " from " << from << " to " << to;
      }
  }
}

TEST(CostModel, RooflineOfOneTask) {
  const CostModel cm(toy_machine(), toy_efficiency());
  const Graph g = linear_graph(1000, 1000, 1000);
  // 2 * 1000^3 FLOPs at 1 TFLOP/s = 2 ms; 3 * 4 MB at 100 GB/s = 0.12 ms: compute-bound.
  const Seconds s = cm.task_time(g, g.node(2));
  EXPECT_NEAR(s.forward, 2e-3, 1e-12);
  EXPECT_NEAR(s.backward, 4e-3, 1e-12);
  // Efficiency halves the attainable FLOP/s.
  Efficiency half = toy_efficiency();
  half.ops["Linear"] = {0.5, 1.0, 2.0, false};
  EXPECT_NEAR(CostModel(toy_machine(), half).task_time(g, g.node(2)).forward, 4e-3, 1e-12);
}

TEST(CostModel, ProfileReplacesTheRoofline) {
  const Profile p = profile_from_json(
      R"({"format_version":1,"kind":"pcgx.profile","device":"toy",
          "entries":[{"op":"Linear","inputs":[[1000,1000],[1000,1000]],"forward":0.5,"backward":0.25}]})",
      "p.json");
  const CostModel cm(toy_machine(), toy_efficiency(), p);
  const Graph g = linear_graph(1000, 1000, 1000);
  EXPECT_DOUBLE_EQ(cm.task_time(g, g.node(2)).forward, 0.5);
  EXPECT_DOUBLE_EQ(cm.task_time(g, g.node(2)).backward, 0.25);
  // Other shapes keep the roofline.
  const Graph h = linear_graph(500, 1000, 1000);
  EXPECT_NEAR(cm.task_time(h, h.node(2)).forward, 1e-3, 1e-12);
}

TEST(CostModel, BadEfficiencyAndProfileFilesNameTheField) {
  try {
    efficiency_from_json(R"({"format_version":1,"kind":"pcgx.efficiency","ops":{"Linear":{"compute":-1}}})", "e.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("e.json: ops.Linear.compute:", 0), 0u) << e.what();
  }
  try {
    profile_from_json(R"({"format_version":1,"kind":"pcgx.profile","entries":[{"op":"Linear","inputs":[[0]]}]})", "p.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("p.json: entries[0].inputs:", 0), 0u) << e.what();
  }
  EXPECT_THROW(efficiency_from_json("{", "e.json"), Error);
  EXPECT_THROW(find_machine("no-such-machine"), Error);
}

// relayout_time remembers what it priced, by everything the price depends
// on: the same change between other owners is priced afresh, the same one
// again gives what a fresh model gives.
TEST(CostModel, RelayoutTimeIsPricedAfreshForOtherOwners) {
  const Machine m = toy_machine();
  const Graph dp = data_parallel(linear_graph(1000, 1000, 1000), 4);
  // The input's split (its output owners move with the Linear) and the
  // output's gather (its input owners do).
  for (const DataMove kind : {DataMove::kRepartition, DataMove::kCombine}) {
    const CostModel shared(m, toy_efficiency());
    NodeId node = -1;
    for (const Node& n : dp.nodes())
      if (n.op->data_move == kind) node = n.id;
    ASSERT_GE(node, 0);
    const TensorRef in = dp.node(node).inputs[0], out{node, 0};
    std::vector<double> times;
    for (const int64_t start : {0, 2, 0}) {  // devices 0-3 (one node), 2-5 (both), 0-3 again
      std::vector<MachineView> views(dp.size());
      for (const Node& n : dp.nodes())
        if (n.op->op_class == OpClass::kCompute) views[static_cast<size_t>(n.id)] = {start, 1};
      const Placement p(dp, views, 8);
      const Seconds cached = shared.relayout_time(p, in, out, 1, 1, 0);
      const Seconds fresh = CostModel(m, toy_efficiency()).relayout_time(p, in, out, 1, 1, 0);
      EXPECT_EQ(cached.forward, fresh.forward) << start;
      EXPECT_EQ(cached.backward, fresh.backward) << start;
      times.push_back(cached.total());
    }
    EXPECT_GT(times[1], times[0]);  // crossing the slow link
    EXPECT_EQ(times[2], times[0]);
  }
}

TEST(CostModel, DataParallelLinearByHand) {
  const Machine m = toy_machine();
  const CostModel cm(m, toy_efficiency());
  const MachineMapper mapper(cm);
  const Graph g = linear_graph(1000, 1000, 1000);

  // One device: forward 2 ms + backward 4 ms + Adam update 7 * 4 MB / 100 GB/s = 0.28 ms.
  const Strategy one = mapper.map(g);
  ASSERT_TRUE(one.estimate.feasible);
  EXPECT_NEAR(one.estimate.time, 6e-3 + 2.8e-4, 1e-9);
  EXPECT_NEAR(one.estimate.memory[0], 4 * 4e6 + 4e6, 1);  // weight x4 + output
  EXPECT_EQ(one.estimate.buckets, 0);

  // Data parallel over 4 devices of one node: each task 1/4 of the FLOPs;
  // the output is gathered to device 0 (forward) and scattered back
  // (backward); the weight's gradient (4 MB, one bucket) is copied into the
  // bucket, all-reduced and copied back (4 x 4 MB / 100 GB/s = 0.16 ms of
  // copies) when the backward pass ends, so none of it is hidden.
  const Graph dp = data_parallel(g, 4);
  const Strategy s = mapper.map(dp);
  ASSERT_TRUE(s.estimate.feasible);
  const GroupShape node = strided_group(m, 0, 1, 4);
  const double compute = 1.5e-3 + 2.8e-4;
  const double gather = collective_time(m, Collective::kGather, node, 4e6);
  EXPECT_DOUBLE_EQ(gather, 1e-6 + 3e-4);
  const double sync = collective_time(m, Collective::kAllReduce, node, 4e6) + 1.6e-4;
  EXPECT_NEAR(s.estimate.compute, compute, 1e-9);
  EXPECT_NEAR(s.estimate.sync, sync, 1e-12);
  EXPECT_NEAR(s.estimate.sync_hidden, 0.0, 1e-12);
  EXPECT_EQ(s.estimate.buckets, 1);
  EXPECT_NEAR(s.estimate.communication, 2 * gather + sync, 1e-9);
  EXPECT_NEAR(s.estimate.time, compute + 2 * gather + sync, 1e-9);
  // Every device holds the whole weight (x4) and a quarter of the output;
  // device 0 also the gathered output.
  EXPECT_NEAR(s.estimate.memory[0], 16e6 + 1e6 + 4e6, 1);
  for (int d = 1; d < 4; ++d) EXPECT_NEAR(s.estimate.memory[static_cast<size_t>(d)], 16e6 + 1e6, 1);
  EXPECT_NEAR(s.estimate.memory[4], 0.0, 1e-9);
}

TEST(CostModel, CrossingNodesUsesTheSlowLink) {
  const Machine m = toy_machine();
  const CostModel cm(m, toy_efficiency());
  const MachineMapper mapper(cm);
  const Graph dp = data_parallel(linear_graph(1000, 1000, 1000), 8);
  const Strategy s = mapper.map(dp);
  ASSERT_TRUE(s.estimate.feasible);
  const GroupShape all = strided_group(m, 0, 1, 8);
  const double comm = 2 * collective_time(m, Collective::kGather, all, 4e6) + collective_time(m, Collective::kAllReduce, all, 4e6) +
                      1.6e-4;  // the bucket's two copies
  EXPECT_NEAR(s.estimate.communication, comm, 1e-9);
  // The network is the slowest crossed level: 1 GB/s, one adapter per node.
  EXPECT_DOUBLE_EQ(bus_bandwidth(m, all), 1e9);
}

TEST(CostModel, OverCapacityIsRejected) {
  Machine m = toy_machine();
  m.device.memory_capacity = 1e7;  // a 4 MB weight needs 16 MB with gradient and Adam state
  const CostModel cm(m, toy_efficiency());
  const MachineMapper mapper(cm);
  const Strategy s = mapper.map(linear_graph(1000, 1000, 1000));
  EXPECT_FALSE(s.estimate.feasible);
  EXPECT_NE(s.estimate.infeasible.find("GiB"), std::string::npos);
  EXPECT_TRUE(std::isinf(mapper.time(linear_graph(1000, 1000, 1000))));
}

TEST(CostModel, TooManyTasksIsInfeasible) {
  const CostModel cm(toy_machine(), toy_efficiency());
  const MachineMapper mapper(cm);
  const Strategy s = mapper.map(data_parallel(linear_graph(1600, 100, 100), 16));
  EXPECT_FALSE(s.estimate.feasible);
  EXPECT_NE(s.estimate.infeasible.find("16 tasks"), std::string::npos) << s.estimate.infeasible;
}

// Two independent branches: the DP runs them side by side on two halves of
// the machine when that beats running them one after the other.
TEST(MachineMapping, ParallelBranchesSplitTheDevices) {
  const CostModel cm(toy_machine(), toy_efficiency());
  const MachineMapper mapper(cm);
  Graph g("two");
  const NodeId x = g.add("Input", {{"shape", IntList{1000, 1000}}}, {}, "x");
  const NodeId a = g.add("Weight", {{"shape", IntList{1000, 1000}}}, {}, "a");
  const NodeId b = g.add("Weight", {{"shape", IntList{1000, 1000}}}, {}, "b");
  const NodeId ya = g.add("Linear", {}, {{x, 0}, {a, 0}}, "fa");
  const NodeId yb = g.add("Linear", {}, {{x, 0}, {b, 0}}, "fb");
  g.add_output({ya, 0});
  g.add_output({yb, 0});
  const Strategy s = mapper.map(g);
  ASSERT_TRUE(s.estimate.feasible);
  // Each branch alone: 6.28 ms; side by side (on one node: the DP avoids
  // the slow link), the second one's output moves back to device 0
  // (forward) and its gradient out again (backward). The input is a source,
  // loaded where it is read.
  const double branch = 6e-3 + 2.8e-4;
  const double move = 2 * send_time(toy_machine(), 0, 1, 4e6);
  EXPECT_NEAR(s.estimate.time, branch + move, 1e-9);
  EXPECT_NE(s.views[static_cast<size_t>(ya)].start, s.views[static_cast<size_t>(yb)].start);
  EXPECT_LT(std::max(s.views[static_cast<size_t>(ya)].start, s.views[static_cast<size_t>(yb)].start), 4);
}

// The baselines compute what the model computes.
TEST(Baselines, ExpertTransformerSplitsHeadsAndFeedForward) {
  // Megatron on 4 devices, t = 4: query/key/value and the first FFN Linear
  // by columns, the attention by heads, the output and second FFN Linear by
  // their reduction dimension.
  const Graph g = build_model("bert-large-tiny");
  const Graph e = *expert(g, find_machine("dgx-h100"), 4, 4);
  std::map<std::string, int64_t> tasks;
  for (const Node& n : e.nodes())
    if (!n.name.empty()) tasks[n.name] = n.op->op_class == OpClass::kCompute ? n.outputs[0].num_shards() : 0;
  for (const std::string name : {"layer0.attention.query", "layer0.attention.scores", "layer0.attention.softmax",
                                 "layer0.attention.context", "layer0.intermediate"})
    EXPECT_EQ(tasks.at(name), 4) << name;
  // Partial sums: one shard per replica slot.
  for (const Node& n : e.nodes())
    if (n.name == "layer0.attention.output" || n.name == "layer0.ffn_output") {
      EXPECT_EQ(n.outputs[0].replica, 4) << n.name;
    }
}

// Synchronized BatchNorm: data parallelism splits every BatchNorm's samples
// (its statistics all-reduced), computes the model, and costs about the
// same per sample at 8 and at 64 devices.
TEST(Baselines, DataParallelBatchNormSplitsTheSamples) {
  for (const std::string name : {"resnext-50-tiny", "inception-v3-tiny"}) {
    SCOPED_TRACE(name);
    const Graph g = build_model(name, {{"batch", 8}});
    const Graph dp = data_parallel(g, 4);
    EXPECT_LT(max_difference(g, dp), 1e-4);
    int split = 0;
    for (const Node& n : dp.nodes()) {
      EXPECT_NE(n.op->name, "BatchNorm");
      if (n.op->name == "BatchNormApply" || n.op->name == "BatchSum" || n.op->name == "BatchSquares") {
        EXPECT_EQ(n.op->name == "BatchNormApply" ? n.outputs[0].dims[0].degree : n.outputs[0].replica, 4) << describe(n);
        ++split;
      }
    }
    EXPECT_GT(split, 0);
  }
  // 64 images per GPU on 8 and on 64 GPUs: about the same iteration time.
  // Synchronized, each BatchNorm adds two all-reduces of C numbers forward
  // and two backward, latency-bound across nodes (53 BatchNorms: 45.1 ms on
  // 8 GPUs, 55.1 ms on 64, measured); with statistics per group of 64
  // samples (what DDP's BatchNorm computes) nothing is added.
  const Machine m = find_machine("dgx-h100");
  for (const int64_t group : {0, 64}) {
    double time[2];
    for (int i = 0; i < 2; ++i) {
      const int64_t n = i == 0 ? 8 : 64;
      const CostModel cm(m.with_devices(n), default_efficiency());
      const Graph model = build_model("resnext-50", {{"batch", 64 * n}, {"bn_group", group}});
      const Strategy s = MachineMapper(cm).map(data_parallel(model, n));
      ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
      time[i] = s.estimate.time;
    }
    EXPECT_LT(time[1], (group == 0 ? 1.3 : 1.05) * time[0]) << "bn_group " << group;
  }
}

TEST(Baselines, PreserveTheModelsValues) {
  const Machine m = find_machine("dgx-h100");
  for (const std::string name : {"mlp-tiny", "dlrm-tiny", "bert-large-tiny", "gpt-tiny", "xdl-tiny", "candle-uno-tiny"}) {
    const Graph g = build_model(name);
    std::vector<Graph> variants = {data_parallel(g, 4), data_parallel(g, 2)};
    for (int64_t t : expert_tensor_degrees(m, 4))
      if (auto e = expert(g, m, 4, t)) variants.push_back(*e);
    for (const Graph& v : variants) EXPECT_LT(max_difference(g, v), 1e-3) << name;
  }
}

}  // namespace
}  // namespace pcgx::search
