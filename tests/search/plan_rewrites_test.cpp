// A plan's algebraic rewrites (user_plan.h's PlanRewrite) and the
// BatchNorms it leaves whole (batch_norms_split): lowered, they compute
// what the model computes, and each mistake is one error naming the plan,
// the rewrite and the operator.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <span>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/user_plan.h"
#include "search/plan_support.h"

namespace pcgx::search {
namespace {

// A plan's rewrites: unity's fusion of LLaMA's query and key projections
// (unity-c01643~) at the layer-0 operators named. The Linear it makes is
// named after them and a rule selects it by that name; the plan lowered
// computes what the model computes. Unresolved, or where the rule does not
// apply, it is refused naming the rewrite.
TEST(PlanRewrites, ApplyAtTheNamedOperatorsAndComputeTheModel) {
  const Graph g = build_model("llama-tiny", {{"batch", 4}});
  const Ruleset unity = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  const RuleLibrary algebraic(unity, RuleFilter::kAlgebraic);
  const std::set<std::string> ids = rule_ids(std::span(&unity, 1));
  const std::string head = R"({"format": "pcgx.plan", "format_version": 1, "rewrites": [{"rule": "unity-c01643~", "at": )";
  const std::string rules = R"(}], "rules": [{"select": {}, "partition": {"samples": 4}},
                                            {"select": {"name": "layers0.self_attn.query.linear"}, "partition": {"out": 2, "samples": 2}}]})";
  UserPlan plan = plan_from_json(head + R"(["layers0.self_attn.query", "layers0.self_attn.key"])" + rules, "p.json");
  try {
    lower_plan(g, plan, 4);
    ADD_FAILURE() << "lowered unresolved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rewrites[0] (unity-c01643~ at layers0.self_attn.query, layers0.self_attn.key): not resolved"),
              std::string::npos) << e.what();
  }
  resolve_plan_rewrites(plan, algebraic, ids);
  const Graph lowered = lower_plan(g, plan, 4);
  const auto fused = std::find_if(lowered.nodes().begin(), lowered.nodes().end(), [](const Node& n) { return n.name == "layers0.self_attn.query.linear"; });
  ASSERT_NE(fused, lowered.nodes().end());
  EXPECT_EQ(task_grid(lowered, *fused).num_tasks(), 4);
  for (const Node& n : lowered.nodes()) EXPECT_NE(n.name, "layers0.self_attn.key");  // fused away; layer 1's stays
  expect_same_outputs(lowered, g);
  // Refused: across layers (the two read different inputs), a name the
  // model lacks, the same rewrite twice, a rule the rulesets lack or one
  // with a parallel operator.
  auto refusal = [&](const std::string& at, const std::string& extra = "") {
    UserPlan p = plan_from_json(head + at + extra + rules, "p.json");
    try {
      resolve_plan_rewrites(p, algebraic, ids);
      lower_plan(g, p, 4);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("lowered");
  };
  EXPECT_EQ(refusal(R"(["layers0.self_attn.query", "layers1.self_attn.key"])"),
            "p.json: rewrites[0] (unity-c01643~ at layers0.self_attn.query, layers1.self_attn.key): the rule does not apply at those operators, "
            "in that order");
  EXPECT_EQ(refusal(R"(["layers0.self_attn.quary", "layers0.self_attn.key"])"),
            "p.json: rewrites[0] (unity-c01643~ at layers0.self_attn.quary, layers0.self_attn.key): 'layers0.self_attn.quary' is no operator of "
            "'llama-tiny' (nor one an earlier rewrite makes)");
  EXPECT_EQ(refusal(R"(["layers0.self_attn.quary", "layers0.self_attn.kee"])"),
            "p.json: rewrites[0] (unity-c01643~ at layers0.self_attn.quary, layers0.self_attn.kee): 'layers0.self_attn.quary' is no operator of "
            "'llama-tiny' (nor one an earlier rewrite makes)");
  const std::string twice = R"(["layers0.self_attn.query", "layers0.self_attn.key"]}, {"rule": "unity-c01643~", "at": )";
  EXPECT_EQ(refusal(twice, R"(["layers0.self_attn.query", "layers0.self_attn.key"])"),
            "p.json: rewrites[1] (unity-c01643~ at layers0.self_attn.query, layers0.self_attn.key): 'layers0.self_attn.query' was replaced by "
            "rewrites[0]");
  const std::string layer0 = R"(["layers0.self_attn.query", "layers0.self_attn.key"])";
  auto with_rule = [&](const std::string& rule) {
    UserPlan p = plan_from_json(head + layer0 + rules, "p.json");
    p.rewrites[0].rule = rule;
    try {
      resolve_plan_rewrites(p, algebraic, ids);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("resolved");
  };
  EXPECT_EQ(with_rule("unity-c99999"), "p.json: rewrites[0].rule: no rule 'unity-c99999' in the rulesets (pcgx ruleset show lists their ids; "
                                       "--ruleset names others)");
  EXPECT_EQ(with_rule("unity-c00014~"), "p.json: rewrites[0].rule: 'unity-c00014~' is no algebraic rule of the rulesets: it has a parallel "
                                        "operator (the plan's partitions state that, and the communication is derived), or no such direction or rank");
}

// Unity's rewrite of two ReLUs as one over two replica slots
// (unity-c01106~ at rank 4: Relu(x), Relu(y) = Split_r(Relu(Concat_r(x, y))), the
// Concat and Split along the replica axis) is algebraic, so a plan states
// it. Lowered, the ReLU reads each operand in a slot of its own, one task
// per slot: summing the slots into one whole input, as a replicated
// input's slots would be, would change the value. Shown back from the
// lowered strategy, the slots are the model's, not a partition to state.
// A rewrite the search recorded on its partitioned graph: unity-c00091~
// (a Linear's fused ReLU run after it) is proved on data-parallel shards,
// at a degree ("@k8" at 64 devices); the plan rewrites the whole model
// before partitioning it, so the rule is applied in its unpartitioned form
// (the same operators, task by task): the ReLU runs apart at the operator
// named, and the plan computes the model. Unity's CANDLE-Uno plan at 64
// dgx-h100 devices states such a rewrite, and `optimize --plan` had
// refused it.
TEST(PlanRewrites, ARuleProvedOnShardsAppliesToWholeTensors) {
  const Graph g = build_model("mlp-tiny", {{"batch", 8}});
  const Ruleset unity = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  const RuleLibrary algebraic(unity, RuleFilter::kAlgebraic);
  const std::set<std::string> ids = rule_ids(std::span(&unity, 1));
  for (const std::string rule : {"unity-c00091~", "unity-c00091~@k8"}) {
    SCOPED_TRACE(rule);
    UserPlan plan = plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, "rewrites": [{"rule": ")" + rule +
                                       R"(", "at": ["dense1"]}], "rules": [{"select": {}, "partition": {"samples": 2}}]})",
                                   "p.json");
    resolve_plan_rewrites(plan, algebraic, ids);
    std::vector<std::string> applied;
    const Graph rewritten = apply_plan_rewrites(g, plan, &applied);
    EXPECT_EQ(applied, std::vector<std::string>{rule + " at dense1"});
    int relus = 0;
    for (const Node& n : rewritten.nodes()) {
      relus += n.op->name == "Relu";
      if (n.name == "dense1") {
        EXPECT_EQ(n.attrs.get_string("activation"), "none");
      }
    }
    EXPECT_EQ(relus, 1);
    expect_same_outputs(lower_plan(g, plan, 2), g);
  }
}

TEST(PlanRewrites, OperandsInReplicaSlotsOfTheirOwnStayApart) {
  const Graph g = build_model("inception-v3-tiny", {{"batch", 4}});
  const Ruleset unity = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  const RuleLibrary algebraic(unity, RuleFilter::kAlgebraic);
  const std::set<std::string> ids = rule_ids(std::span(&unity, 1));
  for (const std::string partition : {"{}", R"({"samples": 2})"}) {
    SCOPED_TRACE(partition);
    UserPlan plan = plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, "rewrites": [{"rule": "unity-c01106~@4d",
                                       "at": ["Mixed_6b.branch1x1.relu", "Mixed_6b.branch7x7_3.relu"]}],
                                       "rules": [{"select": {}, "partition": )" + partition + "}]}",
                                   "p.json");
    resolve_plan_rewrites(plan, algebraic, ids);
    const Graph lowered = lower_plan(g, plan, 2);
    const auto relu = std::find_if(lowered.nodes().begin(), lowered.nodes().end(), [](const Node& n) { return n.name == "Mixed_6b.branch1x1.relu.relu"; });
    ASSERT_NE(relu, lowered.nodes().end());
    EXPECT_EQ(task_grid(lowered, *relu).num_tasks(), partition == "{}" ? 2 : 4);
    EXPECT_EQ(lowered.node(relu->inputs[0].node).op->name, "Concat");  // its slots as they are, nothing summed
    expect_same_outputs(lowered, g);
    const UserPlan shown = plan_of_strategy(lowered);
    ASSERT_FALSE(shown.rules.empty());
    const NodePlan common = partition == "{}" ? NodePlan{} : NodePlan{{std::string(kSamplesKind), 2}};
    EXPECT_EQ(shown.rules[0].partition, common);
    for (const PlanRule& r : shown.rules) EXPECT_FALSE(r.partition.contains("slot")) << r.select.name;
  }
  // Copies of the paired ReLU would interleave with its two slots, which
  // no reader could take apart: refused, naming it.
  UserPlan copied = plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, "rewrites": [{"rule": "unity-c01106~@4d",
                                       "at": ["Mixed_6b.branch1x1.relu", "Mixed_6b.branch7x7_3.relu"]}],
                                       "rules": [{"select": {"name": "Mixed_6b.branch1x1.relu.relu"}, "partition": {"replicas": 2}}]})",
                                   "p.json");
  resolve_plan_rewrites(copied, algebraic, ids);
  try {
    lower_plan(g, copied, 4);
    ADD_FAILURE() << "copies of the model's slots";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'Mixed_6b.branch1x1.relu.relu' (Relu): an input holds replica slots of its own"), std::string::npos)
        << e.what();
  }
}

// An operator reading the model's slots through a kind that copies an
// input (MatMul split by the rows of A, B copied) gets copies of each
// slot, not copies of their sum; and an operator a strategy runs in more
// slots than its model gives it (after an AllReduce of a parallel rule's
// Concat along the replica axis, which no plan states: one slot) runs in
// copies, as plan show says ("replicas").
TEST(PlanRewrites, CopiesOfTheModelsSlotsAreCopiesOfEach) {
  Graph g("slots");
  auto input = [&](const char* name, IntList shape) { return TensorRef{g.add("Input", {{"shape", shape}}, {}, name), 0}; };
  const TensorRef x1 = input("x1", {4, 6}), x2 = input("x2", {4, 6}), y1 = input("y1", {6, 5}), y2 = input("y2", {6, 5});
  const TensorRef a{g.add("Concat", {{"axis", int64_t{-1}}}, {x1, x2}, "a"), 0}, b{g.add("Concat", {{"axis", int64_t{-1}}}, {y1, y2}, "b"), 0};
  const NodeId mm = g.add("MatMul", {}, {a, b}, "mm");
  const NodeId parts = g.add("Split", {{"axis", int64_t{-1}}, {"sizes", IntList{1, 1}}}, {{mm, 0}}, "parts");
  g.add_output({parts, 0}), g.add_output({parts, 1});
  const Graph lowered = lower_plan(g, plan_text(R"([{"select": {"name": "mm"}, "partition": {"m": 2}}])"), 2);
  expect_same_outputs(lowered, g);
  for (const Node& n : lowered.nodes()) EXPECT_NE(n.op->name, "Reduce");

  Graph s("copies");
  const TensorRef p{s.add("Input", {{"shape", IntList{4, 6}}}, {}, "p"), 0}, q{s.add("Input", {{"shape", IntList{4, 6}}}, {}, "q"), 0};
  const TensorRef pair{s.add("Concat", {{"axis", int64_t{-1}}}, {p, q}), 0};  // unnamed: a parallel rule's
  const TensorRef summed{s.add("AllReduce", {{"degree", int64_t{2}}}, {pair}), 0};
  s.add_output({s.add("Relu", {}, {summed}, "r"), 0});
  const UserPlan shown = plan_of_strategy(s);
  ASSERT_EQ(shown.rules.size(), 1u);
  EXPECT_EQ(shown.rules[0].partition, (NodePlan{{kReplicasKind, 2}}));
}

// A BatchNorm stays one operator unless the plan splits it: a rule that
// partitions or places one of its statistics parts, or the search of the
// unstated operators.
TEST(PlanRewrites, BatchNormsRunWholeUnlessThePlanSplitsThem) {
  const Graph g = build_model("resnext-50-tiny", {{"batch", 8}});
  size_t batch_norms = 0;
  for (const Node& n : g.nodes()) batch_norms += n.op->name == "BatchNorm";
  ASSERT_GT(batch_norms, 2u);
  EXPECT_TRUE(batch_norms_split(g, plan_text(R"([{"select": {}, "partition": {}}])")).empty());
  EXPECT_EQ(batch_norms_split(g, plan_text(R"([{"select": {}, "partition": {"samples": 2}}])")).size(), batch_norms);
  // A rule for a part that keeps it whole keeps the BatchNorm whole, and
  // is no mistake though it then selects nothing.
  const UserPlan for_parts = plan_text(R"([{"select": {}, "partition": {}}, {"select": {"name": "stem.bn.sum"}, "partition": {}}])");
  EXPECT_TRUE(batch_norms_split(g, for_parts).empty());
  EXPECT_NO_THROW(lower_plan(g, for_parts, 2, true));
  EXPECT_EQ(batch_norms_split(g, plan_text(R"([{"select": {}, "partition": {}}, {"select": {"name": "stem.bn.sum"}, "partition": {"samples": 2}}])")),
            std::set<std::string>{"stem.bn"});
  EXPECT_EQ(batch_norms_split(g, plan_text(R"([{"select": {}, "partition": {"samples": 2}}, {"select": {"name": "stage*"}, "partition": {}}])")),
            std::set<std::string>{"stem.bn"});
  // Split by its channels, which it can do itself, it stays whole.
  EXPECT_TRUE(batch_norms_split(g, plan_text(R"([{"select": {}, "partition": {}}, {"select": {"op": "BatchNorm"}, "partition": {"channel": 2}}])")).empty());
  UserPlan searched = plan_text(R"([{"select": {"name": "stem.conv"}, "partition": {"samples": 2}}])");
  searched.unstated = Unstated::kSearch;
  EXPECT_EQ(batch_norms_split(g, searched).size(), batch_norms);
  // Whole, a BatchNorm lowers as one operator of one task.
  const Graph lowered = lower_plan(g, plan_text(R"([{"select": {}, "partition": {}}])"), 2);
  size_t whole = 0;
  for (const Node& n : lowered.nodes()) whole += n.op->name == "BatchNorm";
  EXPECT_EQ(whole, batch_norms);
  expect_same_outputs(lowered, g);
}

}  // namespace
}  // namespace pcgx::search
