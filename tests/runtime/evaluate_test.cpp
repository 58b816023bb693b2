// Evaluation: the loss of given weights over a data set, forward only; the
// same as the trainer's loss for those weights, the same on 1 and 4
// devices, and the accuracy of a classifier counted by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/evaluate.h"
#include "pcgx/runtime/synthetic_task.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"

namespace pcgx::runtime {
namespace {

struct Plan {
  Graph graph;
  std::vector<MachineView> views;
};

Plan data_parallel(const Graph& model, int devices) {
  const search::CostModel cm(search::find_machine("cpu-host").with_devices(devices), search::default_efficiency());
  const search::Strategy s = search::MachineMapper(cm).map(search::data_parallel(model, devices));
  return {s.graph, {s.views.begin(), s.views.end()}};
}

// After 5 updates the trainer's 6th loss is the loss of the weights it
// returns after 5, on the one batch.
TEST(Evaluate, IsTheTrainersLossForTheSameWeights) {
  const Graph model = build_model("mlp-tiny", {});
  TrainOptions t;
  t.seed = 3, t.batches = 1, t.steps = 5;
  const TrainResult five = train(model, {}, 1, t);
  t.steps = 6;
  const TrainResult six = train(model, {}, 1, t);
  EvalOptions e;
  e.weights = &five.parameters, e.seed = 3, e.batches = 1;
  const EvalResult r = evaluate(model, {}, 1, e);
  EXPECT_EQ(r.batches, 1);
  EXPECT_EQ(r.loss, six.losses[5]);
  EXPECT_FALSE(r.classification);
}

Graph classifier() {
  GraphBuilder b("classifier");
  TensorRef x = b.input("x", {8, 16});
  x = b.linear(x, 32, "relu", true, "hidden");
  x = b.linear(x, 10, "none", true, "logits");
  b.graph().add_output(b.softmax_cross_entropy(x, b.input("label", {8}, DataType::kInt64, 10)));
  return b.finish();
}

TEST(Evaluate, SameOnOneAndFourDevicesWithTheAccuracyOfTheLogits) {
  const Graph model = classifier();
  NamedTensors w;
  for (const Node& n : model.nodes())
    if (n.op->is_weight) w[n.name] = initial_weight(n, 7);
  EvalOptions e;
  e.weights = &w, e.seed = 7, e.batches = 3;
  const EvalResult one = evaluate(model, {}, 1, e);
  const Plan dp = data_parallel(model, 4);
  const EvalResult four = evaluate(dp.graph, dp.views, 4, e);
  EXPECT_EQ(one.batches, 3);
  EXPECT_EQ(one.samples, 24);
  EXPECT_TRUE(one.classification);
  EXPECT_NEAR(four.loss, one.loss, 1e-6 * std::fabs(one.loss));
  EXPECT_EQ(four.accuracy, one.accuracy);
  EXPECT_EQ(four.samples, one.samples);
  // The accuracy by hand: the reference interpreter's logits, argmax against the labels.
  const SyntheticTask task(model, 7, 3);
  int64_t correct = 0;
  TensorRef logits = model.node(model.outputs().at(0).node).inputs[0];
  for (int64_t b = 0; b < 3; ++b) {
    const auto values = pcgx::evaluate<float>(model, [&](const Node& n) {
      return n.op->is_weight ? w.at(n.name) : task.batch(b).at(n.name);
    });
    const Tensor<float> y = gather_slot(values[static_cast<size_t>(logits.node)][static_cast<size_t>(logits.output)], 0);
    const Tensor<float>& label = task.batch(b).at("label");
    for (int64_t i = 0; i < 8; ++i) {
      const float* row = y.data.data() + i * 10;
      correct += std::max_element(row, row + 10) - row == static_cast<int64_t>(label.data[static_cast<size_t>(i)]);
    }
  }
  EXPECT_DOUBLE_EQ(one.accuracy, static_cast<double>(correct) / 24.0);
}

TEST(Evaluate, NeedsEveryWeight) {
  const Graph model = build_model("mlp-tiny", {});
  NamedTensors w;
  EvalOptions e;
  e.weights = &w;
  EXPECT_THROW(evaluate(model, {}, 1, e), Error);
}

}  // namespace
}  // namespace pcgx::runtime
