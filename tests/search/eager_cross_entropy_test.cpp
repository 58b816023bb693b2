// The cross-entropy as Megatron-LM and PyTorch run it (training_recipe.h's
// CrossEntropyKernel::kEager, pcg/cross_entropy_kernel.h): the logits cast
// to FP32 and taken through separate passes, the FP32 probabilities kept
// for the backward pass. Priced pass by pass, counted in memory, simulated
// as estimated, recorded in strategy files; fused (one pass each way, the
// logits kept) stays the default.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "pcgx/pcg/cross_entropy_kernel.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

// Launches cost something here, so that the passes' kernels count.
Efficiency with_launches() {
  Efficiency e = toy_efficiency();
  e.launch = 1e-6;
  return e;
}

CostModel model(CrossEntropyKernel k, Precision p, const Efficiency& e = with_launches()) {
  TrainingRecipe recipe{p, Recompute::kNone, ZeroStage::k0};
  recipe.cross_entropy = k;
  return CostModel(toy_machine(), e, {}, {}, recipe);
}

NodeId node_of(const Graph& g, const std::string& op) {
  for (const Node& n : g.nodes())
    if (n.op->name == op) return n.id;
  return -1;
}

// The passes Megatron-LM's vocab_parallel_cross_entropy makes, as listed in
// cross_entropy_kernel.h, summed pass by pass: FP32 words read and written.
TEST(EagerCrossEntropy, ThePassesOfMegatronLMsCrossEntropy) {
  const double max = 4, subtract = 4 + 4, exp = 4 + 4, sum = 4, divide = 4 + 4, scale = 4 + 4;
  const CrossEntropyPasses fp32 = eager_cross_entropy_passes(4), bf16 = eager_cross_entropy_passes(2);
  EXPECT_DOUBLE_EQ(fp32.forward_bytes, max + subtract + exp + sum + divide);
  EXPECT_DOUBLE_EQ(fp32.backward_bytes, scale);
  EXPECT_EQ(fp32.forward_kernels, 5);
  EXPECT_EQ(fp32.backward_kernels, 1);
  // 16-bit logits are cast up first and their gradient cast back down.
  EXPECT_DOUBLE_EQ(bf16.forward_bytes, (2 + 4) + max + subtract + exp + sum + divide);
  EXPECT_DOUBLE_EQ(bf16.backward_bytes, scale + (4 + 2));
  EXPECT_EQ(bf16.forward_kernels, 6);
  EXPECT_EQ(bf16.backward_kernels, 2);
  EXPECT_DOUBLE_EQ(bf16.kept_bytes, 4);
  EXPECT_EQ(cross_entropy_named("eager"), CrossEntropyKernel::kEager);
  EXPECT_EQ(cross_entropy_named("fused"), CrossEntropyKernel::kFused);
  EXPECT_FALSE(cross_entropy_named("Eager"));
  EXPECT_EQ(TrainingRecipe{}.cross_entropy, CrossEntropyKernel::kFused);
}

// The loss task under eager: every logit element of the task through the
// passes at the machine's bandwidth and the table's "EagerCrossEntropy"
// figure, plus a launch per pass; the mapped step is fused's plus the
// difference on every device (data parallelism: each runs the loss), and
// the simulator prices it as the estimate does.
TEST(EagerCrossEntropy, PricedPassByPassAndSimulatedAlike) {
  const Graph g = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 128}, {"vocab", 4096}}), 8);
  const NodeId loss = node_of(g, "SoftmaxCrossEntropy");
  ASSERT_GE(loss, 0);
  for (const Precision p : {Precision::kBf16, Precision::kFp32}) {
    Efficiency e = with_launches();
    e.ops["EagerCrossEntropy"] = {1.0, 0.5, 1.0, false};
    const CostModel fused = model(CrossEntropyKernel::kFused, p, e), eager = model(CrossEntropyKernel::kEager, p, e);
    const ParallelTensorShape& logits = g.shape(g.node(loss).inputs[0]);
    const auto elements = static_cast<double>(logits.shard_elements());
    const CrossEntropyPasses passes = eager_cross_entropy_passes(activation_bytes(p));
    const double bandwidth = toy_machine().device.memory_bandwidth * 0.5;
    const Seconds t = eager.task_time(g, g.node(loss)), f = fused.task_time(g, g.node(loss));
    EXPECT_DOUBLE_EQ(t.forward, elements * passes.forward_bytes / bandwidth + passes.forward_kernels * 1e-6) << name(p);
    EXPECT_DOUBLE_EQ(t.backward, elements * passes.backward_bytes / bandwidth + passes.backward_kernels * 1e-6) << name(p);
    EXPECT_GT(t.forward + t.backward, 4 * (f.forward + f.backward)) << name(p);
    const Strategy a = MachineMapper(fused).map(g), b = MachineMapper(eager).map(g);
    ASSERT_TRUE(b.estimate.feasible) << b.estimate.infeasible;
    EXPECT_NEAR(b.estimate.time - a.estimate.time, (t.forward + t.backward) - (f.forward + f.backward), 1e-9 * b.estimate.time) << name(p);
    const Simulator sim(b.graph, b.views, eager);
    EXPECT_NEAR(sim.time(), b.estimate.time, 1e-9 * b.estimate.time) << name(p);
  }
}

// What a device keeps: under BF16 the FP32 probabilities (4 bytes a logit)
// in place of the 2-byte logits, and while the loss's forward runs both
// (here the logits dwarf every other activation, so that moment is the
// forward's peak); in FP32 the passes work in the logits' own buffer:
// nothing changes. The probabilities are kept whether or not the logits
// are recomputed (no eager backward reads the logits).
TEST(EagerCrossEntropy, KeepsTheFp32Probabilities) {
  const Graph g = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 128}, {"vocab", 4096}}), 8);
  const NodeId loss = node_of(g, "SoftmaxCrossEntropy");
  const auto per_device = static_cast<double>(g.shape(g.node(loss).inputs[0]).shard_elements());  // one task a device
  for (const Precision p : {Precision::kBf16, Precision::kFp32}) {
    const CostModel fused = model(CrossEntropyKernel::kFused, p), eager = model(CrossEntropyKernel::kEager, p);
    const Strategy s = MachineMapper(fused).map(g);
    const Placement placed(s.graph, s.views, 8);
    const std::vector<DeviceMemory> a = memory_breakdown(placed, fused.recipe()), b = memory_breakdown(placed, eager.recipe());
    const double logit = static_cast<double>(activation_bytes(p));
    for (size_t d = 0; d < a.size(); ++d) {
      EXPECT_DOUBLE_EQ(b[d].activations - a[d].activations, per_device * (4 - logit)) << name(p) << " device " << d;
      if (p == Precision::kFp32) EXPECT_DOUBLE_EQ(b[d].transient, a[d].transient) << d;
      else {
        EXPECT_GT(b[d].transient, a[d].transient) << d;
        EXPECT_GE(b[d].transient, per_device * logit) << d;
      }
    }
    // The head recomputed (recompute operators naming it): fused keeps no
    // logits, eager still keeps the probabilities.
    TrainingRecipe rf = fused.recipe(), re = eager.recipe();
    rf.recompute = re.recompute = Recompute::kOperators;
    rf.recompute_operators = re.recompute_operators = {"lm_logits"};
    const std::vector<DeviceMemory> c = memory_breakdown(placed, rf), e = memory_breakdown(placed, re);
    for (size_t d = 0; d < c.size(); ++d) {
      EXPECT_LT(c[d].activations, a[d].activations - 0.9 * per_device * logit) << name(p) << " device " << d;
      EXPECT_DOUBLE_EQ(e[d].activations - c[d].activations, per_device * 4) << name(p) << " device " << d;
    }
  }
}

// A measured profile times pcgx's runtimes, whose loss is fused: eager
// prices its passes whatever the profile says of the operator.
TEST(EagerCrossEntropy, AProfiledLossIsStillPricedAsItsPasses) {
  const Graph g = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 128}, {"vocab", 4096}}), 8);
  const Node& loss = g.node(node_of(g, "SoftmaxCrossEntropy"));
  Profile measured;
  measured.add({loss.op->name, {g.shape(loss.inputs[0]).slice_shape(), g.shape(loss.inputs[1]).slice_shape()}, 1.0, 2.0});
  TrainingRecipe recipe{Precision::kBf16, Recompute::kNone, ZeroStage::k0};
  const CostModel fused(toy_machine(), with_launches(), measured, {}, recipe);
  EXPECT_DOUBLE_EQ(fused.task_time(g, loss).forward, 1.0);
  recipe.cross_entropy = CrossEntropyKernel::kEager;
  const CostModel eager(toy_machine(), with_launches(), measured, {}, recipe);
  EXPECT_DOUBLE_EQ(eager.task_time(g, loss).forward, model(CrossEntropyKernel::kEager, Precision::kBf16).task_time(g, loss).forward);
}

// Megatron-LM's plan splits the loss by vocabulary (ClassLogSumExp, then
// CrossEntropyApply): the passes run on each device's classes, in the
// first part, and the second only indexes the labels' logits.
TEST(EagerCrossEntropy, SplitByVocabularyThePassesRunOnEachDevicesClasses) {
  const Graph model_graph = build_model("gpt-tiny", {{"batch", 8}, {"seq", 128}, {"vocab", 4096}});
  const Machine m = toy_machine();
  const std::optional<Graph> g = expert(model_graph, m, 8, 4);
  ASSERT_TRUE(g);
  const NodeId lse = node_of(*g, "ClassLogSumExp"), apply = node_of(*g, "CrossEntropyApply");
  ASSERT_GE(lse, 0);
  ASSERT_GE(apply, 0);
  const CostModel fused = model(CrossEntropyKernel::kFused, Precision::kBf16), eager = model(CrossEntropyKernel::kEager, Precision::kBf16);
  const ParallelTensorShape& logits = g->shape(g->node(lse).inputs[0]);
  ASSERT_EQ(logits.dims.back().degree, 4);
  const CrossEntropyPasses passes = eager_cross_entropy_passes(2);
  const Seconds t = eager.task_time(*g, g->node(lse));
  EXPECT_DOUBLE_EQ(t.forward, static_cast<double>(logits.shard_elements()) * passes.forward_bytes / m.device.memory_bandwidth + 6e-6);
  // The pick reads the labels and the blocks' values, not the logits.
  const Seconds pick = eager.task_time(*g, g->node(apply)), whole = fused.task_time(*g, g->node(apply));
  const double logit_read = static_cast<double>(logits.shard_elements()) * 2 / m.device.memory_bandwidth;
  EXPECT_NEAR(whole.forward - pick.forward, logit_read, 1e-15);
  // The simulator adds what the estimate adds, on the same views (on this
  // toy machine the two differ by a few microseconds with either kernel).
  const Strategy s = MachineMapper(fused).map(*g);
  ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
  const Seconds softmax = fused.task_time(*g, g->node(lse));
  const double added = (t.forward + t.backward) - (softmax.forward + softmax.backward) + (pick.forward + pick.backward) -
                       (whole.forward + whole.backward);
  EXPECT_GT(added, 0);
  const double simulated = Simulator(s.graph, s.views, eager).time() - Simulator(s.graph, s.views, fused).time();
  EXPECT_NEAR(simulated, added, 1e-9 * s.estimate.time);
  const Strategy e = MachineMapper(eager).map(*g);
  EXPECT_NEAR(e.estimate.time - s.estimate.time, added, 1e-9 * s.estimate.time);
}

// The strategy file records eager (fused, the default, is left out); any
// other value is an error naming the field and the choices.
TEST(EagerCrossEntropy, TheStrategyFileRecordsIt) {
  const CostModel cm = model(CrossEntropyKernel::kEager, Precision::kBf16);
  const Graph g = build_model("gpt-tiny", {});
  StrategyFile f{g.name(), cm.machine(), 8, "data-parallel", {}, MachineMapper(cm).map(data_parallel(g, 8))};
  f.recipe = cm.recipe();
  const std::string text = strategy_to_json(f);
  EXPECT_NE(text.find("\"cross_entropy\": \"eager\""), std::string::npos);
  EXPECT_EQ(strategy_from_json(text, "s.json").recipe.cross_entropy, CrossEntropyKernel::kEager);
  nlohmann::json bad = nlohmann::json::parse(text);
  bad["cross_entropy"] = "liger";
  try {
    strategy_from_json(bad.dump(), "s.json");
    FAIL() << "an unknown cross-entropy kernel was accepted";
  } catch (const FileError& e) {
    EXPECT_EQ(std::string(e.what()), "s.json: cross_entropy: expected one of fused, eager, got \"liger\"");
  }
  f.recipe.cross_entropy = CrossEntropyKernel::kFused;
  EXPECT_EQ(strategy_to_json(f).find("\"cross_entropy\""), std::string::npos);
  EXPECT_EQ(strategy_from_json(strategy_to_json(f), "s.json").recipe.cross_entropy, CrossEntropyKernel::kFused);
}

}  // namespace
}  // namespace pcgx::search
