// Recomputation per operator (pcg/training_recipe.h's operators,
// recompute_plan.h): the operators a recipe names re-run in backward,
// whatever they are; the parallel operators carrying data only between
// recomputed ones re-run with them; recomputed operators reading one
// another are one segment. Against the policies: naming what selective
// re-runs is selective. Priced, counted and simulated alike, recorded in
// the strategy file, and the names resolved from patterns.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/user_plan.h"
#include "search/strategy_text.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

TrainingRecipe operators(std::vector<std::string> names) {
  TrainingRecipe r{Precision::kFp32, Recompute::kOperators};
  r.recompute_operators = std::move(names);
  return r;
}

std::vector<std::string> recomputed_names(const Graph& g, const RecomputePlan& plan) {
  std::vector<std::string> out;
  for (const Node& n : g.nodes())
    if (plan.recomputed[static_cast<size_t>(n.id)]) out.push_back(n.name);
  return out;
}

// Naming the operators selective re-runs (on the tiny GPT, data parallel
// on 8 devices, where selective gathers nothing again) gives selective's
// plan, memory and time, in the DP and the simulator.
TEST(RecomputeOperators, NamingWhatSelectiveRerunsIsSelective) {
  const Graph g = data_parallel(build_model("gpt-tiny", {{"batch", 16}}), 8);
  const SourceLayouts layouts = source_layouts(g);
  const RecomputePlan selective = plan_recompute(g, layouts, Recompute::kSelective);
  const std::vector<std::string> names = recomputed_names(g, selective);
  ASSERT_GT(names.size(), 0u);
  const TrainingRecipe named = operators(names);
  const RecomputePlan plan = plan_recompute(g, layouts, named);
  EXPECT_EQ(plan.recomputed, selective.recomputed);
  EXPECT_EQ(plan.segments, selective.segments);
  const CostModel cs(toy_machine(), toy_efficiency(), {}, {}, {Precision::kFp32, Recompute::kSelective});
  const CostModel co(toy_machine(), toy_efficiency(), {}, {}, named);
  const Strategy s = MachineMapper(cs).map(g), o = MachineMapper(co).map(g);
  ASSERT_TRUE(s.estimate.feasible && o.estimate.feasible);
  EXPECT_DOUBLE_EQ(o.estimate.time, s.estimate.time);
  EXPECT_EQ(o.estimate.memory, s.estimate.memory);
  const Estimate sim = simulated_estimate(Simulator(o.graph, o.views, co));
  EXPECT_NEAR(sim.time, o.estimate.time, 1e-9 * o.estimate.time);
  EXPECT_EQ(sim.memory, o.estimate.memory);
}

// Megatron's plan (tensor parallel 2 on 4 devices): naming the attention's
// output product and the dropout reading its summed halves re-runs the
// all-reduce between them too (all in one segment); naming either alone
// leaves it kept, as a product alone leaves the collective after it, whose
// readers are kept. Operators reading none of one another (the query, key
// and value products, each reading the norm's copies) are segments of
// their own.
TEST(RecomputeOperators, ParallelOperatorsBetweenNamedOnesRerunWithThem) {
  const Machine m = find_machine("dgx-h100").with_devices(4);
  const Graph g = *expert(build_model("gpt-tiny", {{"batch", 8}}), m, 4, 2);
  const SourceLayouts layouts = source_layouts(g);
  const auto consumers = g.consumers();
  auto parallel_recomputed = [&](const RecomputePlan& plan) {
    int64_t n = 0;
    for (const Node& x : g.nodes()) n += x.op->op_class == OpClass::kParallel && plan.recomputed[static_cast<size_t>(x.id)];
    return n;
  };
  const std::vector<std::string> qkv{"block0.attn.key", "block0.attn.query", "block0.attn.value"};
  const RecomputePlan both = plan_recompute(g, layouts, operators({"block0.attn.output", "block0.attn_dropout"}));
  EXPECT_GT(parallel_recomputed(both), 0);
  EXPECT_EQ(both.segments, 1);
  // Every recomputed parallel operator carries a recomputed node's output to recomputed readers.
  for (const Node& x : g.nodes()) {
    if (x.op->op_class != OpClass::kParallel || !both.recomputed[static_cast<size_t>(x.id)]) continue;
    EXPECT_TRUE(both.recomputed[static_cast<size_t>(x.inputs[0].node)]) << describe(x);
    for (const auto& [c, i] : consumers[static_cast<size_t>(x.id)]) EXPECT_TRUE(both.recomputed[static_cast<size_t>(c)]) << describe(x);
  }
  EXPECT_EQ(parallel_recomputed(plan_recompute(g, layouts, operators({"block0.attn.output"}))), 0);
  EXPECT_EQ(parallel_recomputed(plan_recompute(g, layouts, operators({"block0.attn_dropout"}))), 0);
  EXPECT_EQ(plan_recompute(g, layouts, operators(qkv)).segments, 3);
  // A name the graph does not have (a piece of a split graph holds some) is no error.
  EXPECT_EQ(plan_recompute(g, layouts, operators({"block9.ln1"})).segments, 0);
}

// Never recomputed, whatever the names: the loss and the graph's outputs
// (read after the backward pass), and an operator another pipeline chunk
// reads (a stage's boundary), whose readers' segments would cross chunks.
TEST(RecomputeOperators, NeverWhatIsReadAfterTheBackwardPassOrAcrossChunks) {
  const Graph g = build_model("gpt-tiny", {});
  const SourceLayouts layouts = source_layouts(g);
  NodeId ln2 = -1;
  for (const Node& n : g.nodes())
    if (n.name == "block0.ln2") ln2 = n.id;
  ASSERT_GE(ln2, 0);
  const TrainingRecipe r = operators({"block0.ln2", "block0.mlp.intermediate", "loss"});
  const RecomputePlan whole = plan_recompute(g, layouts, r);
  EXPECT_TRUE(whole.recomputed[static_cast<size_t>(ln2)]);
  for (const TensorRef& t : g.outputs()) EXPECT_FALSE(whole.recomputed[static_cast<size_t>(t.node)]) << describe(g.node(t.node));
  // A chunk boundary after the second norm: its readers are in the next chunk.
  std::vector<int64_t> chunk(g.size(), 0);
  for (const Node& n : g.nodes()) chunk[static_cast<size_t>(n.id)] = n.id > ln2 ? 1 : 0;
  const RecomputePlan split = plan_recompute(g, layouts, r, chunk);
  EXPECT_FALSE(split.recomputed[static_cast<size_t>(ln2)]);
  EXPECT_EQ(split.segments, 1);  // the feed-forward's first product, alone
}

// Patterns resolve to the names of operators that compute; a pattern
// naming none, or a loss, is an error naming the field.
TEST(RecomputeOperators, PatternsResolveToOperatorsThatCompute) {
  const Graph g = build_model("gpt-tiny", {});
  const std::vector<std::string> names = recompute_operator_names(g, std::vector<std::string>{"block*.mlp.*", "block0.ln1"}, "f");
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_NE(std::find(names.begin(), names.end(), "block0.ln1"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "block1.mlp.intermediate"), names.end());
  for (const std::string& n : names) EXPECT_TRUE(n == "block0.ln1" || n.find(".mlp.") != std::string::npos) << n;
  auto error = [&](const std::string& pattern) {
    try {
      recompute_operator_names(g, std::vector<std::string>{pattern}, "f");
    } catch (const FieldError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error("nothing*"), "f: 'nothing*' names no operator of gpt-tiny that computes (a source or a weight's layout has nothing to recompute)");
  EXPECT_NE(error("loss").find("f: 'loss' names "), std::string::npos);
  EXPECT_NE(error("loss").find("(a loss or a graph output): it cannot be recomputed"), std::string::npos);
}

// The strategy file records the names; operators without them, or names
// beside another policy, are one error naming the field.
TEST(RecomputeOperators, TheStrategyFileRecordsThem) {
  const TrainingRecipe r = operators({"a.b", "c"});
  const CostModel cm(toy_machine(), toy_efficiency(), {}, {}, r);
  const Graph g = linear_graph(64, 32, 16);
  StrategyFile f{g.name(), cm.machine(), 8, "data-parallel", {}, MachineMapper(cm).map(data_parallel(g, 8))};
  f.recipe = cm.recipe();
  const std::string text = strategy_to_json(f);
  EXPECT_EQ(strategy_from_json(text, "s.json").recipe, r);
  EXPECT_EQ(strategy_error(without_field(text, "recompute_operators", "[\n  \"a.b\",\n  \"c\"\n ]")),
            std::string("s.json: recompute_operators: ") + kOperatorsNeedNames);
  EXPECT_EQ(strategy_error(with_field(text, "recompute", "\"operators\"", "\"full\"")),
            "s.json: recompute_operators: applies to recompute operators, not full");
  EXPECT_EQ(strategy_error(with_field(text, "recompute_operators", "[\n  \"a.b\",\n  \"c\"\n ]", "[1]")),
            "s.json: recompute_operators: expected a list of operator names, got [1]");
}

// Pipeline chunks that are the same graph share one search, but not
// where the operators named differ between them (under recompute
// operators a chunk keeps the model's names, pipeline.cpp): block1's
// softmax named, its chunk re-runs it, and a chunk like it holding block2
// is priced as though nothing were named.
TEST(RecomputeOperators, IdenticalPipelineChunksDifferByWhatTheyRecompute) {
  const Graph g = build_model("gpt-tiny", {{"layers", 4}, {"batch", 8}});
  const std::vector<std::string> named = recompute_operator_names(g, std::vector<std::string>{"block1.attn.softmax"}, "test");
  ASSERT_EQ(named.size(), 1u);
  NodeId target = -1;
  for (const Node& n : g.nodes())
    if (n.name == named.front()) target = n.id;
  auto id_of = [&](const std::string& name) {
    for (const Node& n : g.nodes())
      if (n.name == name) return n.id;
    return NodeId{-1};
  };
  SearchOptions o;
  o.algorithm = Algorithm::kDataParallel;
  const PipelineOptions po{4, 4};
  const RuleLibrary rules{Ruleset{}};
  const PipelineResult none = optimize_pipeline(g, rules, CostModel(toy_machine().with_devices(4), toy_efficiency()), o, po);
  const PipelineResult one =
      optimize_pipeline(g, rules, CostModel(toy_machine().with_devices(4), toy_efficiency(), {}, {}, operators(named)), o, po);
  ASSERT_EQ(none.stage.size(), one.stage.size());
  int holding = 0, alike = 0;
  for (size_t s = 0; s < one.stage.size(); ++s) {
    ASSERT_EQ(one.stage[s].first, none.stage[s].first);
    const bool holds = id_of(one.stage[s].first) <= target && target <= id_of(one.stage[s].last);
    SCOPED_TRACE("stage " + std::to_string(s + 1) + " (" + one.stage[s].first + " .. " + one.stage[s].last + ")");
    if (holds) {
      ++holding;
      EXPECT_GT(one.stage[s].micro_batch, none.stage[s].micro_batch);
      EXPECT_LT(one.stage[s].memory, none.stage[s].memory);
    } else {
      alike += one.stage[s].operators == one.stage[1].operators;
      EXPECT_DOUBLE_EQ(one.stage[s].micro_batch, none.stage[s].micro_batch);
      EXPECT_DOUBLE_EQ(one.stage[s].memory, none.stage[s].memory);
    }
  }
  EXPECT_EQ(holding, 1);
  EXPECT_GE(alike, 1) << "no chunk like block1's without it";
}

}  // namespace
}  // namespace pcgx::search
