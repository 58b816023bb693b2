// The execution simulator (search/simulator.h): delta simulation after a
// change of one operator's machine view equals a full simulation of the new
// views, task for task; the simulated iteration on one device is the sum of
// its tasks; data parallelism synchronizes gradients in buckets.
#include "pcgx/search/simulator.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <limits>
#include <random>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/trace.h"
#include "pcgx/search/search.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

bool runs_tasks(const Node& n) { return n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs); }

// A random view of node n's tasks that fits on `devices`.
MachineView random_view(std::mt19937_64& rng, int64_t tasks, int64_t devices) {
  MachineView v;
  const int64_t max_stride = tasks > 1 ? std::max<int64_t>(1, (devices - 1) / (tasks - 1)) : 1;
  v.stride = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::min<int64_t>(max_stride, 3)));
  const int64_t span = (tasks - 1) * v.stride + 1;
  v.start = static_cast<int64_t>(rng() % static_cast<uint64_t>(devices - span + 1));
  return v;
}

void expect_same(const Simulator& delta, const Simulator& full, const std::string& what) {
  const Timeline& a = delta.timeline();
  const Timeline& b = full.timeline();
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto t = static_cast<TaskId>(i);
    ASSERT_EQ(a.task(t).duration, b.task(t).duration) << what << ", task " << i;
    ASSERT_EQ(a.task(t).resources, b.task(t).resources) << what << ", task " << i;
    ASSERT_EQ(a.task(t).start, b.task(t).start) << what << ", task " << i;
    ASSERT_EQ(a.task(t).end, b.task(t).end) << what << ", task " << i;
  }
}

TEST(Simulator, DeltaSimulationEqualsFullSimulationOnTheTinyZoo) {
  // 1,000 random single-operator view changes over the tiny zoo models'
  // data-parallel (degrees 2 and 4) and expert strategies on two nodes of
  // four devices.
  const Machine m = two_level_machine();
  const CostModel cm(m, default_efficiency());
  const MachineMapper mapper(cm);
  std::mt19937_64 rng(2019);
  int64_t changes = 0, rebuilt = 0, tasks = 0;
  const std::vector<std::string> models{"mlp-tiny", "bert-large-tiny", "dlrm-tiny", "candle-uno-tiny", "resnext-50-tiny"};
  std::vector<std::pair<std::string, Graph>> plans;
  for (const std::string& name : models) {
    const Graph model = build_model(name, {{"batch", 8}});
    // Degrees below the device count leave room to move tasks.
    for (int64_t k : {2, 4}) plans.emplace_back(name + " data-parallel " + std::to_string(k), data_parallel(model, k));
    // (The expert's on half the devices: on all of them every operator
    // of Megatron's plan runs on every device, with nowhere to move.)
    if (auto e = expert(model, m, 4, 2)) plans.emplace_back(name + " expert", *e);
  }
  const int steps = static_cast<int>((1000 + plans.size() - 1) / plans.size());
  for (const auto& [name, g] : plans) {
    const Strategy s = mapper.map(g);
    ASSERT_TRUE(s.estimate.feasible) << name << ": " << s.estimate.infeasible;
    std::vector<NodeId> movable;
    for (const Node& n : g.nodes())
      if (runs_tasks(n) && s.views[static_cast<size_t>(n.id)].placed() && Placement(g, s.views, cm.devices()).tasks(n.id).tasks < cm.devices())
        movable.push_back(n.id);
    ASSERT_FALSE(movable.empty());
    Simulator sim(g, s.views, cm);
    double changed = 0;
    for (int step = 0; step < steps; ++step, ++changes) {
      const NodeId n = movable[rng() % movable.size()];
      const Placement p(g, sim.views(), cm.devices());
      const MachineView v = random_view(rng, p.tasks(n).tasks, cm.devices());
      const double before = sim.time();
      sim.set_view(n, v);
      changed += sim.time() != before;
      rebuilt += sim.rebuilt(), tasks += static_cast<int64_t>(sim.timeline().size());
      const Simulator full(g, sim.views(), cm);
      expect_same(sim, full, name + " step " + std::to_string(step));
      ASSERT_EQ(sim.time(), full.time());
    }
    // The changes are not idle: they move the iteration time.
    EXPECT_GT(changed, steps / 4) << name;
  }
  EXPECT_GE(changes, 1000);
  // A change rebuilds a fraction of the tasks.
  EXPECT_LT(rebuilt, tasks);
}

TEST(Simulator, OneDeviceRunsEveryTaskInTurn) {
  // On one device nothing overlaps and nothing moves: the iteration is the
  // sum of the compute tasks, and the critical path is all compute.
  const Machine m = two_level_machine().with_devices(1);
  const CostModel cm(m, default_efficiency());
  const MachineMapper mapper(cm);
  const Graph g = build_model("mlp-tiny");
  const Strategy s = mapper.map(g);
  const Simulator sim(g, s.views, cm);
  double sum = 0;
  for (const TimedTask& t : sim.timeline().tasks()) sum += t.duration;
  const SimulationSummary sum_up = sim.summary();
  EXPECT_DOUBLE_EQ(sim.time(), sum);
  EXPECT_DOUBLE_EQ(sum_up.compute, sim.time());
  EXPECT_EQ(sum_up.communication_total, 0.0);
  EXPECT_EQ(sum_up.buckets, 0);
  EXPECT_EQ(sum_up.devices_used, 1);
  // The DP adds the same terms: the same iteration time.
  EXPECT_NEAR(sim.time(), s.estimate.time, 1e-12);
  // The backward pass: its tasks, as the DP counts them.
  double backward = 0;
  for (size_t i = 0; i < sim.timeline().size(); ++i)
    if (sim.info(static_cast<TaskId>(i)).kind == SimKind::kBackward) backward += sim.timeline().task(static_cast<TaskId>(i)).duration;
  EXPECT_GT(backward, 0.0);
  EXPECT_NEAR(sum_up.backward, backward, 1e-12);
  EXPECT_NEAR(sum_up.backward, s.estimate.backward, 1e-12);
  EXPECT_NEAR(simulated_estimate(sim).backward, sum_up.backward, 0.0);
}

// A sum of replica slots on one device (Unity's hybrid add there) is an
// add the device computes: it holds the device as the kernels do, so on
// one device the step is still the sum of its tasks (an independent Relu
// beside it does not overlap it).
TEST(Simulator, ASumOfSlotsOnOneDeviceHoldsIt) {
  const Machine m = two_level_machine().with_devices(1);
  const CostModel cm(m, default_efficiency());
  Graph g("local-sum");
  auto add = [&](const std::string& op, Attributes a, std::vector<TensorRef> in) { return TensorRef{g.add(op, std::move(a), in), 0}; };
  const TensorRef x = add("Input", {{"shape", IntList{64, 256}}}, {}), y = add("Input", {{"shape", IntList{64, 256}}}, {});
  const TensorRef z = add("Input", {{"shape", IntList{64, 256}}}, {});
  const TensorRef r = add("Reduce", {{"degree", int64_t{2}}}, {add("Concat", {{"axis", int64_t{-1}}}, {add("Relu", {}, {x}), add("Relu", {}, {y})})});
  g.add_output(r), g.add_output(add("Relu", {}, {z}));
  std::vector<MachineView> views(g.size());
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs)) views[static_cast<size_t>(n.id)] = {0, 1, {}};
  const Simulator sim(g, views, cm);
  double sum = 0, reduce = 0;
  for (size_t i = 0; i < sim.timeline().size(); ++i) {
    const TimedTask& t = sim.timeline().task(static_cast<TaskId>(i));
    sum += t.duration;
    if (sim.info(static_cast<TaskId>(i)).node == r.node) reduce += t.duration;
  }
  EXPECT_GT(reduce, 0.0);
  EXPECT_DOUBLE_EQ(sim.time(), sum);
}

TEST(Simulator, DataParallelismSynchronizesGradientsBesideTheBackwardPass) {
  const Machine m = two_level_machine();
  const CostModel cm(m, default_efficiency());
  const MachineMapper mapper(cm);
  const Graph g = data_parallel(build_model("mlp-tiny", {{"batch", 64}}), 8);
  const Strategy s = mapper.map(g);
  ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
  const Simulator sim(g, s.views, cm);
  const SimulationSummary sum = sim.summary();
  EXPECT_GT(sum.buckets, 0);
  EXPECT_GT(sum.sync_total, 0.0);
  EXPECT_EQ(sum.devices_used, 8);
  // The critical path's terms add up to the iteration.
  EXPECT_NEAR(sum.compute + sum.communication + sum.sync, sum.time, 1e-12 * sum.time);
  EXPECT_GT(sum.backward, 0.0);
  EXPECT_LT(sum.backward, sum.time);
  // Every device takes part in every bucket (one group of all eight).
  for (const DeviceSummary& d : sum.devices) EXPECT_DOUBLE_EQ(d.sync, sum.sync_total);
  // Only the exposed part of the synchronization lengthens the iteration.
  EXPECT_LE(sum.sync, sum.sync_total);
  double compute_only = 0;
  for (size_t i = 0; i < sim.timeline().size(); ++i)
    if (sim.info(static_cast<TaskId>(i)).kind != SimKind::kSync && sim.timeline().task(static_cast<TaskId>(i)).resources == std::vector<ResourceId>{0})
      compute_only += sim.timeline().task(static_cast<TaskId>(i)).duration;
  EXPECT_GE(sum.time, compute_only);
}

// On devices that do their own communication the buckets hold the device
// itself and start after its last backward task; the DP's estimate hides
// none of them either.
TEST(Simulator, DevicesThatDoNotOverlapSynchronizeAfterTheBackwardPass) {
  Machine m = two_level_machine();
  m.device.overlaps_communication = false;
  CommOptions small;  // a bucket per layer or so: the first are ready early
  small.bucket_bytes = 1024;
  const CostModel cm(m, default_efficiency(), {}, small);
  const MachineMapper mapper(cm);
  const Graph g = data_parallel(build_model("mlp-tiny", {{"batch", 64}}), 8);
  const Strategy s = mapper.map(g);
  ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
  EXPECT_GT(s.estimate.sync, 0.0);
  EXPECT_EQ(s.estimate.sync_hidden, 0.0);
  const Simulator sim(g, s.views, cm);
  const SimulationSummary sum = sim.summary();
  EXPECT_GT(sum.buckets, 1);
  EXPECT_DOUBLE_EQ(sum.sync, sum.sync_total);
  const Timeline& tl = sim.timeline();
  double last_backward = 0, first_sync = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < tl.size(); ++i) {
    const auto t = static_cast<TaskId>(i);
    const auto& r = tl.task(t).resources;
    if (std::find(r.begin(), r.end(), ResourceId{0}) == r.end()) continue;  // device 0's own
    if (sim.info(t).kind == SimKind::kBackward) last_backward = std::max(last_backward, tl.task(t).end);
    if (sim.info(t).kind == SimKind::kSync) first_sync = std::min(first_sync, tl.task(t).start);
  }
  ASSERT_GT(last_backward, 0.0);
  EXPECT_GE(first_sync, last_backward);
  // Overlapping devices start the first buckets during the backward pass:
  // the same plan takes less time.
  const CostModel overlapping(two_level_machine(), default_efficiency(), {}, small);
  EXPECT_LT(Simulator(g, s.views, overlapping).summary().time, sum.time);
}

TEST(Simulator, RefusesATaskOnADeviceTheMachineLacks) {
  const Machine m = two_level_machine();
  const CostModel cm(m, default_efficiency());
  const MachineMapper mapper(cm);
  const Graph g = data_parallel(build_model("mlp-tiny", {{"batch", 64}}), 8);
  Strategy s = mapper.map(g);
  for (const Node& n : g.nodes())
    if (runs_tasks(n)) s.views[static_cast<size_t>(n.id)] = {5, 1, {}};
  EXPECT_THROW(Simulator sim(g, s.views, cm), Error);
}

TEST(Simulator, NamesItsResources) {
  const Machine m = two_level_machine();
  const CostModel cm(m, default_efficiency());
  const MachineMapper mapper(cm);
  const Graph g = build_model("mlp-tiny");
  const Simulator sim(g, mapper.map(g).views, cm);
  EXPECT_EQ(sim.resource_name(3), "device 3");
  EXPECT_EQ(sim.resource_name(8 + 2), "fast port of device 2");
  // Two adapters per node into the slow level.
  EXPECT_EQ(sim.resource_name(8 + 8 + 0), "slow adapter 0 of devices 0-3");
  EXPECT_EQ(sim.resource_name(8 + 8 + 3), "slow adapter 1 of devices 4-7");
  EXPECT_EQ(sim.resource_name(8 + 8 + 4 + 6), "sync channel of device 6");
}

TEST(Simulator, TheTraceHoldsEveryTaskOnEveryResourceItHolds) {
  const Machine m = two_level_machine();
  const CostModel cm(m, default_efficiency());
  const MachineMapper mapper(cm);
  const Graph g = *expert(build_model("bert-large-tiny", {{"batch", 8}}), m, 8, 4);
  const Simulator sim(g, mapper.map(g).views, cm);
  const auto doc = nlohmann::json::parse(simulation_trace_json(sim));
  std::map<std::pair<int64_t, int64_t>, int> seen;  // (task, resource) -> events
  std::set<int64_t> named_tracks;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M") {
      if (e.at("name") == "thread_name") named_tracks.insert(e.at("tid").get<int64_t>());
      continue;
    }
    ASSERT_EQ(e.at("ph"), "X");
    const auto t = e.at("args").at("task").get<int64_t>();
    const TimedTask& task = sim.timeline().task(static_cast<TaskId>(t));
    EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), task.start * 1e6);
    // A task holding links in the background spans its wait for them.
    EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), (task.background.empty() ? task.duration : task.end - task.start) * 1e6);
    ++seen[{t, e.at("tid").get<int64_t>()}];
  }
  int64_t expected = 0;
  for (size_t i = 0; i < sim.timeline().size(); ++i) {
    const TimedTask& task = sim.timeline().task(static_cast<TaskId>(i));
    if (task.duration <= 0) continue;
    for (ResourceId r : task.resources) {
      EXPECT_EQ((seen[{static_cast<int64_t>(i), r}]), 1) << "task " << i << " on " << sim.resource_name(r);
      EXPECT_TRUE(named_tracks.count(r));
      ++expected;
    }
  }
  EXPECT_GT(expected, 100);
  EXPECT_EQ(static_cast<int64_t>(seen.size()), expected);
}

}  // namespace
}  // namespace pcgx::search
