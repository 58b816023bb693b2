// The search end to end on small models: its result computes what the
// model computes, is never predicted slower than the baselines it is
// compared with, and survives the strategy file.
#include <gtest/gtest.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/unity_search.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

const RuleLibrary& library() {
  static const Ruleset rs = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  static const RuleLibrary lib(rs);
  return lib;
}

class UnitySearch : public ::testing::TestWithParam<std::string> {};

TEST_P(UnitySearch, PreservesValuesAndBeatsTheBaselines) {
  const Graph g = build_model(GetParam());
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.budget = 6;
  const SearchResult r = optimize(g, library(), mapper, o);
  ASSERT_TRUE(r.strategy.estimate.feasible) << r.strategy.estimate.infeasible;
  EXPECT_LT(max_difference(g, r.strategy.graph), 1e-3);
  for (const std::string b : {"data-parallel", "expert"}) {
    if (b == "expert" && expert_family(g).empty()) continue;
    SearchOptions ob;
    ob.algorithm = b;
    const SearchResult base = optimize(g, library(), mapper, ob);
    EXPECT_LE(r.strategy.estimate.time, base.strategy.estimate.time * (1 + 1e-9)) << b;
  }
  // Round trip through the strategy file.
  StrategyFile f{g.name(), cm.machine(), 4, "unity", r.applied, r.strategy};
  const StrategyFile back = strategy_from_json(strategy_to_json(f), "s.json");
  EXPECT_EQ(back.strategy.graph.size(), r.strategy.graph.size());
  EXPECT_EQ(back.applied, r.applied);
  for (const Node& n : r.strategy.graph.nodes())
    if (n.op->op_class != OpClass::kSource) {
      EXPECT_EQ(back.strategy.views[static_cast<size_t>(n.id)], r.strategy.views[static_cast<size_t>(n.id)]);
    }
  EXPECT_NEAR(mapper.map(back.strategy.graph).estimate.time, r.strategy.estimate.time, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Tiny, UnitySearch, ::testing::Values("mlp-tiny", "dlrm-tiny", "xdl-tiny"),
                         [](const auto& p) {
                           std::string s = p.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(UnitySearch, FindsModelParallelismForAWideMlp) {
  // 8192-wide layers on 8 GPUs: replicating 1B parameters costs more than
  // moving activations, so the search must beat data parallelism.
  const Graph g = build_model("mlp", {{"layers", 4}, {"batch", 2048}});
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.budget = 16;
  const SearchResult r = optimize(g, library(), mapper, o);
  const double dp = mapper.map(data_parallel(g, 8)).estimate.time;
  EXPECT_LT(r.strategy.estimate.time, 0.9 * dp);
  EXPECT_FALSE(r.applied.empty());
}

TEST(UnitySearch, UnknownAlgorithmAndUncoveredExpertAreErrors) {
  const Graph g = build_model("mlp-tiny");
  const CostModel cm(find_machine("dgx-h100").with_devices(2), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.algorithm = "magic";
  EXPECT_THROW(optimize(g, library(), mapper, o), Error);
  o.algorithm = "expert";
  EXPECT_THROW(optimize(g, library(), mapper, o), Error);
}

TEST(GraphSplitting, CutsLargeModelsIntoPiecesOfAtLeastK) {
  const Graph g = build_model("bert-large-tiny");
  const auto pieces = split_points(g, library(), 10);
  ASSERT_GT(pieces.size(), 1u);
  size_t total = 0;
  for (const auto& p : pieces) {
    EXPECT_GE(p.size(), 10u);
    total += p.size();
  }
  size_t compute = 0;
  for (const Node& n : g.nodes()) compute += n.op->op_class != OpClass::kSource;
  EXPECT_EQ(total, compute);
}

}  // namespace
}  // namespace pcgx::search
