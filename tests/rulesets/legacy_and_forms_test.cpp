// Rule keys, numeric checks, and the legacy FlexFlow import/export on the
// real 640-rule database.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/rulesets/legacy_flexflow.h"
#include "pcgx/rulesets/numeric_check.h"
#include "pcgx/rulesets/rule_form.h"

namespace pcgx {
namespace {

const std::string kLegacy = std::string(PCGX_SOURCE_DIR) + "/../shared/reference/graph_subst_3_v2.json";

Rule relu_commutes(const std::string& x, int dim, bool swap_sides) {
  Graph a, b;
  NodeId xa = a.add("Input", {{"shape", IntList{4, 4}}}, {}, x);
  NodeId pa = a.add("Repartition", {{"dim", int64_t{dim}}, {"degree", int64_t{2}}}, {{xa, 0}});
  a.add_output({a.add("Relu", {}, {{pa, 0}}), 0});
  NodeId xb = b.add("Input", {{"shape", IntList{4, 4}}}, {}, x);
  NodeId rb = b.add("Relu", {}, {{xb, 0}});
  b.add_output({b.add("Repartition", {{"dim", int64_t{dim}}, {"degree", int64_t{2}}}, {{rb, 0}}), 0});
  Rule r{"r", a, b, {{0, 0}}, std::nullopt};
  if (swap_sides) std::swap(r.source, r.target);
  return r;
}

TEST(RuleForm, KeysIgnoreDirectionAndOptionallyNames) {
  const Rule a = relu_commutes("x", 0, false), b = relu_commutes("y", 0, true), c = relu_commutes("x", 1, false);
  EXPECT_EQ(rule_key(a, true), rule_key(b, true));
  EXPECT_NE(rule_key(a, false), rule_key(b, false));
  EXPECT_EQ(rule_key(a, false), rule_key(relu_commutes("x", 0, true), false));
  EXPECT_NE(rule_key(a, true), rule_key(c, true));
  EXPECT_EQ(rule_text(a), "Relu(Repartition[2,d0](x))  =>  Repartition[2,d0](Relu(x))");
}

TEST(NumericCheck, HoldsForATrueRuleAndRefutesAMutant) {
  EXPECT_TRUE(check_numerically(relu_commutes("x", 0, false)).holds);
  // Mutant: the target repartitions another dimension.
  Rule bad = relu_commutes("x", 0, false);
  bad.target = relu_commutes("x", 1, false).target;
  const NumericCheck c = check_numerically(bad);
  EXPECT_FALSE(c.holds);
  EXPECT_NE(c.counterexample.find("parallel shapes differ"), std::string::npos) << c.counterexample;
}

class Legacy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kLegacy)) GTEST_SKIP() << "reference data absent: " << kLegacy;
  }
};

TEST_F(Legacy, EveryRuleIsClassified) {
  const LegacyImport li = import_flexflow(read_text_file(kLegacy), kLegacy, LegacyDims::kForward);
  ASSERT_EQ(li.legacy.size(), 640u);
  size_t expressible = 0, holds = 0, refuted = 0;
  for (const LegacyRule& lr : li.legacy) {
    if (!lr.expressible) {
      EXPECT_FALSE(lr.reason.empty()) << lr.name;
      continue;
    }
    ++expressible;
    const NumericCheck c = check_numerically(li.rules.rules[static_cast<size_t>(lr.index)]);
    (c.holds ? holds : refuted) += 1;
    if (!c.holds) {
      EXPECT_FALSE(c.counterexample.empty()) << lr.name;
    }
  }
  EXPECT_EQ(expressible, li.rules.rules.size());
  EXPECT_EQ(holds + refuted, expressible);
  EXPECT_GT(holds, 0u);
  EXPECT_GT(refuted, 0u);
}

TEST_F(Legacy, KnownRulesImportAsExpected) {
  const LegacyImport li = import_flexflow(read_text_file(kLegacy), kLegacy, LegacyDims::kForward);
  std::map<std::string, const Rule*> by_name;
  for (const Rule& r : li.rules.rules) by_name[r.id] = &r;
  // taso_rule_0: nested partitions commute past a combine.
  ASSERT_TRUE(by_name.count("taso_rule_0"));
  EXPECT_EQ(rule_text(*by_name["taso_rule_0"]),
            "Combine[2,d1](Repartition[2,d2](Repartition[2,d1](in1)))  =>  Repartition[2,d2](in1)");
  EXPECT_TRUE(check_numerically(*by_name["taso_rule_0"]).holds);
}

TEST_F(Legacy, ExportThenImportKeepsEveryExpressibleRule) {
  const LegacyImport li = import_flexflow(read_text_file(kLegacy), kLegacy, LegacyDims::kForward);
  std::vector<std::string> skipped;
  const std::string text = export_flexflow(li.rules, LegacyDims::kForward, skipped);
  const LegacyImport back = import_flexflow(text, "exported", LegacyDims::kForward);
  // Inputs the import gave a parallel state cannot be written back: the
  // legacy format has none.
  EXPECT_EQ(back.rules.rules.size() + skipped.size(), li.rules.rules.size());
  std::map<std::string, std::string> keys;
  for (const Rule& r : li.rules.rules) keys[r.id] = rule_key(r, false);
  for (const Rule& r : back.rules.rules) EXPECT_EQ(rule_key(r, false), keys[r.id]) << r.id;
}

TEST(LegacyFormat, MalformedFilesAreErrors) {
  EXPECT_THROW(import_flexflow("{", "x.json", LegacyDims::kForward), Error);
  EXPECT_THROW(import_flexflow("{\"rules\": []}", "x.json", LegacyDims::kForward), Error);
  const LegacyImport li = import_flexflow(R"({"rule": [{"name": "r", "srcOp": [{"type": "OP_FROB", "input": [], "para": []}],
                                              "dstOp": [], "mappedOutput": []}]})",
                                          "x.json", LegacyDims::kForward);
  ASSERT_EQ(li.legacy.size(), 1u);
  EXPECT_FALSE(li.legacy[0].expressible);
  EXPECT_NE(li.legacy[0].reason.find("OP_FROB has no pcgx equivalent"), std::string::npos) << li.legacy[0].reason;
}

}  // namespace
}  // namespace pcgx

namespace pcgx {
namespace {

TEST(NumericCheck, RescaledRulesKeepTheirStructureAtLargerShapes) {
  const Rule r = relu_commutes("x", 1, false);
  const Rule big = rescale(r, 3);
  EXPECT_EQ(big.source.node(0).outputs[0].to_string(), "f32[12, 12]");
  EXPECT_EQ(rule_key(big, true), rule_key(r, true));  // sizes are not part of a rule's key
  EXPECT_TRUE(check_at_other_shapes(r).holds);
  // A Split scales its pieces with the tensor.
  Graph a, b;
  NodeId x = a.add("Input", {{"shape", IntList{4, 4}}}, {}, "x");
  NodeId s = a.add("Split", {{"axis", int64_t{0}}, {"sizes", IntList{2, 2}}}, {{x, 0}});
  a.add_output({a.add("Concat", {{"axis", int64_t{0}}}, {{s, 0}, {s, 1}}), 0});
  b.add_output({b.add("Input", {{"shape", IntList{4, 4}}}, {}, "x"), 0});
  const Rule split{"s", a, b, {{0, 0}}, std::nullopt};
  EXPECT_EQ(rescale(split, 2).source.node(1).attrs.get_ints("sizes"), (IntList{4, 4}));
  EXPECT_TRUE(check_at_other_shapes(split).holds);
}

}  // namespace
}  // namespace pcgx
