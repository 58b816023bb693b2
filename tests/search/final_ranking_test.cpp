// The last step of the unity search (search/final_ranking.h): the finalists
// are mapped and simulated, the fastest in simulation is the result, and it
// is never slower in simulation than the search's best by the DP alone.
#include "model_param_name.h"
#include "pcgx/search/final_ranking.h"

#include <gtest/gtest.h>

#include "pcgx/pcg/zoo.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/search.h"
#include "search/shipped_library.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

double simulated(const Graph& g, const MachineMapper& mapper) {
  const Strategy s = mapper.map(g);
  return Simulator(s.graph, s.views, mapper.cost()).time();
}

TEST(FinalRanking, TheFastestInSimulationWins) {
  const Graph g = build_model("dlrm-tiny");
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  std::vector<Finalist> f{{"unpartitioned", g, {}}, {"data parallel", best_data_parallel(g, mapper), {}}};
  if (auto e = tuned_expert(g, mapper)) f.push_back({"expert", *e, {}});
  const Ranking r = rank_by_simulation(f, mapper);
  ASSERT_EQ(r.finalists.size(), f.size());
  ASSERT_GE(r.chosen, 0);
  for (size_t i = 0; i < f.size(); ++i) {
    SCOPED_TRACE(f[i].label);
    EXPECT_EQ(r.finalists[i].label, f[i].label);
    ASSERT_TRUE(r.finalists[i].feasible);
    EXPECT_EQ(r.finalists[i].estimate, mapper.map(f[i].graph).estimate.time);
    EXPECT_EQ(r.finalists[i].simulated, simulated(f[i].graph, mapper));
    EXPECT_LE(r.finalists[static_cast<size_t>(r.chosen)].simulated, r.finalists[i].simulated);
  }
  EXPECT_EQ(rank_by_simulation({}, mapper).chosen, -1);
}

class Ranked : public ::testing::TestWithParam<std::string> {};

TEST_P(Ranked, NeverSlowerInSimulationThanTheSearchsBest) {
  const Graph g = build_model(GetParam());
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.budget = 4;
  o.rank = SearchOptions::Rank::kEstimate;
  const SearchResult by_estimate = optimize(g, shipped_library(), mapper, o);
  EXPECT_EQ(by_estimate.ranking.chosen, -1);
  o.rank = SearchOptions::Rank::kSimulation;
  const SearchResult by_simulation = optimize(g, shipped_library(), mapper, o);
  ASSERT_GE(by_simulation.ranking.chosen, 0);
  EXPECT_EQ(by_simulation.ranking.finalists[0].label, "search");
  EXPECT_EQ(by_simulation.ranking.finalists[0].estimate, by_estimate.strategy.estimate.time);
  const double chosen = simulated(by_simulation.strategy.graph, mapper);
  EXPECT_EQ(chosen, by_simulation.ranking.finalists[static_cast<size_t>(by_simulation.ranking.chosen)].simulated);
  EXPECT_LE(chosen, simulated(by_estimate.strategy.graph, mapper));
  EXPECT_LT(max_difference(g, by_simulation.strategy.graph), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(TinyZoo, Ranked, ::testing::Values("mlp-tiny", "dlrm-tiny", "candle-uno-tiny"),
                         pcgx::testing::model_param_name);

}  // namespace
}  // namespace pcgx::search
