// ZeRO stages per weight group (pcg/training_recipe.h's ZeroWeights): each
// weight counted, charged and simulated at its own stage. A plan at stage
// 3 whose persistence threshold keeps some blocks whole is, byte for byte
// and second for second, stage 2 with the others' weights named at 3; the
// memory of a 1/2/3 mix worked by hand; over micro-batches each group
// synchronizes at its stage and the simulator agrees with the estimate;
// the strategy file records the groups and refuses bad ones; patterns
// resolve on the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/user_plan.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

CostModel model(ZeroStage z, const ZeroWeights& by_weight = {}, int64_t threshold = 0) {
  TrainingRecipe r{Precision::kFp32, Recompute::kNone, z};
  r.zero_weights = by_weight, r.zero_persistence_threshold = threshold;
  return CostModel(toy_machine(), toy_efficiency(), {}, {}, r);
}

// three_linears: w0 [32, 16] (512 parameters), w1 [16, 64] (1024), w2
// [64, 4] (256). Threshold 600 at stage 3 shards w1 alone between uses and
// keeps w0 and w2 whole with stage 2's sharded gradients and state: the
// same plan as stage 2 with w1 at 3.
TEST(ZeroWeightGroups, AThresholdIsAGroupAtStageThree) {
  for (const int64_t batch : {int64_t{64}, int64_t{1} << 16}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const Graph dp = data_parallel(three_linears(batch), 8);
    const CostModel threshold = model(ZeroStage::k3, {}, 600), grouped = model(ZeroStage::k2, {{"w1", ZeroStage::k3}});
    const Strategy a = MachineMapper(threshold).map(dp), b = MachineMapper(grouped).map(dp);
    ASSERT_TRUE(a.estimate.feasible && b.estimate.feasible);
    EXPECT_NEAR(b.estimate.time, a.estimate.time, 1e-12 * a.estimate.time);
    EXPECT_NEAR(b.estimate.sync, a.estimate.sync, 1e-12 * a.estimate.sync);
    EXPECT_NEAR(b.estimate.gather, a.estimate.gather, 1e-15);
    EXPECT_EQ(b.estimate.buckets, a.estimate.buckets);
    EXPECT_EQ(b.estimate.gathered_for_use, 1);
    EXPECT_DOUBLE_EQ(b.estimate.bytes, a.estimate.bytes);
    const auto ma = memory_breakdown(Placement(a.graph, a.views, 8), threshold.recipe());
    const auto mb = memory_breakdown(Placement(b.graph, b.views, 8), grouped.recipe());
    ASSERT_EQ(ma.size(), mb.size());
    for (size_t d = 0; d < ma.size(); ++d) {
      EXPECT_DOUBLE_EQ(mb[d].weights, ma[d].weights);
      EXPECT_DOUBLE_EQ(mb[d].gradients, ma[d].gradients);
      EXPECT_DOUBLE_EQ(mb[d].optimizer, ma[d].optimizer);
      EXPECT_DOUBLE_EQ(mb[d].transient, ma[d].transient);
    }
    const Simulator sa(a.graph, a.views, threshold), sb(b.graph, b.views, grouped);
    EXPECT_NEAR(sb.time(), sa.time(), 1e-12 * sa.time());
    EXPECT_EQ(sb.summary().gathered_for_use, 1);
  }
}

// Stage 1 with w0 at 2 and w1 at 3 on 8 devices: a device keeps w0 and w2
// whole and an eighth of w1; the gradients of w2 whole, an eighth of w0's
// and w1's; an eighth of every weight's Adam state; and, gathering w1 for
// fc1's forward and backward, twice its whole weight beside the last
// Linear's [8, 4] output (zero3_persistence_test.cpp's transient).
TEST(ZeroWeightGroups, MemoryCountsEachWeightAtItsStageWorkedByHand) {
  const Graph dp = data_parallel(three_linears(64), 8);
  const CostModel cm = model(ZeroStage::k1, {{"w0", ZeroStage::k2}, {"w1", ZeroStage::k3}});
  const Strategy s = MachineMapper(cm).map(dp);
  ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
  for (const DeviceMemory& m : memory_breakdown(Placement(s.graph, s.views, 8), cm.recipe())) {
    EXPECT_DOUBLE_EQ(m.weights, (512.0 + 256.0) * 4 + 1024.0 * 4 / 8);
    EXPECT_DOUBLE_EQ(m.gradients, 256.0 * 4 + (512.0 + 1024.0) * 4 / 8);
    EXPECT_DOUBLE_EQ(m.optimizer, 1792.0 * 8 / 8);
    EXPECT_DOUBLE_EQ(m.transient, (2 * 1024.0 + 8 * 4) * 4);
  }
}

// Over 4 micro-batches at stage 1 with w1 at 2: w1's gradients are
// reduce-scattered in every micro-batch's backward pass (its own bucket,
// 4 times), w0's and w2's summed over the step and reduce-scattered once
// (one bucket): 5 buckets, in the estimate and the simulator alike, which
// agree on the step; only w1's gradients are sharded.
TEST(ZeroWeightGroups, OverMicroBatchesEachGroupSynchronizesAtItsStage) {
  constexpr int64_t kMicro = 4;
  const Graph g = pipelined(data_parallel(three_linears(1 << 12), 8), kMicro, true);
  const CostModel c1 = model(ZeroStage::k1), mixed = model(ZeroStage::k1, {{"w1", ZeroStage::k2}});
  const Strategy s1 = MachineMapper(c1).map(g), s = MachineMapper(mixed).map(g);
  ASSERT_TRUE(s1.estimate.feasible && s.estimate.feasible);
  EXPECT_EQ(s1.estimate.buckets, 1);
  EXPECT_EQ(s.estimate.buckets, 1 + kMicro);
  // w1's reduce-scatter once more per micro-batch after the first: 7 of
  // its 8 devices' blocks' bytes, counted as step_bytes counts them (7
  // times the weight's bytes, zero2_accumulation_test.cpp).
  EXPECT_DOUBLE_EQ(s.estimate.bytes - s1.estimate.bytes, (kMicro - 1) * 7 * 1024.0 * 4);
  const auto m1 = memory_breakdown(Placement(s1.graph, s1.views, 8), c1.recipe());
  const auto m = memory_breakdown(Placement(s.graph, s.views, 8), mixed.recipe());
  for (size_t d = 0; d < m1.size(); ++d) EXPECT_DOUBLE_EQ(m1[d].gradients - m[d].gradients, 1024.0 * 4 * 7 / 8);
  const Simulator sim(s.graph, s.views, mixed);
  const SimulationSummary sum = sim.summary();
  EXPECT_EQ(sum.buckets, 1 + kMicro);
  EXPECT_NEAR(sum.sync_total, s.estimate.sync, 1e-12 * s.estimate.sync);
  EXPECT_NEAR(sim.time(), s.estimate.time, 0.02 * s.estimate.time);
  EXPECT_DOUBLE_EQ(simulated_estimate(sim).bytes, s.estimate.bytes);
}

// The tiny GPT over 4 micro-batches at stage 2, its first layer's weights
// at 1: its two layers are alike but for their weights' stages, so the
// mapping's cache must tell them apart (the simulator, which caches
// nothing, counts the buckets the estimate does), and a one-stage
// pipeline search, whose chunks keep the model's names for it, prices
// the plan as mapping the plan it returns does.
TEST(ZeroWeightGroups, LayersAlikeButForTheirStagesAreToldApart) {
  const Graph g = build_model("gpt-tiny", {{"batch", 16}});
  ZeroWeights first;
  for (const Node& n : g.nodes())
    if (n.op->is_weight && n.name.rfind("block0.", 0) == 0) first.push_back({n.name, ZeroStage::k1});
  std::sort(first.begin(), first.end(), [](const WeightZero& a, const WeightZero& b) { return a.weight < b.weight; });
  TrainingRecipe r{Precision::kTf32, Recompute::kNone, ZeroStage::k2};
  r.zero_weights = first;
  const CostModel cm(find_machine("dgx-a100").with_devices(4), default_efficiency(), {}, {}, r);
  const Graph dp = pipelined(data_parallel(g, 4), 4, true);
  const Strategy s = MachineMapper(cm).map(dp);
  ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
  const Simulator sim(s.graph, s.views, cm);
  EXPECT_EQ(sim.summary().buckets, s.estimate.buckets);
  EXPECT_NEAR(sim.summary().sync_total, s.estimate.sync, 1e-12 * s.estimate.sync);
  SearchOptions so;
  so.algorithm = Algorithm::kDataParallel;
  const PipelineResult found = optimize_pipeline(g, RuleLibrary(std::span<const Ruleset>{}), cm, so, PipelineOptions{1, 4});
  const Strategy again = MachineMapper(cm).map(found.search.strategy.graph);
  EXPECT_EQ(found.search.strategy.estimate.buckets, again.estimate.buckets);
  EXPECT_NEAR(found.search.strategy.estimate.sync, again.estimate.sync, 1e-12 * again.estimate.sync);
  EXPECT_EQ(again.estimate.buckets, s.estimate.buckets);
}

// A weight layout computed from several weights trains at the lowest of
// their stages.
TEST(ZeroWeightGroups, AComputedLayoutTakesItsWeightsLowestStage) {
  Graph g("concat");
  const NodeId a = g.add("Weight", {{"shape", IntList{4, 8}}}, {}, "a");
  const NodeId b = g.add("Weight", {{"shape", IntList{4, 8}}}, {}, "b");
  const NodeId c = g.add("Concat", {{"axis", int64_t{1}}}, {{a, 0}, {b, 0}}, "ab");
  TrainingRecipe r{Precision::kFp32, Recompute::kNone, ZeroStage::k1};
  EXPECT_EQ(zero_of(g, r, {c, 0}), ZeroStage::k1);
  r.zero_weights = {{"a", ZeroStage::k3}, {"b", ZeroStage::k2}};
  EXPECT_EQ(zero_of(g, r, {a, 0}), ZeroStage::k3);
  EXPECT_EQ(zero_of(g, r, {c, 0}), ZeroStage::k2);
  EXPECT_EQ(highest_zero(r), ZeroStage::k3);
  // Read by a Linear, the Concat lowers both weights to its stage, as the
  // runtime shards their stored layouts; unread, each keeps its own.
  EXPECT_EQ(weight_zero_stages(g, source_layouts(g), r)[static_cast<size_t>(a)], ZeroStage::k3);
  const NodeId x = g.add("Input", {{"shape", IntList{2, 4}}}, {}, "x");
  g.add_output({g.add("Linear", {}, {{x, 0}, {c, 0}}, "fc"), 0});
  const std::vector<ZeroStage> stages = weight_zero_stages(g, source_layouts(g), r);
  EXPECT_EQ(stages[static_cast<size_t>(a)], ZeroStage::k2);
  EXPECT_EQ(stages[static_cast<size_t>(b)], ZeroStage::k2);
}

TEST(ZeroWeightGroups, TheStrategyFileRecordsThem) {
  const CostModel cm = model(ZeroStage::k1, {{"w0", ZeroStage::k2}, {"w1", ZeroStage::k3}}, 600);
  const Graph g = three_linears(64);
  StrategyFile f{g.name(), cm.machine(), 8, "data-parallel", {}, MachineMapper(cm).map(data_parallel(g, 8))};
  f.recipe = cm.recipe();
  const std::string text = strategy_to_json(f);
  EXPECT_EQ(strategy_from_json(text, "s.json").recipe, cm.recipe());
  auto refused = [&](const std::function<void(nlohmann::json&)>& change, const std::string& message) {
    nlohmann::json bad = nlohmann::json::parse(text);
    change(bad);
    try {
      strategy_from_json(bad.dump(), "s.json");
      ADD_FAILURE() << "accepted: " << message;
    } catch (const FileError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(message, 0), 0u) << e.what();
    }
  };
  refused([](nlohmann::json& j) { j["zero_weights"]["w9"] = 2; }, "s.json: zero_weights.w9: the graph has no weight of that name");
  refused([](nlohmann::json& j) { j["zero_weights"]["w0"] = 4; }, "s.json: zero_weights.w0: expected one of 0, 1, 2, 3, got 4");
  refused([](nlohmann::json& j) { j["zero_weights"] = 3; }, "s.json: zero_weights: expected an object");
  refused([](nlohmann::json& j) { j["zero"] = 0; }, "s.json: zero_weights: weight w0 at ZeRO stage 2 beside the plan's stage 0");
  refused([](nlohmann::json& j) { j["zero_weights"].erase("w1"); }, "s.json: zero_persistence_threshold: applies to ZeRO stage 3, not 1");
}

// Patterns name weights (not other operators); two patterns giving one
// weight different stages, or one naming none, are errors naming the field.
TEST(ZeroWeightGroups, PatternsResolveOnTheModel) {
  const Graph gpt = build_model("gpt-tiny", {});
  const ZeroWeights w = zero_weight_stages(gpt, {{"wte.*", ZeroStage::k3}, {"block*.mlp.*.W", ZeroStage::k2}}, "f");
  ASSERT_EQ(w.size(), 5u);  // the embedding and each layer's two MLP matrices
  EXPECT_EQ(w[0].weight, "block0.mlp.ffn_output.W");
  EXPECT_EQ(w.back().weight, "wte.table");
  EXPECT_EQ(w.back().stage, ZeroStage::k3);
  // The same stage twice is one group; another stage is refused.
  EXPECT_EQ(zero_weight_stages(gpt, {{"wte.*", ZeroStage::k3}, {"wte.table", ZeroStage::k3}}, "f").size(), 1u);
  try {
    zero_weight_stages(gpt, {{"wte.*", ZeroStage::k3}, {"*.table", ZeroStage::k2}}, "f");
    FAIL() << "two stages for one weight were accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(std::string(e.what()), "f: weight wte.table is at ZeRO stage 3 by 'wte.*' and at 2 by '*.table'");
  }
  try {
    zero_weight_stages(gpt, {{"block0.attn.scores", ZeroStage::k3}}, "f");  // an operator, not a weight
    FAIL() << "a pattern naming no weight was accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "f");
    EXPECT_NE(std::string(e.what()).find("names no weight of gpt-tiny"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pcgx::search
