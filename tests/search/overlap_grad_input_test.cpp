// A product's input gradient sent while its weight's gradient is computed
// (TrainingRecipe::overlap_grad_input, Megatron-LM's asynchronous
// tensor-parallel all-reduce): the estimate hides the collective that
// carries a Linear's input gradient back behind that Linear's weight
// product, the simulator runs the two side by side, and the two save the
// same time. Nothing moves where no collective follows a product's input
// gradient (data parallelism) or where the devices do their own
// communication. A strategy file records it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/priced_both_ways.h"
#include "search/recipe_flag_checks.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

CostModel model(bool overlap, Machine m = toy_machine(), Recompute r = Recompute::kNone, double bucket_bytes = 25 << 20) {
  TrainingRecipe recipe{Precision::kFp32, r, ZeroStage::k0};
  recipe.overlap_grad_input = overlap;
  CommOptions comm;
  comm.bucket_bytes = bucket_bytes;
  return CostModel(std::move(m), toy_efficiency(), {}, comm, recipe);
}

// Megatron-LM's tensor parallelism over the 4 devices of a node (times
// data parallelism over `devices` / 4).
Graph megatron(bool sequence_parallel, int64_t devices = 4) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}, {"seq", 128}});
  const std::optional<Graph> t = expert(g, toy_machine(), devices, 4, sequence_parallel);
  if (!t) throw Error("no tensor-parallel plan");
  return *t;
}

// The weight products' share of the backward pass: half of each product
// of an activation and a weight (the bound on what can hide).
double weight_products(const Graph& g, const CostModel& c) {
  const SourceLayouts layouts = source_layouts(g);
  double sum = 0;
  for (const Node& n : g.nodes())
    if (n.op->operand_products && n.inputs.size() >= 2 && layouts.weight(n.inputs[0]) != layouts.weight(n.inputs[1]) &&
        !layouts.is_layout(g, n.id))
      sum += c.task_time(g, n).backward / 2;
  return sum;
}

// The estimate saves what the simulator does (each within what it is
// without the overlap of the other).
void expect_same_saving(const BothWays& b) {
  ASSERT_TRUE(b.off.estimate.feasible && b.on.estimate.feasible);
  const double apart = std::abs(b.simulated_off - b.off.estimate.time);
  EXPECT_NEAR(b.simulated_on, b.on.estimate.time, apart + 1e-6 * b.off.estimate.time)
      << "the estimate saves " << b.off.estimate.time - b.on.estimate.time << " s, the simulator " << b.simulated_off - b.simulated_on;
}

TEST(OverlapGradInput, TensorParallelCollectivesHideBehindWeightProductsAlikeInEstimateAndSimulation) {
  for (const bool sp : {false, true}) {
    SCOPED_TRACE(sp ? "sequence parallel" : "tensor parallel");
    const Graph g = megatron(sp);
    const CostModel off = model(false), on = model(true);
    const BothWays b = both_ways(g, off, on);
    expect_same_saving(b);
    const double saved = b.off.estimate.time - b.on.estimate.time;
    EXPECT_GT(saved, 0.01 * b.off.estimate.time) << "the collectives carrying the column-parallel inputs' gradients hide";
    EXPECT_LE(saved, weight_products(b.off.graph, off) * (1 + 1e-9)) << "no more than the weight products hide";
    // Beside one another: a weight product runs while a collective of the
    // backward pass does.
    const Simulator sim(b.on.graph, b.on.views, on);
    bool beside = false;
    for (TaskId w = 0; w < static_cast<TaskId>(sim.timeline().size()) && !beside; ++w) {
      if (sim.info(w).kind != SimKind::kWeightGradient) continue;
      const TimedTask& x = sim.timeline().task(w);
      for (TaskId c = 0; c < static_cast<TaskId>(sim.timeline().size()) && !beside; ++c) {
        const TimedTask& y = sim.timeline().task(c);
        beside = sim.info(c).kind == SimKind::kCollective && sim.info(c).index == 1 && y.duration > 0 && y.start < x.end && x.start < y.end;
      }
    }
    EXPECT_TRUE(beside);
  }
}

// With data parallelism too, the weight gradients go into buckets as their
// products finish: the products beside a collective run at its backward,
// after later operators' input gradients, and the buckets holding their
// gradients wait for them (buckets of 2 and 8 KiB: several close at such
// a product). Where the two part without the overlap (sync buckets
// crossing nodes, 4% here), the savings agree within 0.5% of the step.
// Without sequence parallelism the collective after the embedding comes
// last in the backward pass (the dropout, sum and norm on its copies
// first), so the first layer's weight products, and the bucket holding
// them, wait for it; with 8 KiB buckets that bucket is on the step's
// critical path across nodes, and the overlap costs the step what it
// waits (2.8 us of 551 here), in both: it changes the step, either way.
TEST(OverlapGradInput, BucketsWaitForTheWeightProducts) {
  for (const bool sp : {false, true})
    for (const double bucket : {2048.0, 8192.0}) {
      SCOPED_TRACE(std::string(sp ? "sequence parallel" : "tensor parallel") + ", buckets of " + std::to_string(bucket) + " B");
      BothWays b;
      ASSERT_NO_THROW(b = both_ways(megatron(sp, 8), model(false, toy_machine(), Recompute::kNone, bucket),
                                    model(true, toy_machine(), Recompute::kNone, bucket)));
      if (bucket < 8192) continue;
      const double estimated = b.off.estimate.time - b.on.estimate.time, simulated = b.simulated_off - b.simulated_on;
      if (sp) {
        EXPECT_GT(estimated, 0);
      } else {
        EXPECT_GT(std::abs(estimated), 1e-3 * b.off.estimate.time);
      }
      EXPECT_NEAR(simulated, estimated, 0.005 * b.off.estimate.time);
    }
}

// Full recomputation re-runs each layer's forward, its collectives
// included, before its backward: a collective's re-run comes first (the
// weight products read what it re-creates), and only its backward runs
// beside them, in both. On links 20 times faster the weight products
// outlast the backward collectives, so hiding the re-run too would show.
TEST(OverlapGradInput, UnderFullRecomputationTheReRunIsNotHidden) {
  Machine fast = toy_machine();
  fast.links[0].bandwidth *= 20;
  for (const bool on_fast : {false, true})
    for (const bool sp : {false, true}) {
      const Machine& m = on_fast ? fast : toy_machine();
      SCOPED_TRACE(std::string(sp ? "sequence parallel" : "tensor parallel") + " on " + (on_fast ? "fast" : "toy") + " links");
      const BothWays b = both_ways(megatron(sp), model(false, m, Recompute::kFull), model(true, m, Recompute::kFull));
      expect_same_saving(b);
      EXPECT_GT(b.off.estimate.time - b.on.estimate.time, 0);
    }
}

// Selective recomputation under sequence parallelism gathers each
// all-gathered input again in backward (Korthikanti et al.): Megatron-LM
// launches that all-gather as the Linear's backward begins, computes the
// input gradient meanwhile and waits for it before the weight gradient.
// In both, the re-run runs beside the input-gradient products that follow
// every reader's output gradient (here the query's: the key's and value's
// come before the query's gradient is in) and before the weight products,
// and the reduce-scatter beside those. On links 20 times faster the re-run
// is shorter than the query's product, so all of it hides.
TEST(OverlapGradInput, ASequenceParallelReGatherRunsBesideTheInputGradientProducts) {
  Machine fast = toy_machine();
  fast.links[0].bandwidth *= 20;
  for (const Machine& m : {toy_machine(), fast}) {
    SCOPED_TRACE(&m == &fast ? "fast links" : "toy links");
    const CostModel off = model(false, m, Recompute::kSelective), on = model(true, m, Recompute::kSelective);
    const BothWays b = both_ways(megatron(true), off, on);
    expect_same_saving(b);
    EXPECT_GT(b.off.estimate.time - b.on.estimate.time, 0);
    const Simulator sim(b.on.graph, b.on.views, on);
    const Timeline& tl = sim.timeline();
    int reruns = 0;
    for (TaskId r = 0; r < static_cast<TaskId>(tl.size()); ++r) {
      const SimTaskInfo& k = sim.info(r);
      if (k.kind != SimKind::kCollective || k.index != 2 || tl.task(r).duration <= 0) continue;
      ++reruns;
      const TimedTask& rerun = tl.task(r);
      bool beside_input = false, weight_after = true;
      for (TaskId t = 0; t < static_cast<TaskId>(tl.size()); ++t) {
        const TimedTask& x = tl.task(t);
        if (sim.info(t).node < 0 || !b.on.graph.node(sim.info(t).node).op->operand_products || x.duration <= 0) continue;
        if (sim.info(t).kind == SimKind::kBackward && x.start < rerun.end && rerun.start < x.end) beside_input = true;
        if (sim.info(t).kind == SimKind::kWeightGradient && x.start < rerun.end && rerun.start < x.end) weight_after = false;
      }
      EXPECT_TRUE(beside_input) << sim.label(r) << " runs beside no input-gradient product";
      EXPECT_TRUE(weight_after) << sim.label(r) << " runs beside a weight product, which reads what it gathers";
      if (&m == &fast) {  // all of it hidden: the reduce-scatter right after it, as the query's input product ends
        const TimedTask& next = tl.task(r + 1);
        EXPECT_EQ(sim.info(r + 1).index, 1);
        EXPECT_GT(next.start, rerun.end) << "the re-run outlasts the input-gradient products it runs beside";
      }
    }
    EXPECT_EQ(reruns, 5) << "two gathers a layer, two layers, and the output head's";
  }
}

// Data parallelism sends no product's input gradient anywhere, and a
// device doing its own communication cannot run a collective beside its
// product: the same step, to the bit, in the estimate and the simulator.
TEST(OverlapGradInput, NothingChangesWithoutACollectiveToHideOrALinkOfItsOwn) {
  const Graph dp = data_parallel(build_model("gpt-tiny", {{"batch", 8}, {"seq", 128}}), 4);
  const BothWays d = both_ways(dp, model(false), model(true));
  EXPECT_DOUBLE_EQ(d.on.estimate.time, d.off.estimate.time);
  EXPECT_DOUBLE_EQ(d.simulated_on, d.simulated_off);
  Machine cpu = toy_machine();
  cpu.device.overlaps_communication = false;
  const BothWays t = both_ways(megatron(false), model(false, cpu), model(true, cpu));
  EXPECT_DOUBLE_EQ(t.on.estimate.time, t.off.estimate.time);
  EXPECT_DOUBLE_EQ(t.simulated_on, t.simulated_off);
}

TEST(OverlapGradInput, AStrategyFileRecordsIt) {
  const CostModel on = model(true);
  const StrategyFile f = mapped_file(on, megatron(false), "gpt-tiny", 4, "megatron");
  expect_recipe_flag_round_trip(f, "overlap_grad_input", &TrainingRecipe::overlap_grad_input);
}

}  // namespace
}  // namespace pcgx::search
