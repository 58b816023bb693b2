// runner::optimize choosing the recomputation: none where memory does not
// constrain the search, a policy that fits where it does, and, where none
// fits, one reason naming the smallest need found and what would lower it.
#include <gtest/gtest.h>

#include <string>

#include "pcgx/pcg/zoo.h"
#include "pcgx/runner/optimize.h"
#include "pcgx/search/machine_mapping.h"
#include "search/toy_machines.h"

namespace pcgx::runner {
namespace {

// The tiny GPT on one toy device, searched as data parallelism (no rules).
OptimizeRequest request(double capacity, std::optional<Recompute> recompute) {
  OptimizeRequest q;
  q.model = build_model("gpt-tiny", {});
  q.machine = search::toy_machine().with_devices(1);
  q.machine.device.memory_capacity = capacity;
  q.search.algorithm = search::Algorithm::kDataParallel;
  q.efficiency = search::toy_efficiency();
  q.recompute = recompute;
  return q;
}

double need(Recompute r) {
  const OptimizeReport rep = optimize(request(1e12, r));
  return rep.result.search.strategy.estimate.max_memory();
}

TEST(OptimizeRecompute, NoneWhenMemoryDoesNotConstrain) {
  const OptimizeReport rep = optimize(request(1e12, std::nullopt));
  ASSERT_TRUE(rep.result.search.strategy.estimate.feasible);
  EXPECT_EQ(rep.file.recipe.recompute, Recompute::kNone);
  ASSERT_EQ(rep.tried.size(), 1u);  // nothing refused: recomputing could only add time
  EXPECT_TRUE(rep.tried[0].feasible);
}

TEST(OptimizeRecompute, AutoRecomputesWhereNothingElseFits) {
  const double none = need(Recompute::kNone), sel = need(Recompute::kSelective), full = need(Recompute::kFull);
  ASSERT_LT(sel, none);
  ASSERT_LT(full, sel);
  // Between full's need and selective's: only full fits.
  const OptimizeReport rep = optimize(request((full + sel) / 2, std::nullopt));
  ASSERT_TRUE(rep.result.search.strategy.estimate.feasible) << rep.result.search.strategy.estimate.infeasible;
  EXPECT_EQ(rep.file.recipe.recompute, Recompute::kFull);
  EXPECT_EQ(rep.cost->recipe().recompute, Recompute::kFull);
  ASSERT_EQ(rep.tried.size(), 3u);
  EXPECT_FALSE(rep.tried[0].feasible);
  EXPECT_DOUBLE_EQ(rep.tried[0].smallest_need, none);
  EXPECT_FALSE(rep.tried[1].feasible);
  EXPECT_TRUE(rep.tried[2].feasible);
  // Between selective's and none's: selective, and full is not searched
  // once selective met no memory limit.
  const OptimizeReport mid = optimize(request((sel + none) / 2, std::nullopt));
  EXPECT_EQ(mid.file.recipe.recompute, Recompute::kSelective);
  EXPECT_EQ(mid.tried.size(), 2u);
}

TEST(OptimizeRecompute, NoPlanNamesTheSmallestNeed) {
  const double full = need(Recompute::kFull);
  const OptimizeReport rep = optimize(request(full / 2, std::nullopt));
  const search::Estimate& e = rep.result.search.strategy.estimate;
  ASSERT_FALSE(e.feasible);
  EXPECT_NE(e.infeasible.find("the smallest plan found needs"), std::string::npos) << e.infeasible;
  EXPECT_NE(e.infeasible.find("recompute full"), std::string::npos) << e.infeasible;
  EXPECT_NE(e.infeasible.find("mixed precision"), std::string::npos) << e.infeasible;
  // A policy asked for is the only one searched.
  const OptimizeReport one = optimize(request(full / 2, Recompute::kSelective));
  EXPECT_EQ(one.tried.size(), 1u);
  EXPECT_NE(one.result.search.strategy.estimate.infeasible.find("recompute selective"), std::string::npos);
}

}  // namespace
}  // namespace pcgx::runner
