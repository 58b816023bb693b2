// AutoDDL's coordinate descent (search/autoddl_search.h): its result
// computes what the model computes, is never predicted slower than data
// parallelism (one of its starting points), and is the same from the same
// seed.
#include "pcgx/search/autoddl_search.h"

#include <gtest/gtest.h>

#include "model_param_name.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "search/shipped_library.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

class Autoddl : public ::testing::TestWithParam<std::string> {};

TEST_P(Autoddl, PreservesValuesAndNeverLosesToDataParallelism) {
  const Graph g = build_model(GetParam());
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.algorithm = Algorithm::kAutoddl;
  o.evaluations = 600;
  const SearchResult r = optimize(g, shipped_library(), mapper, o);
  ASSERT_TRUE(r.strategy.estimate.feasible) << r.strategy.estimate.infeasible;
  EXPECT_LT(max_difference(g, r.strategy.graph), 1e-3);
  EXPECT_GT(r.evaluated, 0);
  EXPECT_LE(r.evaluated, o.evaluations);
  EXPECT_LE(r.strategy.estimate.time, mapper.time(data_parallel(g, 4)) * (1 + 1e-9));
  const SearchResult again = optimize(g, shipped_library(), mapper, o);
  EXPECT_EQ(again.strategy.estimate.time, r.strategy.estimate.time);
  EXPECT_EQ(again.evaluated, r.evaluated);
}

INSTANTIATE_TEST_SUITE_P(TinyZoo, Autoddl, ::testing::Values("mlp-tiny", "dlrm-tiny", "bert-large-tiny", "resnext-50-tiny"),
                         pcgx::testing::model_param_name);

// Coordinate descent improves on its starts: on 4 layers of the 8192-wide
// MLP over 8 GPUs at batch 64, where data parallelism all-reduces 1 GB of
// weight gradients for little compute, it finds a plan the DP predicts
// well below data parallelism.
TEST(Autoddl, BeatsDataParallelismWhereWeightsDominate) {
  const Graph g = build_model("mlp", {{"layers", 4}, {"batch", 64}});
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.algorithm = Algorithm::kAutoddl;
  o.evaluations = 400;
  const SearchResult r = optimize(g, shipped_library(), mapper, o);
  ASSERT_TRUE(r.strategy.estimate.feasible);
  EXPECT_LT(r.strategy.estimate.time, 0.8 * mapper.time(data_parallel(g, 8)));
}

}  // namespace
}  // namespace pcgx::search
