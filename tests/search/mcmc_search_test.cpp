// FlexFlow's MCMC search (search/mcmc_search.h): its result computes what
// the model computes, is costed by simulation, is never slower in
// simulation than the data-parallel chain it starts from, and is
// reproducible from its seed.
#include "model_param_name.h"
#include "pcgx/search/mcmc_search.h"
#include "pcgx/search/baselines.h"

#include <gtest/gtest.h>

#include "pcgx/pcg/zoo.h"
#include "pcgx/search/simulator.h"
#include "search/shipped_library.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

const RuleLibrary& library() { return shipped_library(); }

class Mcmc : public ::testing::TestWithParam<std::string> {};

TEST_P(Mcmc, PreservesValuesAndNeverLosesToItsDataParallelStart) {
  const Graph g = build_model(GetParam());
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.algorithm = Algorithm::kMcmc;
  o.proposals = 300;
  const SearchResult r = optimize(g, library(), mapper, o);
  ASSERT_TRUE(r.strategy.estimate.feasible) << r.strategy.estimate.infeasible;
  EXPECT_LT(max_difference(g, r.strategy.graph), 1e-3);
  EXPECT_GT(r.explored, 0);
  // Its estimate is the simulation of its own views.
  const Simulator sim(r.strategy.graph, r.strategy.views, cm);
  EXPECT_EQ(r.strategy.estimate.time, sim.time());
  // Data parallelism, as the DP maps it, is where the first chain starts.
  const Graph dp = best_data_parallel(g, mapper);
  const Simulator start(dp, mapper.map(dp).views, cm);
  EXPECT_LE(r.strategy.estimate.time, start.time());
  // The same seed, the same search.
  const SearchResult again = optimize(g, library(), mapper, o);
  EXPECT_EQ(again.strategy.estimate.time, r.strategy.estimate.time);
  EXPECT_EQ(again.applied, r.applied);
}

INSTANTIATE_TEST_SUITE_P(TinyZoo, Mcmc, ::testing::Values("mlp-tiny", "bert-large-tiny", "dlrm-tiny"),
                         pcgx::testing::model_param_name);

}  // namespace
}  // namespace pcgx::search
