// The measured timeline of a step (runtime/step_trace.h, `pcgx run
// --trace`), and the order it shows (device_executor.h): a device sends a
// shard as soon as it is final, not when the reader's turn comes, and
// waits for a gradient contribution only where the gradient is needed.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>
#include <nlohmann/json.hpp>
#include <tuple>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/execution_plan.h"
#include "pcgx/runtime/step_trace.h"
#include "pcgx/runtime/synthetic_task.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"

namespace pcgx::runtime {
namespace {

// x feeds a chain of three Linears on device 0 and one Linear on device 1;
// their sum is the loss's input. In graph order the branch on device 1
// comes after the whole chain.
struct Branches {
  Graph graph;
  std::vector<MachineView> views;
  NodeId side = -1;  // the Linear on device 1
};

Branches branches() {
  GraphBuilder b("branches");
  const TensorRef x = b.input("x", {8, 32});
  TensorRef a = x;
  for (int i = 0; i < 3; ++i) a = b.linear(a, 32, "relu", false, "chain" + std::to_string(i));
  const TensorRef side = b.linear(x, 32, "none", false, "side");
  const TensorRef y = b.binary("EwAdd", a, side, "sum");
  b.graph().add_output(b.mse_loss(y, b.input("target", {8, 32}), "loss"));
  Branches r{b.finish(), {}, side.node};
  r.views.assign(r.graph.size(), MachineView{});
  for (const Node& n : r.graph.nodes())
    if (n.op->op_class == OpClass::kCompute) r.views[static_cast<size_t>(n.id)] = MachineView{n.id == r.side ? 1 : 0, 1, {}};
  return r;
}

TrainResult traced(const Graph& g, const std::vector<MachineView>& views, int devices) {
  TrainOptions o;
  o.steps = 3, o.batches = 1, o.trace_step = 2;
  return train(g, views, devices, o);
}

// What every trace must hold: per device, events in program order that do
// not overlap, one kernel event per task the plan gives the device, a
// matching recv for every send, one update.
void expect_complete(const Graph& g, const std::vector<MachineView>& views, int devices, const StepTrace& t) {
  ASSERT_EQ(t.step, 2);
  ASSERT_EQ(t.devices.size(), static_cast<size_t>(devices));
  const ExecutionPlan plan = make_plan(g, views, devices);
  std::map<std::tuple<NodeId, int, int, bool>, int> sends, recvs;  // (node, from, to, backward)
  for (int d = 0; d < devices; ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    const auto& events = t.devices[static_cast<size_t>(d)];
    int forward = 0, backward = 0, updates = 0, tasks = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      const StepEvent& e = events[i];
      EXPECT_LE(e.start, e.end);
      EXPECT_GE(e.start, 0);
      if (i > 0) {
        EXPECT_LE(events[i - 1].end, e.start) << "events overlap on one device";
      }
      forward += e.kind == StepEventKind::kForward, backward += e.kind == StepEventKind::kBackward;
      updates += e.kind == StepEventKind::kUpdate;
      if (e.kind == StepEventKind::kSend) ++sends[{e.node, d, e.peer, e.backward}];
      if (e.kind == StepEventKind::kRecv) ++recvs[{e.node, e.peer, d, e.backward}];
    }
    for (const NodePlan& np : plan.nodes)
      if (np.run == NodePlan::Run::kTasks)
        for (int dev : np.task_device) tasks += dev == d;
    EXPECT_EQ(forward, tasks);
    EXPECT_EQ(backward, tasks);
    EXPECT_EQ(updates, 1);
  }
  EXPECT_EQ(sends, recvs);
  // The Chrome trace: a track per device and every event on it.
  const nlohmann::json doc = nlohmann::json::parse(step_trace_json(g, t));
  size_t events = 0, tracks = 0;
  for (const auto& e : doc.at("traceEvents")) {
    events += e.at("ph") == "X";
    tracks += e.at("ph") == "M" && e.at("name") == "thread_name";
  }
  size_t expected = 0;
  for (const auto& d : t.devices) expected += d.size();
  EXPECT_EQ(events, expected);
  EXPECT_EQ(tracks, static_cast<size_t>(devices));
}

TEST(StepTrace, HoldsEveryKernelMessageAndUpdate) {
  const Branches b = branches();
  const TrainResult r = traced(b.graph, b.views, 2);
  expect_complete(b.graph, b.views, 2, r.trace);
  // A zoo plan with layout changes and collectives too.
  const Graph model = build_model("dlrm-tiny", {{"batch", 8}});
  const search::CostModel cm(search::find_machine("dgx-h100").with_devices(4), search::default_efficiency());
  const search::Strategy s = search::MachineMapper(cm).map(*search::expert(model, cm.machine(), 4, 2));
  const std::vector<MachineView> views(s.views.begin(), s.views.end());
  const TrainResult z = traced(s.graph, views, 4);
  expect_complete(s.graph, views, 4, z.trace);
  int collectives = 0;
  for (const auto& d : z.trace.devices)
    for (const StepEvent& e : d) collectives += e.kind == StepEventKind::kCollective || e.kind == StepEventKind::kGradientSync;
  EXPECT_GT(collectives, 0);
}

TEST(StepTrace, NothingRecordedUnlessAsked) {
  const Branches b = branches();
  TrainOptions o;
  o.steps = 2, o.batches = 1;
  EXPECT_EQ(train(b.graph, b.views, 2, o).trace.step, -1);
  o.trace_step = 2;  // beyond the run
  EXPECT_THROW(train(b.graph, b.views, 2, o), Error);
}

// Device 0 sends x to device 1 before it runs the chain, so the branch on
// device 1 need not wait for it; sent at the branch's turn in graph order,
// device 1 would wait for the whole chain. Program order on device 0 is
// deterministic, so this holds on any machine, however loaded.
TEST(StepTrace, ShardsAreSentAsSoonAsTheyAreFinal) {
  const Branches b = branches();
  const TrainResult r = traced(b.graph, b.views, 2);
  const auto& d0 = r.trace.devices[0];
  size_t send = d0.size(), first_chain = d0.size();
  for (size_t i = 0; i < d0.size(); ++i) {
    const StepEvent& e = d0[i];
    if (e.kind == StepEventKind::kSend && e.node == b.side && !e.backward && send == d0.size()) send = i;
    if (e.kind == StepEventKind::kForward && b.graph.node(e.node).name.rfind("chain", 0) == 0 && first_chain == d0.size()) first_chain = i;
  }
  ASSERT_LT(send, d0.size()) << "device 0 never sent x to the branch";
  ASSERT_LT(first_chain, d0.size());
  EXPECT_LT(send, first_chain);
  // And device 1 ran the branch: its kernel is there.
  bool side = false;
  for (const StepEvent& e : r.trace.devices[1]) side = side || (e.kind == StepEventKind::kForward && e.node == b.side);
  EXPECT_TRUE(side);
}

// Backward, device 0 receives the branch's contribution to x's gradient
// just before the next reader of x (chain0) runs backward, not at the
// branch's turn: it runs chain2 and chain1 backward meanwhile.
TEST(StepTrace, ContributionsAreReceivedWhereTheyAreNeeded) {
  const Branches b = branches();
  const TrainResult r = traced(b.graph, b.views, 2);
  const auto& d0 = r.trace.devices[0];
  auto position = [&](StepEventKind kind, const std::string& name) {
    for (size_t i = 0; i < d0.size(); ++i)
      if (d0[i].kind == kind && d0[i].backward && d0[i].node >= 0 && b.graph.node(d0[i].node).name == name) return i;
    return d0.size();
  };
  const size_t recv = position(StepEventKind::kRecv, "side");
  ASSERT_LT(recv, d0.size()) << "device 0 never received the branch's gradient";
  EXPECT_GT(recv, position(StepEventKind::kBackward, "chain1"));
  EXPECT_LT(recv, position(StepEventKind::kBackward, "chain0"));
}

// A timed step that stalls (here: its batch takes 200 ms to arrive) is
// left out of the timings, so one stall does not inflate a profile.
TEST(Timing, AStalledStepIsLeftOut) {
  const Graph g = build_model("mlp-tiny");
  struct Slow final : BatchSource {
    SyntheticTask task;
    explicit Slow(const Graph& graph) : task(graph, 1, 1) {}
    const std::map<std::string, Tensor<float>>& batch(int64_t step) const override {
      if (step == 6) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return task.batch(0);
    }
    std::string describe() const override { return "slow"; }
    // Two batches in turn, so every step reads one (a step on the batch the
    // devices already hold reads none).
    int64_t batches() const override { return 2; }
  } slow(g);
  TrainOptions o;
  o.steps = 10, o.time_kernels = true, o.data = &slow;
  const TrainResult r = train(g, {}, 1, o);
  ASSERT_EQ(r.device_times.size(), 1u);
  const DeviceTime& d = r.device_times[0];
  EXPECT_GE(d.stalled, 1);
  EXPECT_EQ(d.steps + d.stalled, r.timed_steps);
  EXPECT_LT(d.step / static_cast<double>(d.steps), 0.1) << "the stalled step was summed";
}

// The devices keep the batch they hold: a step on the same batch again
// uploads nothing (one batch: read once in ten steps); batches in turn
// are read every step. The losses are the same either way.
TEST(Timing, AHeldBatchIsNotUploadedAgain) {
  const Graph g = build_model("mlp-tiny");
  struct Counted final : BatchSource {
    SyntheticTask task;
    int64_t count;
    mutable int reads = 0;
    Counted(const Graph& graph, int64_t n) : task(graph, 1, 1), count(n) {}
    const std::map<std::string, Tensor<float>>& batch(int64_t) const override {
      ++reads;
      return task.batch(0);
    }
    std::string describe() const override { return "counted"; }
    int64_t batches() const override { return count; }
  } one(g, 1), two(g, 2);
  TrainOptions o;
  o.steps = 10;
  o.data = &one;
  const TrainResult a = train(g, {}, 1, o);
  o.data = &two;
  const TrainResult b = train(g, {}, 1, o);
  EXPECT_EQ(one.reads, 1);
  EXPECT_EQ(two.reads, 10);
  EXPECT_EQ(a.losses, b.losses);
}

}  // namespace
}  // namespace pcgx::runtime
