// Megatron-LM's bias-dropout-add fusion (training_recipe.h's
// DropoutAddKernel::kFused, pcg/dropout_add_kernels.h): each dropout read
// by a residual sum alone runs in the sum's pass, its own forward pass
// gone; the backward passes and what is kept are eager's. The simulator
// agrees, recomputation re-runs the kernel (the pass saved twice), a
// dropout re-run alone re-runs its own pass, and a strategy file records
// it.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/dropout_add_kernels.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

CostModel model(DropoutAddKernel k, Recompute r = Recompute::kNone) {
  TrainingRecipe recipe{Precision::kFp32, r, ZeroStage::k0};
  recipe.dropout_add = k;
  return CostModel(toy_machine(), toy_efficiency(), {}, {}, recipe);
}

NodeId id_of(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.name == name) return n.id;
  ADD_FAILURE() << "no node " << name;
  return 0;
}

// The tiny GPT's two layers: attention's dropout and the MLP's, each with
// the residual sum after it; the embeddings' dropout, read by the first
// norm and the first residual sum, stays eager, as does attention's
// dropout of the scores (read by a product).
TEST(DropoutAdd, EachLayersTwoDropoutsAndTheirResidualSums) {
  const Graph g = data_parallel(build_model("gpt-tiny", {}), 2);
  const DropoutAddKernels k = find_dropout_add_kernels(g, source_layouts(g));
  EXPECT_EQ(k.count(), 4u);
  for (const std::string b : {"block0", "block1"})
    for (const std::string part : {"attn", "mlp"}) {
      const NodeId d = id_of(g, b + "." + part + "_dropout"), s = id_of(g, b + "." + part + "_residual");
      EXPECT_EQ(k.partner_of(d), s) << b << part;
      EXPECT_EQ(k.partner_of(s), d) << b << part;
    }
  EXPECT_FALSE(k.fused(id_of(g, "emb_dropout")));
  size_t fused = 0;
  for (const Node& n : g.nodes()) fused += k.fused(n.id) ? 1 : 0;
  EXPECT_EQ(fused, 8u);
}

// Megatron-LM's tensor parallelism over the 4 devices of a node, with and
// without sequence parallelism: the dropout and its sum run one task
// each on every device (or a share of the sequence each), read through
// no parallel operator, and fuse as under data parallelism.
TEST(DropoutAdd, TensorAndSequenceParallelPlansFuseTheSame) {
  for (const bool sp : {false, true}) {
    const std::optional<Graph> t = expert(build_model("gpt-tiny", {{"batch", 8}, {"seq", 128}}), toy_machine(), 4, 4, sp);
    ASSERT_TRUE(t.has_value());
    const DropoutAddKernels k = find_dropout_add_kernels(*t, source_layouts(*t));
    EXPECT_EQ(k.count(), 4u) << "sequence parallel " << sp;
    for (const std::string b : {"block0", "block1"})
      for (const std::string part : {"attn", "mlp"}) {
        const NodeId d = id_of(*t, b + "." + part + "_dropout");
        EXPECT_EQ(k.partner_of(d), id_of(*t, b + "." + part + "_residual")) << b << part << " sequence parallel " << sp;
      }
  }
}

// Only a dropout whose one reader is a sum of it and another activation
// of its shape.
TEST(DropoutAdd, OnlyADropoutReadByOneSumOfItAndAnActivation) {
  enum Case { kFused, kTwoReaders, kReadTwice, kAnOutput, kAWeight, kAProduct, kTwoDropouts };
  for (const Case c : {kFused, kTwoReaders, kReadTwice, kAnOutput, kAWeight, kAProduct, kTwoDropouts}) {
    GraphBuilder b("g");
    const TensorRef x = b.input("x", {4, 8}), r = c == kAWeight ? b.weight("r", {4, 8}) : b.input("r", {4, 8});
    const TensorRef d = b.dropout(x, 0.1, "drop");
    // (Of a sum of two dropouts, the first fuses and the second runs alone.)
    const TensorRef other = c == kTwoDropouts ? b.dropout(r, 0.1, "drop2") : r;
    const TensorRef s = c == kReadTwice ? b.binary("EwAdd", d, d, "sum") : b.binary(c == kAProduct ? "EwMul" : "EwAdd", other, d, "sum");
    b.graph().add_output(s);
    if (c == kTwoReaders) b.graph().add_output(b.unary("Relu", d, "relu"));
    if (c == kAnOutput) b.graph().add_output(d);
    const Graph g = b.finish();
    const DropoutAddKernels k = find_dropout_add_kernels(g, source_layouts(g));
    EXPECT_EQ(k.count(), c == kFused || c == kTwoDropouts ? 1u : 0u) << "case " << c;
    EXPECT_EQ(k.fused(id_of(g, "drop")), c == kFused || c == kTwoDropouts) << "case " << c;
    if (c == kTwoDropouts) {
      EXPECT_FALSE(k.fused(id_of(g, "drop2")));
      EXPECT_EQ(k.partner_of(id_of(g, "sum")), id_of(g, "drop"));
    }
  }
}

// The dropout's forward costs nothing and its backward its own; the sum
// keeps its own pass both ways (it moves the kernel's bytes: reads the
// dropout's input's size and the residual, writes the sum). The mapped
// step is eager's less the dropouts' forward passes (data parallelism:
// every device runs every layer), memory as eager's; the simulator prices
// it as the estimate does. Recomputation runs the kernel again where it
// re-runs both operators.
TEST(DropoutAdd, PricedInTheSumsPassAndTheSimulatorAgrees) {
  const Graph g = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 256}}), 8);
  const CostModel eager = model(DropoutAddKernel::kEager), fused = model(DropoutAddKernel::kFused);
  const FusedKernels k = fused.fused_kernels(g, source_layouts(g));
  ASSERT_EQ(k.dropout_add.count(), 4u);
  EXPECT_EQ(eager.fused_kernels(g, source_layouts(g)).dropout_add.count(), 0u);
  double passes = 0;
  for (const Node& n : g.nodes()) {
    if (!k.dropout_add.fused(n.id)) continue;
    const Seconds own = eager.task_time(g, n), priced = fused.operator_time(g, k, n.id);
    EXPECT_DOUBLE_EQ(priced.backward, own.backward) << n.name;
    if (n.op->dropout_add == DropoutAddPart::kDropout) {
      EXPECT_EQ(priced.forward, 0.0) << n.name;
      passes += own.forward;
    } else {
      EXPECT_DOUBLE_EQ(priced.forward, own.forward) << n.name;
    }
  }
  ASSERT_GT(passes, 0);
  const Strategy e = MachineMapper(eager).map(g), f = MachineMapper(fused).map(g);
  ASSERT_TRUE(f.estimate.feasible) << f.estimate.infeasible;
  ASSERT_EQ(e.views, f.views);
  EXPECT_NEAR(e.estimate.time - f.estimate.time, passes, 1e-9 * e.estimate.time);
  EXPECT_DOUBLE_EQ(f.estimate.max_memory(), e.estimate.max_memory());
  EXPECT_NEAR(Simulator(f.graph, f.views, fused).time(), f.estimate.time, 1e-9 * f.estimate.time);
  // Recomputed, each dropout whose sum re-runs too saves its pass again
  // (under full: attention's, whose sum the second norm reads; the MLP's
  // sum is the layer's output, kept, and neither it nor its dropout
  // re-runs); selective recomputes neither.
  for (const auto& [r, reruns] : {std::pair{Recompute::kFull, 2}, std::pair{Recompute::kSelective, 0}}) {
    const CostModel re = model(DropoutAddKernel::kEager, r), rf = model(DropoutAddKernel::kFused, r);
    const RecomputePlan plan = plan_recompute(g, source_layouts(g), rf.recipe());
    double saved = passes;
    int again = 0;
    for (const Node& n : g.nodes())
      if (k.dropout_add.fused(n.id) && n.op->dropout_add == DropoutAddPart::kDropout && plan.recomputed[static_cast<size_t>(n.id)] &&
          plan.recomputed[static_cast<size_t>(k.dropout_add.partner_of(n.id))])
        saved += eager.task_time(g, n).forward, ++again;
    EXPECT_EQ(again, reruns) << name(r);
    const Strategy se = MachineMapper(re).map(g), sf = MachineMapper(rf).map(g);
    ASSERT_TRUE(sf.estimate.feasible) << name(r) << ": " << sf.estimate.infeasible;
    ASSERT_EQ(se.views, sf.views) << name(r);
    EXPECT_NEAR(se.estimate.time - sf.estimate.time, saved, 1e-9 * se.estimate.time) << name(r);
    EXPECT_NEAR(Simulator(sf.graph, sf.views, rf).time(), sf.estimate.time, 1e-9 * sf.estimate.time) << name(r);
  }
}

// A dropout recomputed without its sum (recompute operators naming the
// dropouts) re-runs its own eager pass: the kernel is not run again.
TEST(DropoutAdd, ADropoutRecomputedAloneRerunsItsOwnPass) {
  const Graph g = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 256}}), 8);
  const CostModel eager = model(DropoutAddKernel::kEager), fused = model(DropoutAddKernel::kFused);
  const DropoutAddKernels k = find_dropout_add_kernels(g, source_layouts(g));
  TrainingRecipe r = fused.recipe();
  r.recompute = Recompute::kOperators;
  double own = 0;
  for (const Node& n : g.nodes())
    if (k.fused(n.id) && n.op->dropout_add == DropoutAddPart::kDropout) {
      r.recompute_operators.push_back(n.name);
      own += eager.task_time(g, n).forward;
    }
  std::sort(r.recompute_operators.begin(), r.recompute_operators.end());
  ASSERT_EQ(r.recompute_operators.size(), 4u);
  const CostModel alone = fused.with_recipe(r);
  const RecomputePlan plan = plan_recompute(g, source_layouts(g), r);
  for (const Node& n : g.nodes()) {
    if (!k.fused(n.id)) continue;
    EXPECT_EQ(plan.recomputed[static_cast<size_t>(n.id)] != 0, n.op->dropout_add == DropoutAddPart::kDropout) << n.name;
  }
  const Strategy base = MachineMapper(fused).map(g), s = MachineMapper(alone).map(g);
  ASSERT_EQ(s.views, base.views);
  ASSERT_GT(own, 0);
  EXPECT_NEAR(s.estimate.time - base.estimate.time, own, 1e-9 * base.estimate.time);
  EXPECT_NEAR(Simulator(s.graph, s.views, alone).time(), s.estimate.time, 1e-9 * s.estimate.time);
}

// Two dropouts alike in every attribute (the same seed) and in their
// shapes and placement, one re-run with its sum (the kernel again, priced
// at the sum) and one alone (its own pass again): the mapping prices each
// as its own, not one as the other (its cache of leaves tells them apart).
TEST(DropoutAdd, DropoutsRerunWithAndWithoutTheirSumsArePricedApart) {
  GraphBuilder b("residuals");
  TensorRef x = b.input("x", {8, 256});
  for (const std::string l : {"1", "2"}) {
    const TensorRef a = b.linear(x, 256, "none", false, "linear" + l);
    const TensorRef d = b.op("Dropout", {{"rate", 0.1}, {"seed", int64_t{7}}}, {a}, "drop" + l);
    x = b.binary("EwAdd", x, d, "sum" + l);
  }
  b.graph().add_output(x);
  const Graph g = data_parallel(b.finish(), 8);
  const CostModel eager = model(DropoutAddKernel::kEager), fused = model(DropoutAddKernel::kFused);
  ASSERT_EQ(fused.fused_kernels(g, source_layouts(g)).dropout_add.count(), 2u);
  TrainingRecipe r = fused.recipe();
  r.recompute = Recompute::kOperators;
  r.recompute_operators = {"drop1", "drop2", "sum1"};
  const CostModel some = fused.with_recipe(r);
  const RecomputePlan plan = plan_recompute(g, source_layouts(g), r);
  for (const std::string& n : r.recompute_operators) ASSERT_TRUE(plan.recomputed[static_cast<size_t>(id_of(g, n))]) << n;
  ASSERT_FALSE(plan.recomputed[static_cast<size_t>(id_of(g, "sum2"))]);
  const double again = eager.task_time(g, g.node(id_of(g, "sum1"))).forward + eager.task_time(g, g.node(id_of(g, "drop2"))).forward;
  ASSERT_GT(again, 0);
  const Strategy base = MachineMapper(fused).map(g), s = MachineMapper(some).map(g);
  ASSERT_EQ(s.views, base.views);
  EXPECT_NEAR(s.estimate.time - base.estimate.time, again, 1e-9 * base.estimate.time);
  EXPECT_NEAR(Simulator(s.graph, s.views, some).time(), s.estimate.time, 1e-9 * s.estimate.time);
}

// The strategy file records it; read back, the same recipe; absent, eager;
// an unknown kernel names the field.
TEST(DropoutAdd, TheStrategyFileRecordsIt) {
  EXPECT_EQ(dropout_add_named("fused"), DropoutAddKernel::kFused);
  EXPECT_EQ(dropout_add_named("eager"), DropoutAddKernel::kEager);
  EXPECT_FALSE(dropout_add_named("apex").has_value());
  EXPECT_EQ(TrainingRecipe{}.dropout_add, DropoutAddKernel::kEager);
  const CostModel cm = model(DropoutAddKernel::kFused);
  const Graph g = build_model("gpt-tiny", {});
  StrategyFile f{g.name(), cm.machine(), 8, "data-parallel", {}, MachineMapper(cm).map(data_parallel(g, 8))};
  f.recipe = cm.recipe();
  const std::string text = strategy_to_json(f);
  EXPECT_NE(text.find("\"dropout_add\": \"fused\""), std::string::npos);
  EXPECT_EQ(strategy_from_json(text, "s.json").recipe.dropout_add, DropoutAddKernel::kFused);
  f.recipe.dropout_add = DropoutAddKernel::kEager;
  const std::string eager = strategy_to_json(f);
  EXPECT_EQ(eager.find("dropout_add"), std::string::npos);
  EXPECT_EQ(strategy_from_json(eager, "s.json").recipe.dropout_add, DropoutAddKernel::kEager);
  std::string bad = text;
  bad.replace(bad.find("\"dropout_add\": \"fused\""), 22, "\"dropout_add\": \"apex\"");
  try {
    (void)strategy_from_json(bad, "s.json");
    ADD_FAILURE() << "an unknown dropout-add kernel was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dropout_add"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pcgx::search
