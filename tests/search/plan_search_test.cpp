// Searching what a plan leaves unstated (unity_search.h's plan_search):
// the operators its rules select run exactly as stated, the rest as unity
// finds best, and the result still computes the model.
#include <gtest/gtest.h>

#include <map>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/search.h"
#include "pcgx/search/user_plan.h"
#include "search/shipped_library.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

UserPlan plan_text(const std::string& fields) {
  return plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, )" + fields + "}", "p.json");
}

std::map<std::string, const Node*> compute_by_name(const Graph& g) {
  std::map<std::string, const Node*> out;
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kCompute && !n.name.empty()) out[n.name] = &n;
  return out;
}

int64_t tasks(const Node& n) {
  int64_t t = 1;
  for (const ParallelTensorShape& s : n.outputs) t = std::max(t, s.num_shards());
  return t;
}

void expect_same_outputs(const Graph& found, const Graph& model) {
  const SourceFn<float> src = random_sources<float>(5);
  const auto want = evaluate_outputs<float>(model, src), got = evaluate_outputs<float>(found, src);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o)
    for (size_t i = 0; i < want[o].data.size(); ++i) EXPECT_NEAR(got[o].data[i], want[o].data[i], 1e-4 * (1 + std::abs(want[o].data[i])));
}

struct Searched {
  SearchResult as_stated, searched;
};

Searched both(const Graph& g, const UserPlan& plan, int64_t devices) {
  const CostModel cm(toy_machine().with_devices(devices), toy_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.plan = std::make_shared<const UserPlan>(plan);
  o.algorithm = Algorithm::kPlan;
  Searched s{optimize(g, shipped_library(), mapper, o), {}};
  o.algorithm = Algorithm::kUnity;
  s.searched = optimize(g, shipped_library(), mapper, o);
  return s;
}

// One operator stated (the first layer's query projection split by output
// columns): the rest, one task each as stated, is searched, and the stated
// operator keeps its task grid and layouts.
TEST(PlanSearch, TheStatedOperatorStaysAndTheRestIsSearched) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const auto [as_stated, searched] =
      both(g, plan_text(R"("rules": [{"select": {"name": "block0.attn.query"}, "partition": {"out": 2}}])"), 4);
  ASSERT_TRUE(searched.strategy.estimate.feasible);
  EXPECT_LT(searched.strategy.estimate.time, as_stated.strategy.estimate.time);
  const auto stated = compute_by_name(as_stated.strategy.graph), found = compute_by_name(searched.strategy.graph);
  ASSERT_TRUE(found.count("block0.attn.query"));
  EXPECT_EQ(found.at("block0.attn.query")->outputs, stated.at("block0.attn.query")->outputs);
  EXPECT_EQ(tasks(*found.at("block0.attn.query")), 2);
  int64_t split = 0;  // unstated operators that now run as several tasks
  for (const auto& [name, n] : found) split += name != "block0.attn.query" && tasks(*n) > 1;
  EXPECT_GT(split, 0);
  expect_same_outputs(searched.strategy.graph, g);
}

// Every operator stated: nothing compute is rewritten; the result is as
// fast as the plan lowered as stated or faster (its layout changes may
// still be simplified), every operator with its stated layouts.
TEST(PlanSearch, AFullyStatedPlanKeepsEveryOperator) {
  const Graph g = build_model("mlp-tiny", {{"batch", 8}});
  const auto [as_stated, searched] = both(g, plan_text(R"("rules": [{"select": {}, "partition": {"samples": 2}}])"), 4);
  EXPECT_LE(searched.strategy.estimate.time, as_stated.strategy.estimate.time);
  const auto stated = compute_by_name(as_stated.strategy.graph), found = compute_by_name(searched.strategy.graph);
  EXPECT_EQ(found.size(), stated.size());
  for (const auto& [name, n] : stated) {
    ASSERT_TRUE(found.count(name)) << name;
    EXPECT_EQ(found.at(name)->outputs, n->outputs) << name;
  }
  expect_same_outputs(searched.strategy.graph, g);
}

// The stated operators are kept by name: one without a name, or two of one
// name, cannot be, and the plan is refused naming the rule and operator.
TEST(PlanSearch, AStatedOperatorNeedsAName) {
  GraphBuilder b("twins");
  TensorRef x = b.input("x", {8, 16});
  x = b.linear(x, 16, "relu", false, "dense");
  x = b.linear(x, 16, "none", false, "dense");
  b.graph().add_output(b.mse_loss(x, b.input("y", {8, 16})));
  const Graph g = b.finish();
  const CostModel cm(toy_machine().with_devices(4), toy_efficiency());
  SearchOptions o;
  o.plan = std::make_shared<const UserPlan>(plan_text(R"("rules": [{"select": {"op": "Linear"}, "partition": {"out": 2}}])"));
  try {
    optimize(g, shipped_library(), MachineMapper(cm), o);
    ADD_FAILURE() << "searched";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: rules[0]: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("shares its name with another operator"), std::string::npos) << e.what();
  }
}

// Two stated operators computing the same (a Relu of one tensor, twice):
// merging common subexpressions would drop one of them, so the search keeps
// both as stated.
TEST(PlanSearch, StatedTwinsAreNotMerged) {
  GraphBuilder b("twins");
  const TensorRef x = b.linear(b.input("x", {8, 16}), 16, "none", false, "dense");
  const TensorRef sum = b.binary("EwAdd", b.unary("Relu", x, "a"), b.unary("Relu", x, "b"));
  b.graph().add_output(b.mse_loss(sum, b.input("y", {8, 16})));
  const Graph g = b.finish();
  const auto [as_stated, searched] = both(g, plan_text(R"("unstated": "search", "rules": [{"select": {"op": "Relu"}, "partition": {"samples": 2}}])"), 4);
  const auto found = compute_by_name(searched.strategy.graph);
  EXPECT_TRUE(found.count("a") && found.count("b"));
  expect_same_outputs(searched.strategy.graph, g);
}

TEST(PlanSearch, TheFileSaysWhetherTheRestIsSearched) {
  EXPECT_EQ(plan_text(R"("rules": [{"select": {}, "partition": {}}])").unstated, Unstated::kOneTask);
  const UserPlan p = plan_text(R"("unstated": "search", "rules": [{"select": {}, "partition": {}}])");
  EXPECT_EQ(p.unstated, Unstated::kSearch);
  EXPECT_EQ(plan_from_json(plan_to_json(p), "again.json").unstated, Unstated::kSearch);
  try {
    plan_text(R"("unstated": "auto", "rules": [{"select": {}, "partition": {}}])");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("p.json: unstated: expected \"one-task\"", 0), 0u) << e.what();
  }
  // Only unity searches the rest.
  const Graph g = build_model("mlp-tiny", {{"batch", 8}});
  const CostModel cm(toy_machine().with_devices(4), toy_efficiency());
  SearchOptions o;
  o.plan = std::make_shared<const UserPlan>(p);
  o.algorithm = Algorithm::kSequential;
  EXPECT_THROW(optimize(g, shipped_library(), MachineMapper(cm), o), FieldError);
}

}  // namespace
}  // namespace pcgx::search
