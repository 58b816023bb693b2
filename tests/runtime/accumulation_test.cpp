// Micro-batches in the runtime (execution_plan.h): a plan whose inputs are
// pipelined runs each step one micro-batch at a time, forward then
// backward, the weights' gradients adding up before the one
// synchronization and update. Against the same plan in one batch and one
// device: the same losses and weights up to the order of the sums
// (dropout draws the same masks, the loss divides by the whole batch);
// against the plan's own shapes: one micro-batch's activations held.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/device_executor.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/synthetic_task.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/rulesets/ruleset.h"
#include "mapped_plan.h"
#include "same_training.h"
#include "tensor_compare.h"

namespace pcgx::runtime {
namespace {


using Plan = pcgx::testing::MappedPlan;
using pcgx::testing::mapped_plan;

// The data-parallel plan over `devices`, its inputs cut into
// `micro_batches` (search/pipeline.h's gradient accumulation).
Plan accumulating(const std::string& model, int devices, int64_t micro_batches) {
  const Graph dp = search::data_parallel(build_model(model, {{"batch", 8}}), devices);
  return mapped_plan(search::pipelined(dp, micro_batches, true), devices);
}

TrainResult run(const Plan& p) {
  TrainOptions o;
  o.steps = 6, o.seed = 3, o.batches = 2, o.optimizer.lr = 0.05, o.optimizer.momentum = 0.9;
  return train(p.graph, p.views, p.devices, o);
}

using pcgx::testing::expect_same_training;

TEST(Accumulation, MicroBatchesReachOneBatchsWeights) {
  for (const char* model : {"mlp-tiny", "bert-large-tiny", "gpt-tiny"}) {
    SCOPED_TRACE(model);
    const Plan whole = accumulating(model, 2, 1), four = accumulating(model, 2, 4);
    EXPECT_EQ(make_plan(whole.graph, whole.views, 2).micro_batches, 1);
    EXPECT_EQ(make_plan(four.graph, four.views, 2).micro_batches, 4);
    const TrainResult a = run(whole), b = run(four);
    expect_same_training(b, a, 1e-5);
    // And one device, one batch: the unpartitioned model.
    expect_same_training(b, run({build_model(model, {{"batch", 8}}), {}, 1}), 1e-4);
    // The same bytes cross between devices: every micro-batch's share of
    // the forward and backward messages, the gradients once.
    EXPECT_EQ(b.bytes_sent, a.bytes_sent);
  }
}

// Micro-batches with tensor parallelism inside: the expert's plan for
// DLRM (tables split by columns, layout changes between degrees) on 4
// devices, accumulating over 2.
TEST(Accumulation, LayoutChangesRunPerMicroBatch) {
  const Graph g = build_model("dlrm-tiny", {{"batch", 8}});
  const Graph e = *search::expert(g, search::find_machine("dgx-h100").with_devices(4), 4, 2);
  const Plan one = mapped_plan(e, 4), two = mapped_plan(search::pipelined(e, 2, true), 4);
  ASSERT_EQ(make_plan(two.graph, two.views, 4).micro_batches, 2);
  const TrainResult a = run(one), b = run(two);
  expect_same_training(b, a, 1e-5);
}

// An interleaved pipeline (2 stages of 2 devices, 2 chunks each, chunk j on
// stage j mod 2): the layers go back and forth between the two stages'
// devices, every micro-batch crossing 3 boundaries; it trains as one
// device does.
TEST(Accumulation, InterleavedPipelineTrainsAsOneDevice) {
  const Graph g = build_model("bert-large-tiny", {{"batch", 8}});
  const search::PipelineResult r = pcgx::testing::pipeline_plan(g, "cpu-host", 4, search::Algorithm::kDataParallel, {2, 2, 2});
  ASSERT_EQ(r.stage.size(), 4u);
  std::set<int64_t> firsts;
  for (const auto& c : r.stage) firsts.insert(c.first_device);
  EXPECT_EQ(firsts, (std::set<int64_t>{0, 2}));
  const Plan p = pcgx::testing::plan_of(r, 4);
  ASSERT_EQ(make_plan(p.graph, p.views, 4).micro_batches, 2);
  expect_same_training(run(p), run({g, {}, 1}), 1e-4);
}

// Megatron's plan pipelined over 2 stages of 4 devices (t = 2): each
// boundary of 2 samples per micro-batch is scattered over the next stage's
// 4 devices by samples and hidden features and gathered there; it trains
// as one device does.
TEST(Accumulation, ScatteredStageBoundariesTrainAsOneDevice) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const search::PipelineResult r = pcgx::testing::pipeline_plan(g, "dgx-h100", 8, search::Algorithm::kExpert, {2, 4}, 2);
  const Plan p = pcgx::testing::plan_of(r, 8);
  expect_same_training(run(p), run({g, {}, 1}), 1e-4);
}

// What a device holds: the pipelined tensors' gradients and the values the
// step keeps (or holds for a while: search's memory model) at one
// micro-batch's size, so with 4 micro-batches the step's buffers shrink by
// 3/4 of those gradients' whole-batch bytes and by what the memory model
// says the values shrink. A later micro-batch's gradient of a weight is
// added by its kernel into the sum so far (DeviceExecutor::sums_in_place):
// no scratch buffer per weight shape comes back (one per shape until
// 2026-11-30, a buffer per weight, a second copy of the gradients, until
// 2026-11-29).
TEST(Accumulation, HoldsOneMicroBatchOfActivations) {
  const Plan whole = accumulating("bert-large-tiny", 1, 1), four = accumulating("bert-large-tiny", 1, 4);
  double gradients = 0;  // of the pipelined tensors, whole batch
  for (const Node& n : four.graph.nodes())
    for (const ParallelTensorShape& s : n.outputs)
      if (s.slices() > 1) gradients += static_cast<double>(s.shard_elements() * s.num_shards()) * sizeof(float);
  ASSERT_GT(gradients, 0);
  auto values = [](const Plan& p) {
    const search::DeviceMemory m = search::memory_breakdown(Placement(p.graph, p.views, p.devices), {})[0];
    return m.activations + m.transient;
  };
  const double fewer_values = values(whole) - values(four);
  ASSERT_GT(fewer_values, 0);
  const TrainResult a = run(whole), b = run(four);
  EXPECT_LE(static_cast<double>(b.buffer_bytes), static_cast<double>(a.buffer_bytes) - 0.75 * gradients - fewer_values)
      << "whole batch " << a.buffer_bytes << " B, 4 micro-batches " << b.buffer_bytes << " B, pipelined gradients "
      << gradients << " B, values " << fewer_values << " B fewer";
  expect_same_training(b, a, 1e-5);
}

// Eight same-shaped layers whose weights outweigh their activations: summing
// each weight's gradient over 4 micro-batches in place costs no buffer
// (until 2026-11-30 a scratch buffer per shape, a layer's weight; until
// 2026-11-29 a buffer per weight, 8 layers' worth), so the step holds less
// than in one batch by at least what its activations' gradients shrink.
TEST(Accumulation, SummingWeightGradientsHoldsNoSecondCopyOfThem) {
  const Graph model = build_model("mlp-tiny", {{"batch", 8}, {"layers", 8}, {"hidden", 64}});
  const Plan whole = mapped_plan(search::pipelined(model, 1, true), 1), four = mapped_plan(search::pipelined(model, 4, true), 1);
  double gradients = 0;  // of the pipelined tensors, whole batch
  for (const Node& n : four.graph.nodes())
    for (const ParallelTensorShape& s : n.outputs)
      if (s.slices() > 1) gradients += static_cast<double>(s.shard_elements() * s.num_shards()) * sizeof(float);
  const TrainResult a = run(whole), b = run(four);
  EXPECT_LE(static_cast<double>(b.buffer_bytes), static_cast<double>(a.buffer_bytes) - 0.75 * gradients)
      << "one batch " << a.buffer_bytes << " B, 4 micro-batches " << b.buffer_bytes << " B, pipelined gradients " << gradients << " B";
  expect_same_training(b, a, 1e-5);
}

// A weight read twice by one node (its square, a layout computed once per
// step, run after the last micro-batch): both of the node's input
// gradients are the one weight gradient, so neither is summed in place
// (two kernel arguments on one buffer); the step is the one-batch step.
TEST(Accumulation, AWeightReadTwiceByOneNodeIsNotSummedInPlace) {
  Graph g("squared-weight");
  const TensorRef x{g.add("Input", {{"shape", IntList{8, 4}}}, {}, "x"), 0};
  const TensorRef w{g.add("Weight", {{"shape", IntList{4, 4}}}, {}, "w"), 0};
  const TensorRef w2{g.add("EwMul", {}, {w, w}, "w2"), 0};
  const TensorRef y{g.add("Linear", {{"use_bias", false}}, {x, w2}, "y"), 0};
  const TensorRef t{g.add("Input", {{"shape", IntList{8, 4}}}, {}, "labels"), 0};
  g.add_output({g.add("MSELoss", {}, {y, t}, "loss"), 0});
  const Plan one = mapped_plan(search::pipelined(g, 1, true), 1), two = mapped_plan(search::pipelined(g, 2, true), 1);
  expect_same_training(run(two), run(one), 1e-5);
}

// Forward alone (pcgx eval) runs the micro-batches too: the whole batch's loss.
TEST(Accumulation, ForwardAloneSumsTheLoss) {
  const Plan whole = accumulating("mlp-tiny", 2, 1), four = accumulating("mlp-tiny", 2, 4);
  const ExecutionPlan pw = make_plan(whole.graph, whole.views, 2), pf = make_plan(four.graph, four.views, 2);
  const Graph model = build_model("mlp-tiny", {{"batch", 8}});
  Tensor<float> x({8, 16}), y({8, 16});
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = std::sin(0.1f * static_cast<float>(i)), y.data[i] = std::cos(0.3f * static_cast<float>(i));
  auto loss = [&](const Plan& p, const ExecutionPlan& plan) {
    double l = 0;
    InProcessWorld world(2);
    world.run([&](Communicator& c) {
      DeviceExecutor ex(plan, c);
      for (const Node& n : p.graph.nodes())
        if (n.op->op_class == OpClass::kSource) ex.set_source(n.id, n.op->is_weight ? initial_weight(n, 5) : n.name == model.node(0).name ? x : y);
      const double v = ex.forward();
      if (c.rank() == 0) l = v;
      if (plan.micro_batches > 1) {
        EXPECT_THROW(ex.backward(), Error);
      }
    });
    return l;
  };
  const double a = loss(whole, pw), b = loss(four, pf);
  EXPECT_GT(a, 0);
  EXPECT_NEAR(b, a, 1e-6 * a);
}

// Micro-batch counts that differ within one graph: one error naming the node.
TEST(Accumulation, OneMicroBatchCountPerGraph) {
  GraphBuilder b("two-counts");
  auto pipeline = [&](TensorRef t, int64_t k) { return b.op("Pipeline", {{"dim", int64_t{0}}, {"degree", k}}, {t}); };
  const TensorRef x = pipeline(b.input("x", {8, 4}), 2), t = pipeline(b.input("t", {8, 4}), 2);
  b.graph().add_output(b.mse_loss(b.linear(x, 4), t));
  b.unary("Relu", pipeline(b.input("z", {8, 4}), 4));
  const Graph g = b.finish();
  try {
    make_plan(g, {}, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("micro-batches"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("node"), std::string::npos) << e.what();
  }
}

// Micro-batches start from the whole step's loss: a graph whose output 0
// is itself cut into micro-batches is refused, naming it.
TEST(Accumulation, TheLossIsWhole) {
  GraphBuilder b("pipelined-output");
  const TensorRef x = b.op("Pipeline", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {b.input("x", {8, 4})});
  b.graph().add_output(b.unary("Relu", x));
  const Graph g = b.finish();
  try {
    make_plan(g, {}, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("graph output 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pcgx::runtime
