// tuned_expert (baselines.h): the fastest tensor-parallel degree that fits;
// where none fits, the one needing the least memory, so that what starts
// from it (a pipeline's micro-batches, the no-plan message) starts from the
// closest miss rather than from the first degree tried.
#include <gtest/gtest.h>

#include <limits>

#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "toy_machines.h"

namespace pcgx::search {
namespace {

TEST(TunedExpert, WhereNoDegreeFitsTheLeastMemory) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  Machine m = toy_machine();
  const int64_t n = m.num_devices();
  const CostModel roomy_cost(m, toy_efficiency());
  const MachineMapper roomy(roomy_cost);
  // Each degree's need, and the least of them.
  double least = std::numeric_limits<double>::infinity(), most = 0;
  for (int64_t t : expert_tensor_degrees(m, n, expert_family(g))) {
    const double need = roomy.map(*expert(g, m, n, t)).estimate.max_memory();
    least = std::min(least, need), most = std::max(most, need);
  }
  ASSERT_LT(least, most);  // the degrees differ, or the test proves nothing
  m.device.memory_capacity = least / 2;
  const CostModel tight_cost(m, toy_efficiency());
  const MachineMapper tight(tight_cost);
  const Strategy chosen = tight.map(*tuned_expert(g, tight));
  EXPECT_FALSE(chosen.estimate.feasible);
  EXPECT_DOUBLE_EQ(chosen.estimate.max_memory(), least);
}

}  // namespace
}  // namespace pcgx::search
