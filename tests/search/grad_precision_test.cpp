// Gradients accumulated and reduced in the compute precision
// (TrainingRecipe::grad_precision compute, precision.h): under mixed
// precision each device keeps 2 bytes of gradient per parameter instead
// of 4 and each bucket moves half the bytes; the weights gathered after
// the update and the update itself are as with FP32 gradients; without
// mixed precision nothing changes. Worked by hand on the toy machine, the
// simulator checked against the estimate, and a strategy file records it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/collectives.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/recipe_flag_checks.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

TrainingRecipe recipe(Precision p, GradPrecision g, ZeroStage zero = ZeroStage::k0) {
  TrainingRecipe r{p, Recompute::kNone, zero};
  r.grad_precision = g;
  return r;
}

TEST(GradPrecision, NamesAndBytes) {
  for (const GradPrecision g : kGradPrecisions) EXPECT_EQ(grad_precision_named(name(g)), g);
  EXPECT_FALSE(grad_precision_named("bf16"));
  EXPECT_EQ(param_bytes(Precision::kBf16, OptimizerState::kAdam, GradPrecision::kCompute).gradient, 2);
  EXPECT_EQ(param_bytes(Precision::kFp16, OptimizerState::kAdam, GradPrecision::kCompute).total(), 16);  // 2 + master 4 + 2 + Adam 8
  EXPECT_EQ(param_bytes(Precision::kBf16, OptimizerState::kAdam, GradPrecision::kFp32).gradient, 4);
  EXPECT_EQ(param_bytes(Precision::kTf32, OptimizerState::kAdam, GradPrecision::kCompute).gradient, 4) << "not mixed: FP32 whatever it says";
}

// Precision.MixedPrecisionLinearByHand's Linear (1e6 parameters) with BF16
// gradients: 2 MB of them kept instead of 4, and data parallel over one
// node all-reduces 2 MB (packing and unpacking them too: 4 passes over 2
// MB at 100 GB/s, 0.08 ms) instead of 4.
TEST(GradPrecision, MixedPrecisionLinearByHand) {
  const Machine m = mixed_machine();
  const CostModel cm(m, toy_efficiency(), {}, {}, recipe(Precision::kBf16, GradPrecision::kCompute));
  const MachineMapper mapper(cm);
  const Graph g = linear_graph(1000, 1000, 1000);
  const Strategy one = mapper.map(g);
  ASSERT_TRUE(one.estimate.feasible);
  EXPECT_NEAR(one.estimate.time, 3e-3 + 3e-4, 1e-9) << "the update streams what it did";
  // 16 bytes a parameter, and the update's FP32 copies of the gradients
  // (4 MB), more than the 2 MB of activations.
  EXPECT_NEAR(one.estimate.memory[0], 16e6 + 4e6, 1);
  const auto kinds = memory_breakdown(Placement(one.graph, one.views, m.num_devices()), cm.recipe());
  EXPECT_NEAR(kinds[0].gradients, 2e6, 1);
  EXPECT_NEAR(kinds[0].master, 4e6, 1);
  const Strategy s = mapper.map(data_parallel(g, 4));
  ASSERT_TRUE(s.estimate.feasible);
  const GroupShape node = strided_group(m, 0, 1, 4);
  EXPECT_NEAR(s.estimate.sync, collective_time(m, Collective::kAllReduce, node, 2e6) + 0.8e-4, 1e-12);
  EXPECT_NEAR(s.estimate.memory[0], 16e6 + 4e6, 1);  // the copies again above the 0.5 + 2 MB of activations
}

// The update copies gradients kept in the compute precision to FP32 (4
// bytes a parameter it updates, as many as the masters), after the
// backward pass: a peak beside the activations', not on top of them.
// Where activations are small the 2 bytes saved per gradient come back at
// the update; where they are large the copies fit in their room.
TEST(GradPrecision, TheUpdateCopiesTheGradientsToFp32) {
  const Machine m = mixed_machine();
  const CostModel half(m, toy_efficiency(), {}, {}, recipe(Precision::kBf16, GradPrecision::kCompute));
  const CostModel whole(m, toy_efficiency(), {}, {}, recipe(Precision::kBf16, GradPrecision::kFp32));
  for (const int64_t batch : {1000, 4000}) {
    SCOPED_TRACE(batch);
    const Graph g = linear_graph(batch, 1000, 1000);
    const std::vector<MachineView> views = MachineMapper(half).map(g).views;
    const DeviceMemory h = memory_breakdown(g, views, m.num_devices(), half.recipe())[0];
    const DeviceMemory w = memory_breakdown(g, views, m.num_devices(), whole.recipe())[0];
    EXPECT_NEAR(h.update_copies, 4e6, 1);
    EXPECT_NEAR(h.update_copies, h.master, 1e-9);
    EXPECT_EQ(w.update_copies, 0.0);
    const double activations = h.activations + h.transient;
    EXPECT_NEAR(activations, 2e3 * static_cast<double>(batch), 1) << "x, kept in BF16";
    EXPECT_NEAR(h.total(), 16e6 + std::max(activations, 4e6), 1);
    EXPECT_NEAR(w.total(), 18e6 + activations, 1);
  }
  // Under ZeRO 1 each device copies the gradients of the shard it updates.
  const CostModel zero(m, toy_efficiency(), {}, {}, recipe(Precision::kBf16, GradPrecision::kCompute, ZeroStage::k1));
  const Graph dp = data_parallel(linear_graph(1000, 1000, 1000), 4);
  const std::vector<DeviceMemory> z = memory_breakdown(dp, MachineMapper(zero).map(dp).views, m.num_devices(), zero.recipe());
  for (size_t d = 0; d < 4; ++d) {
    EXPECT_NEAR(z[d].master, 1e6, 1);
    EXPECT_NEAR(z[d].update_copies, 1e6, 1);
  }
  // A pipeline stage's chunks update together: their copies add up beside
  // their activations added up.
  DeviceMemory a{.weights = 1, .activations = 3, .update_copies = 2}, b{.master = 4, .activations = 1, .update_copies = 3};
  a += b;
  EXPECT_EQ(a.total(), 1 + 4 + 5.0);
}

// GPT under data parallelism over two nodes, at ZeRO 0 and 1: the buckets
// move half the bytes (fewer buckets, less time), the weights gathered
// after the update (ZeRO 1) are the same BF16 weights (in fewer buckets,
// so no more time), the simulator
// agrees with the estimate; in TF32 nothing changes.
TEST(GradPrecision, BucketsMoveHalfTheBytesAndTheSimulatorAgrees) {
  const Graph plan = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 128}}), 8);
  CommOptions comm;
  comm.bucket_bytes = 64 << 10;
  for (const ZeroStage zero : {ZeroStage::k0, ZeroStage::k1}) {
    SCOPED_TRACE(std::string("ZeRO ") + name(zero));
    const CostModel fp32(mixed_machine(), toy_efficiency(), {}, comm, recipe(Precision::kBf16, GradPrecision::kFp32, zero));
    const CostModel half(mixed_machine(), toy_efficiency(), {}, comm, recipe(Precision::kBf16, GradPrecision::kCompute, zero));
    const Strategy a = MachineMapper(fp32).map(plan), b = MachineMapper(half).map(plan);
    ASSERT_TRUE(a.estimate.feasible && b.estimate.feasible);
    ASSERT_EQ(a.views, b.views);
    EXPECT_LT(b.estimate.sync, a.estimate.sync);
    EXPECT_LT(b.estimate.buckets, a.estimate.buckets);
    EXPECT_GT(b.estimate.sync, 0.4 * a.estimate.sync) << "half the bytes, the latencies the same";
    // (The same BF16 weights gathered, in fewer buckets: fewer latencies.)
    EXPECT_LE(b.estimate.gather, a.estimate.gather);
    if (zero == ZeroStage::k1) {
      EXPECT_GT(b.estimate.gather, 0.5 * a.estimate.gather);
    }
    EXPECT_LT(b.estimate.max_memory(), a.estimate.max_memory());
    const double simulated = Simulator(b.graph, b.views, half).time();
    EXPECT_NEAR(simulated / b.estimate.time, 1.0, 0.02);
    const CostModel tf32(mixed_machine(), toy_efficiency(), {}, comm, recipe(Precision::kTf32, GradPrecision::kFp32, zero));
    const CostModel tf32c(mixed_machine(), toy_efficiency(), {}, comm, recipe(Precision::kTf32, GradPrecision::kCompute, zero));
    EXPECT_DOUBLE_EQ(MachineMapper(tf32).map(plan).estimate.time, MachineMapper(tf32c).map(plan).estimate.time);
  }
}

// FP32 gradients the backward pass does not accumulate itself (fp32-cast,
// DeepSpeed's BF16 optimizer): after each micro-batch's backward the
// node synchronizing a weight casts its BF16 gradient to FP32 and adds it,
// 18 bytes a parameter streamed (1e6 parameters at 100 GB/s: 0.18 ms)
// once per micro-batch, and each device keeps both gradients (4 + 2 bytes
// a parameter). The simulator runs the passes where the estimate prices
// them; in TF32 nothing changes.
TEST(GradPrecision, Fp32CastAddsAPassAfterEachMicroBatch) {
  const Machine m = mixed_machine();
  const CostModel fused(m, toy_efficiency(), {}, {}, recipe(Precision::kBf16, GradPrecision::kFp32));
  const CostModel cast(m, toy_efficiency(), {}, {}, recipe(Precision::kBf16, GradPrecision::kFp32Cast));
  EXPECT_EQ(cast_pass_bytes(Precision::kBf16, GradPrecision::kFp32Cast), 18);
  EXPECT_EQ(cast_pass_bytes(Precision::kTf32, GradPrecision::kFp32Cast), 0) << "not mixed: the kernels accumulate FP32";
  EXPECT_EQ(param_bytes(Precision::kBf16, OptimizerState::kAdam, GradPrecision::kFp32Cast).total(), 20);  // 2 + 4 + 4 + 8 + 2
  const double pass = 1e6 * 18 / 1e11;
  for (const int64_t micro_batches : {1, 4}) {
    SCOPED_TRACE(std::to_string(micro_batches) + " micro-batches");
    const Graph one = linear_graph(4000, 1000, 1000);
    const Graph g = micro_batches == 1 ? one : pipelined(one, micro_batches, true);
    const Strategy a = MachineMapper(fused).map(g), b = MachineMapper(cast).map(g);
    ASSERT_TRUE(a.estimate.feasible && b.estimate.feasible);
    ASSERT_EQ(a.views, b.views);
    EXPECT_NEAR(b.estimate.time - a.estimate.time, static_cast<double>(micro_batches) * pass, 1e-12);
    EXPECT_NEAR(Simulator(b.graph, b.views, cast).time(), b.estimate.time, 1e-9 * b.estimate.time);
    const DeviceMemory fm = memory_breakdown(a.graph, a.views, m.num_devices(), fused.recipe())[0];
    const DeviceMemory cm = memory_breakdown(b.graph, b.views, m.num_devices(), cast.recipe())[0];
    EXPECT_NEAR(fm.gradients, 4e6, 1);
    EXPECT_NEAR(cm.gradients, 6e6, 1);
  }
  // Data parallel over 4 devices: each replica's pass over its own copy,
  // the buckets FP32 as with the kernels accumulating.
  const Graph dp = data_parallel(linear_graph(4000, 1000, 1000), 4);
  const Strategy a = MachineMapper(fused).map(dp), b = MachineMapper(cast).map(dp);
  ASSERT_EQ(a.views, b.views);
  EXPECT_NEAR(b.estimate.time - a.estimate.time, pass, 1e-12);
  EXPECT_DOUBLE_EQ(b.estimate.sync, a.estimate.sync);
  const CostModel tf32(m, toy_efficiency(), {}, {}, recipe(Precision::kTf32, GradPrecision::kFp32));
  const CostModel tf32c(m, toy_efficiency(), {}, {}, recipe(Precision::kTf32, GradPrecision::kFp32Cast));
  EXPECT_DOUBLE_EQ(MachineMapper(tf32).map(dp).estimate.time, MachineMapper(tf32c).map(dp).estimate.time);
}

TEST(GradPrecision, AStrategyFileRecordsIt) {
  const CostModel half(mixed_machine(), toy_efficiency(), {}, {}, recipe(Precision::kBf16, GradPrecision::kCompute));
  const StrategyFile f = mapped_file(half, data_parallel(linear_graph(64, 16, 16), 8), "mlp", 8);
  nlohmann::json j = nlohmann::json::parse(strategy_to_json(f));
  EXPECT_EQ(j["grad_precision"], "compute");
  EXPECT_EQ(strategy_from_json(j.dump(), "s.json").recipe.grad_precision, GradPrecision::kCompute);
  j.erase("grad_precision");
  EXPECT_EQ(strategy_from_json(j.dump(), "s.json").recipe.grad_precision, GradPrecision::kFp32) << "absent: FP32, as before it";
  j["grad_precision"] = "bf16";
  try {
    (void)strategy_from_json(j.dump(), "s.json");
    ADD_FAILURE() << "bf16 accepted";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("grad_precision: expected one of fp32, compute, fp32-cast"), std::string::npos) << e.what();
  }
  const CostModel cast(mixed_machine(), toy_efficiency(), {}, {}, recipe(Precision::kBf16, GradPrecision::kFp32Cast));
  nlohmann::json c = nlohmann::json::parse(strategy_to_json(mapped_file(cast, data_parallel(linear_graph(64, 16, 16), 8), "mlp", 8)));
  EXPECT_EQ(c["grad_precision"], "fp32-cast");
  EXPECT_EQ(strategy_from_json(c.dump(), "s.json").recipe.grad_precision, GradPrecision::kFp32Cast);
}

}  // namespace
}  // namespace pcgx::search
