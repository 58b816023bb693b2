// Checkpoints and given weights: 10 steps, a checkpoint, and 10 more from it
// equal 20 steps bit for bit, on 1 and 4 devices, with SGD and Adam; the
// checkpoint survives the disk; initial weights are the ones trained from,
// checked by name and shape.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/synthetic_task.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "temp_dir.h"

namespace pcgx::runtime {
namespace {

namespace fs = std::filesystem;

struct Plan {
  Graph graph;
  std::vector<MachineView> views;
  int devices = 1;
};

Plan one_device(const Graph& model) { return {model, {}, 1}; }

// The expert's plan on 4 devices: model parallel tables, data parallel MLPs.
Plan four_devices(const Graph& model) {
  const search::CostModel cm(search::find_machine("dgx-h100").with_devices(4), search::default_efficiency());
  const search::Strategy s = search::MachineMapper(cm).map(*search::expert(model, cm.machine(), 4, 2));
  return {s.graph, {s.views.begin(), s.views.end()}, 4};
}

void expect_resume_is_exact(const Plan& p, OptimizerKind optimizer) {
  TrainOptions o;
  o.steps = 20, o.seed = 4, o.batches = 3, o.optimizer.kind = optimizer, o.optimizer.lr = 0.02;
  const TrainResult whole = train(p.graph, p.views, p.devices, o);
  TrainState saved;
  int calls = 0;
  o.steps = 10, o.checkpoint_every = 10;
  o.checkpoint = [&](const TrainState& s) { saved = s, ++calls; };
  const TrainResult first = train(p.graph, p.views, p.devices, o);
  ASSERT_EQ(calls, 1);
  EXPECT_EQ(saved.step, 10);
  EXPECT_EQ(saved.weights.size(), first.parameters.size());
  for (const auto& [name, w] : first.parameters) EXPECT_EQ(saved.weights.at(name).data, w.data) << name;
  // Through the disk.
  const fs::path dir = pcgx::testing::temp_dir("pcgx_checkpoint_test") / (std::string(name(optimizer)) + std::to_string(p.devices));
  write_checkpoint(dir.string(), saved, "m");
  const TrainState loaded = read_checkpoint(dir.string());
  o.steps = 20, o.checkpoint_every = 0, o.checkpoint = nullptr, o.resume = &loaded;
  const TrainResult rest = train(p.graph, p.views, p.devices, o);
  ASSERT_EQ(rest.losses.size(), 10u);
  for (size_t k = 0; k < 10; ++k) EXPECT_EQ(rest.losses[k], whole.losses[10 + k]) << "step " << 10 + k;
  for (const auto& [name, w] : whole.parameters) EXPECT_EQ(rest.parameters.at(name).data, w.data) << name;
  EXPECT_EQ(rest.bytes_sent * 2, whole.bytes_sent) << "the gathers are not the plan's traffic";
}

TEST(Checkpoint, ResumeIsBitForBitOnOneDevice) {
  const Graph model = build_model("dlrm-tiny", {{"batch", 8}});
  for (const OptimizerKind opt : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
    SCOPED_TRACE(name(opt));
    expect_resume_is_exact(one_device(model), opt);
  }
}

TEST(Checkpoint, ResumeIsBitForBitOnFourDevices) {
  const Graph model = build_model("dlrm-tiny", {{"batch", 8}});
  for (const OptimizerKind opt : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
    SCOPED_TRACE(name(opt));
    expect_resume_is_exact(four_devices(model), opt);
  }
}

// A checkpoint of 4 devices resumes on 1 (the state is logical): the same
// losses to rounding.
TEST(Checkpoint, ResumesOnAnotherPlan) {
  const Graph model = build_model("dlrm-tiny", {{"batch", 8}});
  const Plan four = four_devices(model);
  TrainOptions o;
  o.steps = 6, o.seed = 4, o.batches = 1, o.optimizer.kind = OptimizerKind::kAdam, o.optimizer.lr = 0.02;
  const TrainResult whole = train(model, {}, 1, o);
  TrainState saved;
  o.steps = 3, o.checkpoint_every = 3, o.checkpoint = [&](const TrainState& s) { saved = s; };
  train(four.graph, four.views, 4, o);
  o.steps = 6, o.checkpoint_every = 0, o.checkpoint = nullptr, o.resume = &saved;
  const TrainResult rest = train(model, {}, 1, o);
  for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(rest.losses[k], whole.losses[3 + k], 1e-4 * std::fabs(whole.losses[3 + k])) << k;
}

TEST(Checkpoint, StateMustFitTheModel) {
  const Graph model = build_model("mlp-tiny", {});
  TrainOptions o;
  o.steps = 2, o.checkpoint_every = 2;
  TrainState saved;
  o.checkpoint = [&](const TrainState& s) { saved = s; };
  train(model, {}, 1, o);
  o.checkpoint_every = 0, o.checkpoint = nullptr;
  auto message = [&](const TrainState& s, OptimizerKind optimizer, int64_t steps) -> std::string {
    TrainOptions r = o;
    r.resume = &s, r.steps = steps, r.optimizer.kind = optimizer;
    try {
      train(model, {}, 1, r);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(message(saved, OptimizerKind::kAdam, 4).find("optimizer 'sgd' in the checkpoint, 'adam' asked for"), std::string::npos);
  EXPECT_NE(message(saved, OptimizerKind::kSgd, 2).find("the checkpoint is at step 2"), std::string::npos);
  TrainState bad = saved;
  bad.weights.begin()->second = Tensor<float>({1});
  EXPECT_NE(message(bad, OptimizerKind::kSgd, 4).find("shape [1]"), std::string::npos) << message(bad, OptimizerKind::kSgd, 4);
  bad = saved;
  bad.moments.erase(bad.moments.begin());
  EXPECT_NE(message(bad, OptimizerKind::kSgd, 4).find("no optimizer tensor"), std::string::npos);
  EXPECT_EQ(message(saved, OptimizerKind::kSgd, 4), "accepted");
}

TEST(Checkpoint, DirectoryIsReplacedWholeAndCheckedOnRead) {
  const fs::path dir = pcgx::testing::temp_dir("pcgx_checkpoint_test") / "dir";
  TrainState s;
  s.step = 3, s.optimizer = "sgd";
  s.weights["w"] = Tensor<float>({2});
  s.moments["m/w"] = Tensor<float>({2});
  write_checkpoint(dir.string(), s, "model");
  s.step = 5;
  write_checkpoint(dir.string(), s, "model");
  EXPECT_EQ(read_checkpoint(dir.string()).step, 5);
  EXPECT_FALSE(fs::exists(dir.string() + ".partial"));
  EXPECT_FALSE(fs::exists(dir.string() + ".old"));
  { std::ofstream(dir / "state.json") << "{\"format\": \"pcgx.checkpoint\", \"version\": 1, \"step\": -1, \"optimizer\": \"sgd\"}"; }
  EXPECT_THROW(read_checkpoint(dir.string()), Error);
  EXPECT_THROW(read_checkpoint((dir / "nope").string()), Error);
  // A directory that is not a checkpoint is never replaced.
  const fs::path other = pcgx::testing::temp_dir("pcgx_checkpoint_test") / "other";
  fs::create_directories(other);
  { std::ofstream(other / "precious.txt") << "x"; }
  EXPECT_THROW(write_checkpoint(other.string(), s, "model"), Error);
  EXPECT_TRUE(fs::exists(other / "precious.txt"));
}

// Given weights are the ones trained from: the seed's own, given
// explicitly, train to the same bits; a missing, extra or misshapen one is
// an error naming it.
TEST(InitialWeights, AreTrainedFromAndChecked) {
  const Graph model = build_model("mlp-tiny", {});
  TrainOptions o;
  o.steps = 3, o.seed = 9;
  const TrainResult plain = train(model, {}, 1, o);
  NamedTensors given;
  for (const Node& n : model.nodes())
    if (n.op->is_weight) given[n.name] = initial_weight(n, 9);
  o.initial_weights = &given;
  const TrainResult again = train(model, {}, 1, o);
  EXPECT_EQ(again.losses, plain.losses);
  NamedTensors bad = given;
  bad.erase(bad.begin());
  o.initial_weights = &bad;
  EXPECT_THROW(train(model, {}, 1, o), Error);
  bad = given;
  bad["extra"] = Tensor<float>({1});
  try {
    train(model, {}, 1, o);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extra: the model has no weight of that name"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pcgx::runtime
