// Plans a person writes (user_plan.h, docs/plans.md): the shipped examples
// lower to PCGs that compute what the model computes; a plan saying what
// data parallelism does is data parallelism; every mistake is one error
// naming the file, the rule and the operator.
#include <gtest/gtest.h>

#include <filesystem>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/search.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/user_plan.h"
#include "pcgx/rulesets/ruleset.h"
#include "search/plan_support.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

namespace fs = std::filesystem;

const fs::path kPlans = fs::path(PCGX_SOURCE_DIR) / "data" / "plans";

Strategy mapped(const Graph& g, int64_t devices) {
  const CostModel cm(toy_machine().with_devices(devices), toy_efficiency());
  return MachineMapper(cm).map(g);
}

std::string lowering_error(const Graph& g, const std::string& rules, int64_t devices = 4) {
  try {
    lower_plan(g, plan_text(rules), devices);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(UserPlan, EveryShippedPlanComputesTheModel) {
  const Graph gpt = build_model("gpt-tiny", {{"batch", 4}});
  const Graph llama = build_model("llama-tiny", {{"batch", 4}});
  int plans = 0;
  for (const auto& entry : fs::directory_iterator(kPlans)) {
    SCOPED_TRACE(entry.path().filename().string());
    // A plan is written against the model its name starts with (GPT's by default).
    const Graph& g = entry.path().filename().string().rfind("llama-", 0) == 0 ? llama : gpt;
    if (entry.path().filename().string().find("deadlock") != std::string::npos) {  // shipped to be refused
      try {
        load_plan(entry.path().string());
        ADD_FAILURE() << "not refused";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("pipeline.programs: pipeline schedule deadlocks: stage 0 waits"), std::string::npos) << e.what();
      }
      continue;
    }
    const Graph lowered = lower_plan(g, load_plan(entry.path().string()), 4);
    expect_same_outputs(lowered, g);
    EXPECT_TRUE(mapped(lowered, 4).estimate.feasible);
    ++plans;
  }
  EXPECT_GE(plans, 3);
}

// A plan splitting every operator's samples is data parallelism: the same
// PCG and the same predicted time.
TEST(UserPlan, SamplesEverywhereIsDataParallelism) {
  for (const char* model : {"mlp-tiny", "gpt-tiny", "dlrm-tiny", "resnext-50-tiny"}) {  // (BatchNorm in its statistics form, as data parallelism runs it)
    SCOPED_TRACE(model);
    const Graph g = build_model(model, {{"batch", 8}});
    const Graph lowered = lower_plan(g, plan_text(R"([{"select": {}, "partition": {"samples": 4}}])"), 4);
    const Graph dp = data_parallel(g, 4);
    EXPECT_EQ(lowered.size(), dp.size());
    EXPECT_DOUBLE_EQ(mapped(lowered, 4).estimate.time, mapped(dp, 4).estimate.time);
  }
}

// "replicas": k runs an operator in k copies (SuperScaler's replicate):
// every input copied, one task per copy and per split, the outputs k
// copies, of which a reader wanting fewer takes the first. The plan
// computes the model, and a strategy's plan states the copies back.
TEST(UserPlan, ReplicasRunAnOperatorInCopies) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const UserPlan plan = plan_text(R"([{"select": {}, "partition": {"samples": 2}},
                                      {"select": {"name": "block*.ln1"}, "partition": {"replicas": 2}},
                                      {"select": {"name": "ln_f"}, "partition": {"samples": 2, "replicas": 2}}])");
  const Graph lowered = lower_plan(g, plan, 4);
  auto node = [&](const std::string& name) { return *std::find_if(lowered.nodes().begin(), lowered.nodes().end(), [&](const Node& n) { return n.name == name; }); };
  EXPECT_EQ(task_grid(lowered, node("block0.ln1")).num_tasks(), 2);
  EXPECT_EQ(node("block0.ln1").outputs[0].replica, 2);
  EXPECT_EQ(task_grid(lowered, node("ln_f")).num_tasks(), 4);
  size_t firsts = 0;  // the first copy taken for readers that want one
  for (const Node& n : lowered.nodes()) firsts += n.op->name == "Split" && n.attrs.get_int("axis") == -1;
  EXPECT_GE(firsts, 3u);
  expect_same_outputs(lowered, g);
  const UserPlan shown = plan_of_strategy(lowered);
  std::map<std::string, NodePlan> by_name;
  for (const PlanRule& r : shown.rules) by_name[r.select.name] = r.partition;
  EXPECT_EQ(by_name["block*.ln1"], (NodePlan{{kReplicasKind, 2}}));
  EXPECT_EQ(by_name["ln_f"], (NodePlan{{kReplicasKind, 2}, {std::string(kSamplesKind), 2}}));
  try {
    lower_plan(g, plan_text(R"([{"select": {"name": "ln_f"}, "partition": {"replicas": 3}}])"), 4);
    ADD_FAILURE() << "3 copies on 4 devices";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "p.json: rules[0]: node 92 'ln_f' (LayerNorm): its degrees multiply to 3, which does not divide the 4 devices");
  }
  // The step's loss is one value: no copies of it.
  try {
    lower_plan(g, plan_text(R"([{"select": {"name": "loss"}, "partition": {"replicas": 2}}])"), 4);
    ADD_FAILURE() << "copies of the loss";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(SoftmaxCrossEntropy): a loss runs once (the step's loss is one value): no replicas"), std::string::npos) << e.what();
  }
}

// The Megatron example splits each layer's weights two ways: a device
// keeps less of them than under data parallelism.
TEST(UserPlan, TensorParallelPlanShardsTheLayersWeights) {
  const Graph g = build_model("gpt-tiny", {{"batch", 4}});
  const Strategy tp = mapped(lower_plan(g, load_plan((kPlans / "gpt-megatron-2x2.json").string()), 4), 4);
  const Strategy dp = mapped(data_parallel(g, 4), 4);
  const DeviceMemory a = memory_breakdown(Placement(tp.graph, tp.views, 4), {})[0];
  const DeviceMemory b = memory_breakdown(Placement(dp.graph, dp.views, 4), {})[0];
  EXPECT_LT(a.weights, b.weights);
  // Only the layers' weights split: the embeddings stay whole.
  EXPECT_GT(a.weights, b.weights / 2);
}

TEST(UserPlan, SelectorsByNameOpAndLayer) {
  const Graph g = build_model("gpt-tiny", {});
  const std::vector<WeightUse> uses = weight_uses(g);
  auto count = [&](const PlanSelector& s) {
    int n = 0;
    for (const Node& node : g.nodes()) n += node.op->op_class == OpClass::kCompute && selects(s, node, uses[static_cast<size_t>(node.id)]);
    return n;
  };
  EXPECT_EQ(count({"block*.attn.?_t", "", std::nullopt}), 6);  // q_t, k_t, v_t of two layers
  EXPECT_EQ(count({"", "BatchMatMul", std::nullopt}), 4);
  EXPECT_EQ(count({"*.mlp.*", "Linear", std::make_pair(int64_t{1}, int64_t{1})}), 2);
  EXPECT_EQ(count({"wte", "", std::make_pair(int64_t{0}, int64_t{9})}), 0);  // outside any layer
  // "weights": the operators reading a weight, or those reading none.
  const int without = count({"", "", std::nullopt, false});
  EXPECT_EQ(count({"", "Linear", std::nullopt, true}), count({"", "Linear", std::nullopt}));  // every projection has its weight
  // The tied head reads the embedding's transpose, a layout of the
  // weight: the head is selected, the transpose by neither.
  EXPECT_EQ(count({"lm_logits", "", std::nullopt, true}), 1);
  EXPECT_EQ(count({"word_embeddings.T", "", std::nullopt}), 1);
  EXPECT_EQ(count({"word_embeddings.T", "", std::nullopt, true}) + count({"word_embeddings.T", "", std::nullopt, false}), 0);
  EXPECT_EQ(count({"", "LayerNorm", std::nullopt, true}), count({"", "LayerNorm", std::nullopt}));  // gamma and beta
  EXPECT_EQ(count({"", "BatchMatMul", std::nullopt, true}), 0);  // two activations
  EXPECT_EQ(count({"", "Softmax", std::nullopt, true}), 0);
  EXPECT_GT(without, 0);
  // Written back by plan show, read again the same.
  const UserPlan p = plan_text(R"([{"select": {"weights": true}, "partition": {"samples": 2}}])");
  ASSERT_TRUE(p.rules[0].select.weights);
  EXPECT_TRUE(*p.rules[0].select.weights);
  EXPECT_NE(plan_to_json(p).find(R"("weights":true)"), std::string::npos) << plan_to_json(p);
  EXPECT_TRUE(*plan_from_json(plan_to_json(p), "again.json").rules[0].select.weights);
}

// ZeRO 3's persistence threshold: read with "zero": 3, written back the same.
TEST(UserPlan, ThePersistenceThresholdReadsAndWritesBack) {
  const UserPlan p = plan_from_json(
      R"({"format": "pcgx.plan", "format_version": 1, "zero": 3, "zero_persistence_threshold": 4096, "rules": [{"select": {}, "partition": {}}]})",
      "p.json");
  ASSERT_TRUE(p.zero_persistence_threshold.has_value());
  EXPECT_EQ(*p.zero_persistence_threshold, 4096);
  const UserPlan again = plan_from_json(plan_to_json(p), "again.json");
  EXPECT_EQ(again.zero_persistence_threshold, p.zero_persistence_threshold);
  EXPECT_EQ(again.zero, ZeroStage::k3);
}

TEST(UserPlan, MistakesNameTheRuleAndTheOperator) {
  const Graph g = build_model("gpt-tiny", {});
  EXPECT_EQ(lowering_error(g, R"([{"select": {"name": "decoder.*"}, "partition": {"samples": 2}}])"),
            "p.json: rules[0] (name 'decoder.*') selects no operator of 'gpt-tiny'");
  const std::string kind = lowering_error(g, R"([{"select": {"name": "block0.attn.query"}, "partition": {"heads": 2}}])");
  EXPECT_EQ(kind, "p.json: rules[0]: node 13 'block0.attn.query' (Linear) has no parallel kind 'heads' (its kinds: batch0, batch1, out, reduce, or samples or replicas)");
  const std::string divide = lowering_error(g, R"([{"select": {"name": "block0.attn.query"}, "partition": {"out": 3}}])", 3);
  EXPECT_NE(divide.find("node 13 'block0.attn.query' (Linear): out 3 does not divide dimension 1 of input 1 (32)"), std::string::npos) << divide;
  EXPECT_EQ(lowering_error(g, R"([{"select": {"name": "block0.attn.query"}, "partition": {"batch0": 2, "samples": 2}}])"),
            "p.json: rules[0]: node 13 'block0.attn.query' (Linear): 'batch0' and 'samples' both name its kind batch0");
  const std::string devices = lowering_error(g, R"([{"select": {"name": "block0.attn.query"}, "partition": {"out": 2, "samples": 2}}])", 6);
  EXPECT_NE(devices.find("its degrees multiply to 4, which does not divide the 6 devices"), std::string::npos) << devices;
}

// plan_from_json's error for `text`, or "" when it reads.
std::string file_error(const std::string& text) {
  try {
    plan_from_json(text, "p.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(UserPlan, MalformedFilesNameTheField) {
  const auto error = file_error;
  const std::string head = R"({"format": "pcgx.plan", "format_version": 1, )";
  EXPECT_EQ(error("{").rfind("p.json", 0), 0u) << error("{");
  EXPECT_EQ(error(R"({"format": "pcgx.strategy", "format_version": 1, "rules": []})"), "p.json: format: expected \"pcgx.plan\"");
  EXPECT_EQ(error(head + R"("rules": []})"), "p.json: rules: expected a non-empty array of rules");
  EXPECT_EQ(error(head + R"("rules": [{"select": {}}]})"), "p.json: rules[0].partition: missing: parallel kinds and their degrees ({} runs one task)");
  EXPECT_EQ(error(head + R"("rules": [{"select": {"nmae": "x"}, "partition": {}}]})"), "p.json: rules[0].select.nmae: unknown field (name, op, layers, weights)");
  EXPECT_EQ(error(head + R"("rules": [{"select": {"weights": "yes"}, "partition": {}}]})"),
            "p.json: rules[0].select.weights: expected true (operators that read a weight) or false (those that read none)");
  EXPECT_EQ(error(head + R"("rules": [{"select": {"op": "Lienar"}, "partition": {}}]})"),
            "p.json: rules[0].select.op: 'Lienar' is not a compute operator (pcgx ops lists them)");
  EXPECT_EQ(error(head + R"("rules": [{"select": {}, "partition": {"out": 0}}]})"), "p.json: rules[0].partition.out: expected a whole number of at least 1");
  EXPECT_EQ(error(head + R"("rules": [{"select": {"layers": [3, 1]}, "partition": {}}]})"),
            "p.json: rules[0].select.layers: the last layer 1 comes before the first 3");
  EXPECT_EQ(error(head + R"("rules": [], "stages": 2})"),
            "p.json: stages: unknown field (format, format_version, description, precision, recompute, recompute_layers, "
            "recompute_operators, zero, zero_persistence_threshold, zero_weights, optimizer, attention, cross_entropy, dropout_add, overlap_grad_input, overlap_param_gather, "
            "overlap_grad_reduce, grad_precision, reduce_scatter, pipeline, rewrites, rules, unstated)");
  const std::string one_rule = R"("rules": [{"select": {}, "partition": {}}]})";
  EXPECT_EQ(error(head + R"("rewrites": {"rule": "x"}, )" + one_rule), "p.json: rewrites: expected an array of {\"rule\": ID, \"at\": [operator names]}");
  EXPECT_EQ(error(head + R"("rewrites": [{"at": ["a"]}], )" + one_rule), "p.json: rewrites[0].rule: expected a rule id (a string)");
  EXPECT_EQ(error(head + R"("rewrites": [{"rule": "unity-c00094", "at": []}], )" + one_rule),
            "p.json: rewrites[0].at: expected a non-empty array of operator names, one per compute operator of the rule's source");
  EXPECT_EQ(error(head + R"("rewrites": [{"rule": "unity-c00094", "at": ["a"], "where": 1}], )" + one_rule),
            "p.json: rewrites[0].where: unknown field (rule, at)");
  EXPECT_EQ(error(head + R"("recompute": "full", "recompute_layers": 0, "rules": []})"),
            "p.json: recompute_layers: expected a positive integer, got 0");
  EXPECT_EQ(error(head + R"("pipeline": {"stages": 2, "micro_batches": 2, "boundaries": ["a", "b"]}, "rules": []})"),
            "p.json: pipeline.boundaries: 2 names for 2 chunks (stages x virtual stages): one per chunk but the last");
  EXPECT_EQ(error(head + R"("pipeline": {"stages": 2}, "rules": [{"select": {}, "partition": {}}]})"),
            "p.json: pipeline.micro_batches: missing: how many micro-batches a step runs");
  EXPECT_EQ(error(head + R"("pipeline": {"stages": 0, "micro_batches": 4}, "rules": [{"select": {}, "partition": {}}]})"),
            "p.json: pipeline.stages: expected a whole number of at least 1");
  EXPECT_EQ(error(head + R"("zero": 4, "rules": [{"select": {}, "partition": {}}]})"), "p.json: zero: expected one of 0, 1, 2, 3");
  EXPECT_EQ(error(head + R"("zero": 2, "zero_persistence_threshold": 100, "rules": [{"select": {}, "partition": {}}]})"),
            "p.json: zero_persistence_threshold: applies to ZeRO stage 3 (\"zero\": 3, or a weight at 3 in \"zero_weights\")");
  EXPECT_EQ(error(head + R"("zero": 2, "zero_weights": {"w*": 3}, "zero_persistence_threshold": 100, "rules": [{"select": {}, "partition": {}}]})"), "");
  EXPECT_EQ(error(head + R"("zero_weights": ["w0"], "rules": []})"),
            "p.json: zero_weights: expected an object of weight names or name patterns to ZeRO stages, e.g. {\"block*.mlp.*\": 3}, got [\"w0\"]");
  EXPECT_EQ(error(head + R"("zero_weights": {"w0": "3"}, "rules": []})"), "p.json: zero_weights.w0: expected one of 0, 1, 2, 3, got \"3\"");
  EXPECT_EQ(error(head + R"("zero": 0, "zero_weights": {"w0": 3}, "rules": []})"),
            "p.json: zero_weights: weight w0 at ZeRO stage 3 beside the plan's stage 0: stage 0 cannot mix with a sharded stage (stage 1 "
            "moves the same bytes as 0's all-reduce and keeps less: stage 1 instead)");
  EXPECT_EQ(error(head + R"("zero": 3, "zero_persistence_threshold": -1, "rules": [{"select": {}, "partition": {}}]})"),
            "p.json: zero_persistence_threshold: expected a number of parameters (0 or more), got -1");
  EXPECT_EQ(error(head + R"("recompute": "some", "rules": [{"select": {}, "partition": {}}]})"),
            "p.json: recompute: expected one of none, gathers, selective, full, full+selective, full+gathers, operators");
  // Recomputation per operator: the operators named (or patterns), only with it.
  EXPECT_EQ(plan_from_json(head + R"("recompute": "operators", "recompute_operators": ["block*.mlp.*"], "rules": [{"select": {}, "partition": {}}]})", "p.json").recompute_operators,
            std::vector<std::string>{"block*.mlp.*"});
  EXPECT_EQ(error(head + R"("recompute": "operators", "rules": [{"select": {}, "partition": {}}]})"),
            "p.json: recompute_operators: required with \"recompute\": \"operators\": the names (or name patterns) of the operators to recompute");
  EXPECT_EQ(error(head + R"("recompute": "selective", "recompute_operators": ["a"], "rules": [{"select": {}, "partition": {}}]})"),
            "p.json: recompute_operators: applies to \"recompute\": \"operators\"");
  EXPECT_EQ(error(head + R"("recompute": "operators", "recompute_operators": [], "rules": [{"select": {}, "partition": {}}]})"),
            "p.json: recompute_operators: expected a list of operator names or name patterns ('*' any run, '?' one character), got []");
  // A schedule: named, or each stage's steps written out (checked).
  const std::string rules = R"("rules": [{"select": {}, "partition": {}}]})";
  EXPECT_EQ(error(head + R"("pipeline": {"stages": 2, "micro_batches": 4, "schedule": "zb"}, )" + rules),
            "p.json: pipeline.schedule: expected gpipe, 1f1b or interleaved (an order of steps is written as \"programs\")");
  EXPECT_EQ(error(head + R"("pipeline": {"stages": 2, "micro_batches": 4, "schedule": "gpipe", "programs": ["F0"]}, )" + rules),
            "p.json: pipeline.schedule: \"programs\" state the order of steps; leave the schedule out");
  EXPECT_EQ(error(head + R"("pipeline": {"stages": 2, "micro_batches": 4, "programs": "F0 B0"}, )" + rules).rfind("p.json: pipeline.programs: expected an array", 0), 0u);
  EXPECT_EQ(error(head + R"("pipeline": {"stages": 2, "micro_batches": 2, "programs": ["F0 F1 B0 B1", "F0 F1 B0"]}, )" + rules).rfind("p.json: pipeline.programs: ", 0), 0u);
  EXPECT_EQ(error(head + R"("pipeline": {"stages": 2, "micro_batches": 2, "programs": ["F0 F1 B0 B1", "F0 X1 B0 B1"]}, )" + rules),
            "p.json: pipeline.programs[1]: 'X1': expected F<micro-batch> or B<micro-batch>, optionally @<chunk>");
  EXPECT_EQ(error(head + R"("pipeline": {"stages": 2, "micro_batches": 2, "programs": ["F0 F1 B0 B1", "", "F0 F1 B0 B1"]}, )" + rules),
            "p.json: pipeline.programs[1]: expected one stage's steps on one line, e.g. \"F0 F1 B0 F2 B1 B2\"");
  EXPECT_EQ(error(head + R"("pipeline": {"stages": 2, "micro_batches": 4, "schedule": "interleaved"}, )" + rules).rfind("p.json: pipeline: ", 0), 0u);
  const UserPlan gpipe = plan_from_json(head + R"("pipeline": {"stages": 2, "micro_batches": 4, "schedule": "gpipe"}, )" + rules, "p.json");
  EXPECT_EQ(gpipe.pipeline->schedule, PipelineSchedule::kGPipe);
  const UserPlan written = plan_from_json(head + R"("pipeline": {"stages": 2, "micro_batches": 2, "programs": ["F0 F1 B0 B1", "F0 B0 F1 B1"]}, )" + rules, "p.json");
  EXPECT_EQ(written.pipeline->schedule, PipelineSchedule::kExplicit);
  ASSERT_EQ(written.pipeline->programs.size(), 2u);
  EXPECT_EQ(written.pipeline->programs[0].size(), 4u);
  const UserPlan recipe = plan_from_json(
      head + R"("precision": "bf16", "recompute": "selective", "zero": 1, "optimizer": "momentum", "rules": [{"select": {}, "partition": {}}]})", "p.json");
  EXPECT_EQ(recipe.precision, Precision::kBf16);
  EXPECT_EQ(recipe.recompute, Recompute::kSelective);
  EXPECT_EQ(recipe.zero, ZeroStage::k1);
  EXPECT_EQ(recipe.optimizer, OptimizerState::kMomentum);
  EXPECT_EQ(plan_from_json(plan_to_json(recipe), "again.json").optimizer, OptimizerState::kMomentum);
  EXPECT_EQ(error(head + R"("optimizer": "lion", "rules": [{"select": {}, "partition": {}}]})"), "p.json: optimizer: expected one of sgd, momentum, adam");
}

// pcgx plan show: the plan a strategy amounts to, lowered again on the
// model, is the same strategy (the same predicted time), for data
// parallelism and Megatron's tensor parallelism (vocabulary-split
// embedding and head included).
// A "classes" degree splits the cross-entropy by vocabulary, as
// Megatron-LM's: the loss is selected as its parts (NAME.lse, NAME), the
// logits stay split, and the plan computes the model's loss. A degree the
// vocabulary does not divide leaves the loss whole, and the rule's kind is
// then named as one it lacks.
TEST(UserPlan, AClassesDegreeSplitsTheLossWithTheLogits) {
  const Graph g = build_model("gpt-tiny", {{"batch", 4}});  // vocabulary 100
  const Graph lowered = lower_plan(g, plan_text(R"([
    {"select": {}, "partition": {"samples": 2}},
    {"select": {"name": "wte"}, "partition": {"samples": 2, "rows": 2}},
    {"select": {"name": "lm_logits"}, "partition": {"samples": 2, "n": 2}},
    {"select": {"name": "loss*"}, "partition": {"samples": 2, "classes": 2}}])"),
                                   4);
  int parts = 0;
  for (const Node& n : lowered.nodes()) {
    EXPECT_NE(n.op->name, "SoftmaxCrossEntropy");
    if (n.name == "loss.lse" || n.name == "loss") {
      ++parts;
      EXPECT_EQ(lowered.shape(n.inputs[0]).dims.back().degree, 2) << describe(n);
    }
  }
  EXPECT_EQ(parts, 2);
  expect_same_outputs(lowered, g);
  // Two degrees: as many blocks as both divide (4), the values the same.
  expect_same_outputs(lower_plan(g, plan_text(R"([
    {"select": {"name": "loss.lse"}, "partition": {"classes": 2}},
    {"select": {"name": "loss"}, "partition": {"classes": 4}}])"),
                                 4),
                      g);
  const std::string e = lowering_error(g, R"([{"select": {"name": "loss*"}, "partition": {"classes": 3}}])", 3);
  EXPECT_NE(e.find("p.json: its \"classes\" degrees split the loss into 3 blocks"), std::string::npos) << e;
  EXPECT_NE(e.find("100 classes do not split into 3 blocks"), std::string::npos) << e;
}

TEST(UserPlan, AStrategysPlanReproducesIt) {
  const Graph g = build_model("gpt-tiny", {{"batch", 4}});
  const Machine m = toy_machine().with_devices(4);
  for (const Graph& parallel : {data_parallel(g, 4), *expert(g, m, 4, 2)}) {
    const Strategy s = mapped(parallel, 4);
    const UserPlan plan = plan_of_strategy(s.graph);
    ASSERT_FALSE(plan.rules.empty());
    const UserPlan again = plan_from_json(plan_to_json(plan), "shown.json");
    ASSERT_EQ(again.rules.size(), plan.rules.size());
    const Strategy lowered = mapped(lower_plan(g, again, 4), 4);
    EXPECT_EQ(lowered.graph.size(), s.graph.size());
    EXPECT_DOUBLE_EQ(lowered.estimate.time, s.estimate.time);
  }
  // BatchNorm's statistics form (a data-parallel ResNeXt) round-trips too.
  const Graph cnn = build_model("resnext-50-tiny", {{"batch", 8}});
  const Strategy cnn_dp = mapped(data_parallel(cnn, 4), 4);
  EXPECT_DOUBLE_EQ(mapped(lower_plan(cnn, plan_of_strategy(cnn_dp.graph), 4), 4).estimate.time, cnn_dp.estimate.time);
  // Data parallelism of an MLP is one rule; Megatron's layers one rule per operator
  // of a layer, whatever the number of layers.
  EXPECT_EQ(plan_of_strategy(mapped(data_parallel(build_model("mlp-tiny", {{"batch", 8}}), 4), 4).graph).rules.size(), 1u);
  const size_t two = plan_of_strategy(mapped(*expert(g, m, 4, 2), 4).graph).rules.size();
  const Graph deeper = build_model("gpt-tiny", {{"batch", 4}, {"layers", 4}});
  EXPECT_EQ(plan_of_strategy(mapped(*expert(deeper, m, 4, 2), 4).graph).rules.size(), two);
}

TEST(UserPlan, TheSearchLowersAPlanAsStated) {
  const Graph g = build_model("gpt-tiny", {{"batch", 4}});
  const CostModel cm(toy_machine().with_devices(4), toy_efficiency());
  SearchOptions o;
  o.algorithm = Algorithm::kPlan;
  static const Ruleset none;
  const RuleLibrary rules(none);
  EXPECT_THROW(optimize(g, rules, MachineMapper(cm), o), FieldError);  // no plan given
  o.plan = std::make_shared<const UserPlan>(load_plan((kPlans / "gpt-megatron-2x2.json").string()));
  const SearchResult r = optimize(g, rules, MachineMapper(cm), o);
  EXPECT_TRUE(r.strategy.estimate.feasible);
  o.algorithm = Algorithm::kMcmc;
  EXPECT_THROW(optimize(g, rules, MachineMapper(cm), o), FieldError);  // only unity searches a plan's unstated operators
}

// Devices a rule states: its operators' tasks run there (the view's start
// and strides from the list, row-major over the task grid), the rest as
// the DP maps them; the plan is then priced by simulation, and it computes
// what the model computes wherever it runs.
TEST(UserPlan, StatedDevicesPlaceTheOperators) {
  const Graph g = build_model("mlp-tiny", {});
  const UserPlan plan = plan_text(R"([{"select": {}, "partition": {"samples": 4}},
      {"select": {"name": "dense1"}, "partition": {"samples": 2, "out": 2}, "devices": [0, 2, 1, 3]},
      {"select": {"name": "dense2"}, "partition": {"samples": 2}, "devices": [6, 7]}])");
  EXPECT_TRUE(assigns_devices(plan));
  EXPECT_FALSE(assigns_devices(plan_text(R"([{"select": {}, "partition": {"samples": 4}}])")));
  std::vector<NodeId> image;
  const Graph lowered = lower_plan(g, plan, 8, true, &image);
  expect_same_outputs(lowered, g);
  std::vector<MachineView> views(lowered.size());
  assign_plan_devices(g, plan, 8, lowered, image, views);
  const Placement place(lowered, views, 8);
  int64_t placed = 0;
  for (const Node& n : lowered.nodes()) {
    const MachineView& v = views[static_cast<size_t>(n.id)];
    if (n.name == "dense1" || n.name == "dense2") {
      const auto& extents = place.tasks(n.id).grid.extents;
      std::vector<int64_t> devices;
      for (int64_t t = 0; t < place.tasks(n.id).tasks; ++t) devices.push_back(v.device(t, extents));
      const std::vector<int64_t> stated = n.name == "dense1" ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{6, 7};
      EXPECT_EQ(devices, stated) << n.name;
      ++placed;
    } else {
      EXPECT_FALSE(v.placed()) << n.name;  // left to the mapping
    }
  }
  EXPECT_EQ(placed, 2);
  // The search keeps them, and its figure is the simulation's.
  const CostModel cm(toy_machine().with_devices(8), toy_efficiency());
  SearchOptions o;
  o.algorithm = Algorithm::kPlan;
  o.plan = std::make_shared<const UserPlan>(plan);
  EXPECT_TRUE(predicts_by_simulation(o));
  static const Ruleset none;
  const SearchResult r = optimize(g, RuleLibrary(none), MachineMapper(cm), o);
  for (const Node& n : r.strategy.graph.nodes()) {
    if (n.name == "dense2") {
      EXPECT_EQ(r.strategy.views[static_cast<size_t>(n.id)].start, 6);
    }
  }
  EXPECT_NEAR(r.strategy.estimate.time, Simulator(r.strategy.graph, r.strategy.views, cm).time(), 1e-12);
  // plan show's format keeps them.
  EXPECT_EQ(plan_from_json(plan_to_json(plan), "again.json").rules[1].devices, (std::vector<int64_t>{0, 2, 1, 3}));
  // A search of the unstated rest keeps them too, priced the same way.
  o.algorithm = Algorithm::kUnity;
  EXPECT_TRUE(predicts_by_simulation(o));
  const SearchResult u = optimize(g, RuleLibrary(none), MachineMapper(cm), o);
  int64_t kept = 0;
  for (const Node& n : u.strategy.graph.nodes())
    if (n.name == "dense2") {
      EXPECT_EQ(u.strategy.views[static_cast<size_t>(n.id)].start, 6);
      ++kept;
    }
  EXPECT_EQ(kept, 1);
  EXPECT_NEAR(u.strategy.estimate.time, Simulator(u.strategy.graph, u.strategy.views, cm).time(), 1e-12);
}

TEST(UserPlan, StatedDevicesMistakesNameTheRule) {
  const Graph g = build_model("mlp-tiny", {});
  auto error = [&](const std::string& devices) {
    const UserPlan plan = plan_text(R"([{"select": {"name": "dense1"}, "partition": {"samples": 2, "out": 2}, "devices": )" + devices + "}]");
    std::vector<MachineView> views;
    try {
      std::vector<NodeId> image;
      const Graph lowered = lower_plan(g, plan, 8, false, &image);
      views.resize(lowered.size());
      assign_plan_devices(g, plan, 8, lowered, image, views);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string at = "p.json: rules[0].devices: node 4 'dense1' (Linear)";  // (the model's node, as other plan errors name it)
  EXPECT_EQ(error("[0, 1, 2]"), at + " runs 4 tasks (batch0 2 x out 2), and 3 devices are stated");
  EXPECT_EQ(error("[0, 1, 2, 8]"), at + ": device 8 is not one of the 8 devices");
  for (const char* not_a_view : {"[3, 2, 1, 0]", "[0, 1, 3, 2]", "[0, 1, 2, 4]"})
    EXPECT_EQ(error(not_a_view), at + ": these devices are not a machine view over its tasks (batch0 2 x out 2): task t runs on the first "
                                      "device plus, per dimension, its index times a stride (0: co-shard, on one device)")
        << not_a_view;
  for (const char* view : {"[4, 6, 5, 7]", "[0, 1, 0, 1]", "[5, 5, 5, 5]"}) EXPECT_EQ(error(view), "") << view;  // (co-shard: a stride of 0)
  const std::string head = R"({"format": "pcgx.plan", "format_version": 1, )";
  EXPECT_EQ(file_error(head + R"("rules": [{"select": {}, "partition": {}, "devices": []}]})"),
            "p.json: rules[0].devices: expected a non-empty array of device numbers, one per task");
  EXPECT_EQ(file_error(head + R"("rules": [{"select": {}, "partition": {}, "devices": [-1]}]})"),
            "p.json: rules[0].devices[0]: expected a whole number of at least 0");
  // A pipelined plan states devices (within each stage), beside a written stage order too.
  EXPECT_EQ(file_error(head + R"("pipeline": {"stages": 2, "micro_batches": 2}, "rules": [{"select": {}, "partition": {}, "devices": [0]}]})"), "");
  EXPECT_EQ(file_error(head + R"("pipeline": {"stages": 2, "micro_batches": 1, "programs": ["F0 B0", "F0 B0"]},
                                  "rules": [{"select": {}, "partition": {}, "devices": [0]}]})"), "");
}

// Only the model's operators are placed: a conversion the lowering
// inserts (the bias of a reduction-split Linear scaled into k summands, a
// ScalarMul of no name) is no rule's, even where a rule selects every
// operator.
TEST(UserPlan, StatedDevicesLeaveTheInsertedConversionsToTheMapping) {
  const Graph g = build_model("gpt-tiny", {});
  const UserPlan plan = plan_text(R"([{"select": {"op": "ScalarMul"}, "partition": {"samples": 2}, "devices": [2, 3]},
      {"select": {"name": "block0.mlp.ffn_output"}, "partition": {"samples": 2, "reduce": 2}}])");
  std::vector<NodeId> image;
  const Graph lowered = lower_plan(g, plan, 4, true, &image);
  std::vector<MachineView> views(lowered.size());
  assign_plan_devices(g, plan, 4, lowered, image, views);
  int64_t inserted = 0, placed = 0;
  for (const Node& n : lowered.nodes()) {
    if (n.op->name != "ScalarMul") continue;
    const MachineView& v = views[static_cast<size_t>(n.id)];
    if (n.name.empty()) {
      ++inserted;
      EXPECT_FALSE(v.placed()) << pcgx::describe(n);
    } else {
      ++placed;
      EXPECT_EQ(v.start, 2) << n.name;
    }
  }
  EXPECT_EQ(inserted, 1);  // the bias's 1/2
  EXPECT_GT(placed, 0);
}

// Co-shard: the tasks a stride of 0 puts on one device run there one
// after another; the memory model counts each task's weight shard (the
// device holds all of a co-sharded weight, as it does the unsplit one).
TEST(UserPlan, CoShardedTasksShareADevice) {
  const Graph g = build_model("mlp-tiny", {});
  const CostModel cm(toy_machine().with_devices(2), toy_efficiency());
  auto weights_on = [&](const std::string& dense1) {
    const UserPlan plan = plan_text(R"([{"select": {}, "partition": {"samples": 2}, "devices": [0, 1]},
        {"select": {"name": "dense1"}, )" + dense1 + "}]");
    SearchOptions o;
    o.algorithm = Algorithm::kPlan;
    o.plan = std::make_shared<const UserPlan>(plan);
    static const Ruleset none;
    const SearchResult r = optimize(g, RuleLibrary(none), MachineMapper(cm), o);
    EXPECT_TRUE(r.strategy.estimate.feasible);
    const Placement place(r.strategy.graph, r.strategy.views, 2);
    return memory_breakdown(place, cm.recipe())[0].weights;
  };
  const double whole = weights_on(R"("partition": {}, "devices": [0])");
  const double coshard = weights_on(R"("partition": {"out": 2}, "devices": [0, 0])");
  const double split = weights_on(R"("partition": {"out": 2}, "devices": [0, 1])");
  EXPECT_DOUBLE_EQ(coshard, whole);
  EXPECT_LT(split, whole);
}

// More tasks than devices (co-shard) leave the mapping nothing to place:
// the operators no rule places, the bias scaling the lowering inserts
// included, are laid over the machine's devices in task order; under ZeRO
// too.
TEST(UserPlan, CoShardBeyondTheDevicesPlacesTheRestOnTheMachine) {
  const Graph g = build_model("gpt-tiny", {{"batch", 4}});
  const auto plan = std::make_shared<const UserPlan>(plan_text(R"([{"select": {}, "partition": {"samples": 2}},
      {"select": {"name": "block0.mlp.ffn_output"}, "partition": {"samples": 4, "reduce": 2}, "devices": [0, 0, 0, 0, 1, 1, 1, 1]}])"));
  SearchOptions o;
  o.algorithm = Algorithm::kPlan;
  o.plan = plan;
  static const Ruleset none;
  const CostModel cm(toy_machine().with_devices(2), toy_efficiency());
  const SearchResult r = optimize(g, RuleLibrary(none), MachineMapper(cm), o);
  ASSERT_TRUE(r.strategy.estimate.feasible) << r.strategy.estimate.infeasible;
  const Placement place(r.strategy.graph, r.strategy.views, 2);
  EXPECT_LE(place.devices_needed(), 2);
  int64_t beyond = 0;  // the co-sharded Linear (8 tasks) and the bias scaling inserted for it (4)
  for (const Node& n : r.strategy.graph.nodes())
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs) && place.tasks(n.id).tasks > 2) ++beyond;
  EXPECT_GE(beyond, 2);
  TrainingRecipe zero1;
  zero1.zero = ZeroStage::k1;
  const CostModel sharded(toy_machine().with_devices(2), toy_efficiency(), {}, {}, zero1);
  const SearchResult z = optimize(g, RuleLibrary(none), MachineMapper(sharded), o);
  EXPECT_TRUE(z.strategy.estimate.feasible) << z.strategy.estimate.infeasible;
}

// The operators around a stated one may follow it: one Linear of a
// data-parallel MLP stated on devices 2 and 3 of 4, the rest data parallel
// unstated. The mapping puts the rest on devices 0 and 1; an operator next
// to the stated one takes its view where the plan then simulates faster.
// Here the first Linear follows it (no transfer between them, and the two
// halves' gradients synchronized on different links): faster than the
// mapping's placement with only the stated Linear moved.
TEST(UserPlan, UnstatedOperatorsFollowTheStatedDevices) {
  const Graph g = build_model("mlp-tiny", {{"batch", 8}, {"hidden", 256}});
  static const Ruleset none;
  const CostModel cm(toy_machine().with_devices(4), toy_efficiency());
  auto planned = [&](const std::string& rules) {
    SearchOptions o;
    o.algorithm = Algorithm::kPlan;
    o.plan = std::make_shared<const UserPlan>(plan_text(rules));
    return optimize(g, RuleLibrary(none), MachineMapper(cm), o).strategy;
  };
  const Strategy placed = planned(R"([{"select": {}, "partition": {"samples": 2}},
      {"select": {"name": "dense1"}, "partition": {"samples": 2}, "devices": [2, 3]}])");
  const Strategy mapped = planned(R"([{"select": {}, "partition": {"samples": 2}}])");
  ASSERT_TRUE(placed.estimate.feasible) << placed.estimate.infeasible;
  ASSERT_EQ(placed.graph.size(), mapped.graph.size());
  std::vector<MachineView> unfollowed = mapped.views;  // the mapping's views, the stated Linear moved
  for (const Node& n : placed.graph.nodes()) {
    if (n.name == "dense1") {
      EXPECT_EQ(placed.views[static_cast<size_t>(n.id)].start, 2);
      unfollowed[static_cast<size_t>(n.id)] = placed.views[static_cast<size_t>(n.id)];
    }
    if (n.name == "dense0") {
      EXPECT_EQ(placed.views[static_cast<size_t>(n.id)].start, 2);  // followed
    }
  }
  EXPECT_NEAR(placed.estimate.time, Simulator(placed.graph, placed.views, cm).time(), 1e-12);
  EXPECT_LT(placed.estimate.time, Simulator(placed.graph, unfollowed, cm).time());
}

// Co-shard under ZeRO: a device holding several replicas of a weight's
// block keeps one share of what the stage shards, as the runtime's
// buckets do (over the distinct devices holding the block), and updates
// it once; without ZeRO each replica keeps and updates its own. So under
// ZeRO the optimizer state and the update per device are those of the
// blocks alone, and without ZeRO twice theirs.
TEST(UserPlan, CoShardedReplicasShareWhatZeroShards) {
  const Graph g = build_model("mlp-tiny", {{"batch", 8}});
  static const Ruleset none;
  auto planned = [&](const std::string& rule, ZeroStage zero) {
    SearchOptions o;
    o.algorithm = Algorithm::kPlan;
    o.plan = std::make_shared<const UserPlan>(plan_text("[" + rule + "]"));
    TrainingRecipe recipe;
    recipe.zero = zero;
    const CostModel cm(toy_machine().with_devices(2), toy_efficiency(), {}, {}, recipe);
    const SearchResult r = optimize(g, RuleLibrary(none), MachineMapper(cm), o);
    EXPECT_TRUE(r.strategy.estimate.feasible) << r.strategy.estimate.infeasible;
    const Placement place(r.strategy.graph, r.strategy.views, 2);
    return std::make_pair(memory_breakdown(place, recipe)[0], Simulator(r.strategy.graph, r.strategy.views, cm).summary().update);
  };
  // Each Linear split by samples and output columns, the two sample halves
  // of a column block on one device: device 0 holds both replicas of
  // block 0. Apart: the same blocks, one replica each.
  const std::string coshard = R"({"select": {"op": "Linear"}, "partition": {"samples": 2, "out": 2}, "devices": [0, 1, 0, 1]})";
  const std::string apart = R"({"select": {"op": "Linear"}, "partition": {"out": 2}, "devices": [0, 1]})";
  const auto [c1, cu1] = planned(coshard, ZeroStage::k1);
  const auto [a1, au1] = planned(apart, ZeroStage::k1);
  EXPECT_DOUBLE_EQ(c1.optimizer, a1.optimizer);
  EXPECT_DOUBLE_EQ(c1.master, a1.master);
  EXPECT_DOUBLE_EQ(c1.weights, 2 * a1.weights);  // stage 1 keeps each replica's weights
  EXPECT_NEAR(cu1, au1, 1e-12);
  const auto [c0, cu0] = planned(coshard, ZeroStage::k0);
  const auto [a0, au0] = planned(apart, ZeroStage::k0);
  EXPECT_DOUBLE_EQ(c0.optimizer, 2 * a0.optimizer);
  EXPECT_NEAR(cu0, 2 * au0, 1e-12);
  EXPECT_GT(a0.optimizer, 0);
  EXPECT_GT(au0, 0);
  const auto [c3, cu3] = planned(coshard, ZeroStage::k3);
  const auto [a3, au3] = planned(apart, ZeroStage::k3);
  EXPECT_DOUBLE_EQ(c3.weights, a3.weights);
  EXPECT_DOUBLE_EQ(c3.gradients, a3.gradients);
  // ZeRO 3 gathers every block a device's tasks read before using it: the
  // two column blocks co-sharded on a device, as much as the whole weight
  // a data-parallel device gathers.
  const std::string columns = R"({"select": {"op": "Linear"}, "partition": {"samples": 2, "out": 2}, "devices": [0, 0, 1, 1]})";
  const std::string whole = R"({"select": {"op": "Linear"}, "partition": {"samples": 2}, "devices": [0, 1]})";
  const auto [w3, wu3] = planned(columns, ZeroStage::k3);
  const auto [d3, du3] = planned(whole, ZeroStage::k3);
  EXPECT_GT(d3.transient, 0);
  EXPECT_DOUBLE_EQ(w3.weights, d3.weights);
  EXPECT_GE(w3.transient, d3.transient);
  // And a device synchronizes every block its co-sharded tasks read: the
  // two column halves' gradients, as many bytes as the whole weight's.
  const CostModel cm(toy_machine().with_devices(2), toy_efficiency());
  std::vector<double> synced;
  for (const std::string& rule : {columns, whole}) {
    SearchOptions o;
    o.algorithm = Algorithm::kPlan;
    o.plan = std::make_shared<const UserPlan>(plan_text("[" + rule + "]"));
    const Strategy st = optimize(g, RuleLibrary(none), MachineMapper(cm), o).strategy;
    const Placement place(st.graph, st.views, 2);
    const SourceLayouts layouts = source_layouts(st.graph);
    double bytes = 0;
    for (const Node& n : st.graph.nodes())
      if (n.name == "dense0")
        for (const TensorRef& w : n.inputs)
          if (layouts.weight(w))
            if (const auto s = cm.sync_group(place, w, 0)) bytes += s->bytes;
    synced.push_back(bytes);
  }
  EXPECT_GT(synced[1], 0);
  EXPECT_DOUBLE_EQ(synced[0], synced[1]);
}

}  // namespace
}  // namespace pcgx::search
