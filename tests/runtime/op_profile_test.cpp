// Measured operator times from a training run (op_profile.h) and their use
// by the cost model (`pcgx run --profile-out`, then `pcgx optimize --profile`).
#include <gtest/gtest.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/op_profile.h"
#include "pcgx/runtime/optimizer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"

namespace pcgx::runtime {
namespace {

TrainResult timed_run(const Graph& g, int devices, int64_t steps) {
  TrainOptions o;
  o.steps = steps, o.batches = 1, o.time_kernels = true;
  std::vector<MachineView> views;
  return train(g, views, devices, o);
}

TEST(OpProfile, EveryOperatorTimedAndTheCostModelUsesThem) {
  const Graph g = search::data_parallel(build_model("mlp-tiny"), 2);
  const TrainResult run = timed_run(g, 2, 4);
  EXPECT_EQ(run.timed_steps, 3);
  Profile prof = profile_from_run(g, run);
  prof.device = "test cpu";
  ASSERT_FALSE(prof.entries.empty());
  EXPECT_GT(prof.update_bytes_per_second, 0);
  // Data parallel: each device copies its gradients into a bucket and the
  // sum back, every timed step.
  EXPECT_GT(prof.bucket_copy_bytes_per_second, 0);
  EXPECT_GT(run.bucket_copy_bytes, 0);
  for (const ProfileEntry& t : prof.entries) {
    EXPECT_GT(t.forward, 0) << t.op;
    EXPECT_GT(t.backward, 0) << t.op;
  }
  // Every compute operator has its entry at its shard shapes, and the cost
  // model reads it back for that operator's tasks.
  const Profile loaded = profile_from_json(profile_to_json(prof), "p.json");
  EXPECT_EQ(loaded.device, "test cpu");
  EXPECT_DOUBLE_EQ(loaded.update_bytes_per_second, prof.update_bytes_per_second);
  EXPECT_DOUBLE_EQ(loaded.bucket_copy_bytes_per_second, prof.bucket_copy_bytes_per_second);
  const search::CostModel cm(search::find_machine("cpu-host").with_devices(2), search::default_efficiency(), loaded);
  int checked = 0;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute) continue;
    std::vector<std::vector<int64_t>> shapes;
    for (const TensorRef& t : n.inputs) shapes.push_back(g.shape(t).shard_shape());
    const ProfileEntry* it = loaded.find(n.op->name, shapes);
    ASSERT_NE(it, nullptr) << describe(n);
    const search::Seconds s = cm.task_time(g, n);
    EXPECT_DOUBLE_EQ(s.forward, it->forward) << describe(n);
    EXPECT_DOUBLE_EQ(s.backward, it->backward) << describe(n);
    ++checked;
  }
  EXPECT_GT(checked, 3);
  EXPECT_DOUBLE_EQ(cm.bucket_pack_time(1e6), 1e6 / prof.bucket_copy_bytes_per_second);
  // The update: as measured for the optimizer the run trained with; for
  // another, scaled by the FP32 words each streams per parameter.
  const OptimizerState ran = priced_as(TrainOptions{}.optimizer);
  EXPECT_DOUBLE_EQ(loaded.update_words, update_words(ran));
  for (const OptimizerState o : kOptimizerStates) {
    SCOPED_TRACE(name(o));
    TrainingRecipe recipe;
    recipe.optimizer = o;
    const search::CostModel priced(search::find_machine("cpu-host").with_devices(2), search::default_efficiency(), loaded, {}, recipe);
    EXPECT_DOUBLE_EQ(priced.update_time(1e6), 1e6 / prof.update_bytes_per_second * update_words(o) / update_words(ran));
  }
}

// 16 times the rows take longer (measured ~13x; 3x leaves room for noise).
TEST(OpProfile, TimesGrowWithTheWork) {
  auto linear = [](int64_t batch) {
    const Graph g = build_model("mlp", {{"batch", batch}, {"hidden", 256}, {"layers", 1}});
    for (const ProfileEntry& t : profile_from_run(g, timed_run(g, 1, 12)).entries)
      if (t.op == "Linear") return t.forward + t.backward;
    return 0.0;
  };
  const double small = linear(16), large = linear(256);
  EXPECT_GT(small, 0);
  EXPECT_GT(large, 3 * small);
}

TEST(OpProfile, AnUntimedRunIsAnError) {
  const Graph g = build_model("mlp-tiny");
  TrainOptions o;
  o.steps = 2;
  EXPECT_THROW(profile_from_run(g, train(g, {}, 1, o)), Error);
}

}  // namespace
}  // namespace pcgx::runtime
