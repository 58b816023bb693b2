// The simulator on pipelined plans (simulator.h): the schedule's steps run
// micro-batch by micro-batch, and the cost model's closed forms
// (pipeline.h) agree with it where their assumptions hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/training_recipe.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/search.h"
#include "pcgx/search/simulator.h"
#include "search/chain_model.h"

namespace pcgx::search {
namespace {

PipelineResult plan(const Graph& g, const CostModel& cm, PipelineOptions po) {
  static const Ruleset empty;
  static const RuleLibrary rules(empty);
  SearchOptions o;
  o.algorithm = Algorithm::kDataParallel;
  return optimize_pipeline(g, rules, cm, o, po);
}

PipelineShape shape_of(const PipelineResult& r, PipelineSchedule k) { return {r.stages, r.micro_batches, r.virtual_stages, k}; }

// Balanced stages, each on one device (no gradient synchronization, the
// boundary messages small beside the layers): the closed forms
// (M + S - 1) t + u and (M + (S - 1) / v) t + u are the schedule's time.
TEST(SimulatedPipeline, ClosedFormsAgreeWhereTheirAssumptionsHold) {
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const Graph g = chain(8, 8192, 4096);
  for (int64_t v : {1, 2})
    for (int64_t m : {4, 8, 16}) {
      SCOPED_TRACE("v = " + std::to_string(v) + ", M = " + std::to_string(m));
      const PipelineResult r = plan(g, cm, {4, m, v});
      const Strategy& s = r.search.strategy;
      ASSERT_TRUE(s.estimate.feasible);
      const Simulator sim(s.graph, s.views, cm, shape_of(r, PipelineShape::default_for(v)));
      ASSERT_TRUE(sim.pipeline());
      EXPECT_EQ(sim.pipeline()->micro_batches, m);
      // The closed form prices every stage at the slowest's time; the first
      // stage receives no boundary message and is a little faster, so the
      // schedule ends a little sooner, never later.
      EXPECT_LE(sim.time(), s.estimate.time * (1 + 1e-9));
      EXPECT_GE(sim.time(), 0.97 * s.estimate.time) << "simulated " << sim.time() << " s, closed form " << s.estimate.time << " s";
      // The critical path's parts add up to the iteration.
      const SimulationSummary sum = sim.summary();
      EXPECT_NEAR(sum.compute + sum.communication + sum.sync, sum.time, 1e-9 * sum.time);
      EXPECT_GT(sum.communication, 0);  // the boundary messages
      EXPECT_EQ(sum.devices_used, 4);
    }
}

// Stages split unevenly as Megatron-LM's options state it (the first or
// last stage's layers, the ends counted as layers, a layout): the cuts
// where they say, the stages' times apart, and the cost model's step
// (each step at its own stage's time) what the simulator runs.
TEST(SimulatedPipeline, UnevenStagesAgreeWithTheirEstimate) {
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const Graph g = build_model("gpt", {{"layers", 6}, {"hidden", 1024}, {"heads", 16}, {"ffn", 4096}, {"seq", 1024}, {"vocab", 8192}, {"batch", 32}});
  static const Ruleset empty;
  static const RuleLibrary rules(empty);
  SearchOptions o;
  o.algorithm = Algorithm::kMegatron, o.tensor_degree = 1;
  PipelineOptions first{2, 8, 1};
  first.first_stage_layers = 1;  // 1 and 5 layers
  PipelineOptions counted{2, 8, 2};
  counted.embedding_as_layer = counted.loss_as_layer = true;  // 8 over 4 chunks: 1, 2, 2, 1
  PipelineOptions layout{2, 8, 2};
  layout.layout = {1, 2, 2, 1};  // the same cuts, stated
  double counted_time = 0;
  for (const auto& [name, po, last_of_first] : std::vector<std::tuple<std::string, PipelineOptions, std::string>>{
           {"first", first, "block0.mlp_residual"}, {"counted", counted, "block0.mlp_residual"}, {"layout", layout, "block0.mlp_residual"}}) {
    SCOPED_TRACE(name);
    const PipelineResult r = optimize_pipeline(g, rules, cm, o, po);
    ASSERT_EQ(r.stage.size(), static_cast<size_t>(po.stages * po.virtual_stages));
    EXPECT_EQ(r.stage[0].last, last_of_first);
    if (name == "first") {
      EXPECT_GT(r.stage[1].forward, 3 * r.stage[0].forward);  // 5 layers and the head against 1
    }
    if (name == "counted") counted_time = r.search.strategy.estimate.time;
    if (name == "layout") {
      EXPECT_DOUBLE_EQ(r.search.strategy.estimate.time, counted_time);
    }
    const Strategy& s = r.search.strategy;
    const Simulator sim(s.graph, s.views, cm, shape_of(r, PipelineShape::default_for(r.virtual_stages)));
    EXPECT_NEAR(sim.time(), s.estimate.time, 0.03 * s.estimate.time) << "simulated " << sim.time() << " s, estimated " << s.estimate.time << " s";
    std::printf("%s: estimated %.6f s, simulated %.6f s\n", name.c_str(), s.estimate.time, sim.time());
  }
}

// GPipe and 1F1B have the same bubble over balanced stages (they differ in
// memory); interleaving shrinks it; one stage runs the micro-batches back
// to back.
TEST(SimulatedPipeline, SchedulesDifferByTheirBubbles) {
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const Graph g = chain(8, 8192, 4096);
  const PipelineResult r = plan(g, cm, {4, 8, 1}), r2 = plan(g, cm, {4, 8, 2});
  const Strategy& s = r.search.strategy;
  const double one_f_one_b = Simulator(s.graph, s.views, cm, shape_of(r, PipelineSchedule::k1F1B)).time();
  const double gpipe = Simulator(s.graph, s.views, cm, shape_of(r, PipelineSchedule::kGPipe)).time();
  EXPECT_NEAR(gpipe / one_f_one_b, 1.0, 1e-9);
  const Strategy& s2 = r2.search.strategy;
  const double interleaved = Simulator(s2.graph, s2.views, cm, shape_of(r2, PipelineSchedule::kInterleaved)).time();
  EXPECT_LT(interleaved, one_f_one_b);
  // Beyond the ideal time M t and the update u, the bubble: (S - 1) t for
  // 1F1B, (S - 1) t / v interleaved (t: a micro-batch through all of a
  // stage's chunks, the slowest stage's).
  auto bubble = [](const PipelineResult& p, double time) {
    std::vector<double> t(static_cast<size_t>(p.stages), 0.0), u(static_cast<size_t>(p.stages), 0.0);
    for (const PipelineStage& c : p.stage) t[static_cast<size_t>(c.stage)] += c.micro_batch, u[static_cast<size_t>(c.stage)] += c.update;
    const double slowest = *std::max_element(t.begin(), t.end()), update = *std::max_element(u.begin(), u.end());
    return (time - update - static_cast<double>(p.micro_batches) * slowest) /
           (static_cast<double>(p.stages - 1) * slowest / static_cast<double>(p.virtual_stages));
  };
  EXPECT_NEAR(bubble(r, one_f_one_b), 1.0, 0.1);
  EXPECT_NEAR(bubble(r2, interleaved), 1.0, 0.1);
}

// Memory follows the schedule: GPipe keeps all M micro-batches on every
// stage, 1F1B S - s on stage s (stage 0 the most).
TEST(SimulatedPipeline, MemoryCountsTheScheduleMicroBatchesInFlight) {
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const Graph g = chain(8, 8192, 4096);
  const PipelineResult r = plan(g, cm, {4, 8, 1});
  const Strategy& s = r.search.strategy;
  const std::vector<double> one_f_one_b = Simulator(s.graph, s.views, cm, shape_of(r, PipelineSchedule::k1F1B)).memory();
  const std::vector<double> gpipe = Simulator(s.graph, s.views, cm, shape_of(r, PipelineSchedule::kGPipe)).memory();
  const std::vector<double> one = memory_per_device(Placement(s.graph, s.views, 4), cm.recipe(), 1);
  ASSERT_EQ(one_f_one_b.size(), 4u);
  for (size_t d = 0; d < 4; ++d) {
    EXPECT_EQ(one_f_one_b[d], memory_per_device(Placement(s.graph, s.views, 4), cm.recipe(), 4 - static_cast<int64_t>(d))[d]) << d;
    EXPECT_EQ(gpipe[d], memory_per_device(Placement(s.graph, s.views, 4), cm.recipe(), 8)[d]) << d;
    EXPECT_GT(gpipe[d], one[d]);
  }
  EXPECT_GT(one_f_one_b[0], one_f_one_b[3]);
  // By kind, as optimize and simulate print it: stage d's devices keep
  // what the memory model counts with its 4 - d micro-batches in flight,
  // kind by kind (one pass, each device with its stage's count).
  const Simulator sim(s.graph, s.views, cm, shape_of(r, PipelineSchedule::k1F1B));
  const std::vector<DeviceMemory> kinds = sim.memory_breakdown();
  ASSERT_EQ(kinds.size(), 4u);
  for (size_t d = 0; d < 4; ++d) {
    const DeviceMemory alone = memory_breakdown(Placement(s.graph, s.views, 4), cm.recipe(), 4 - static_cast<int64_t>(d))[d];
    EXPECT_EQ(kinds[d].weights, alone.weights) << d;
    EXPECT_EQ(kinds[d].master, alone.master) << d;
    EXPECT_EQ(kinds[d].gradients, alone.gradients) << d;
    EXPECT_EQ(kinds[d].optimizer, alone.optimizer) << d;
    EXPECT_EQ(kinds[d].activations, alone.activations) << d;
    EXPECT_EQ(kinds[d].transient, alone.transient) << d;
  }
  EXPECT_GT(kinds[0].activations, kinds[3].activations);
}

// Gradient accumulation is one chunk: its breakdown, given no chunks, is
// the memory model's with one micro-batch in flight (the plan finishes
// one micro-batch before the next).
TEST(SimulatedPipeline, AccumulationKeepsOneMicroBatchByKind) {
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency(), {}, {}, {Precision::kBf16});
  const Graph g = build_model("gpt-tiny", {{"batch", 32}});
  const PipelineResult r = plan(g, cm, {1, 4});
  const Strategy& s = r.search.strategy;
  ASSERT_TRUE(s.estimate.feasible);
  const Placement place(s.graph, s.views, 4);
  const std::vector<DeviceMemory> kinds = memory_breakdown(place, cm.recipe(), shape_of(r, PipelineSchedule::k1F1B), {});
  const std::vector<DeviceMemory> one = memory_breakdown(place, cm.recipe(), 1);
  const std::vector<DeviceMemory> all = memory_breakdown(place, cm.recipe(), 4);
  ASSERT_EQ(kinds.size(), 4u);
  for (size_t d = 0; d < 4; ++d) {
    EXPECT_EQ(kinds[d].activations, one[d].activations) << d;
    EXPECT_EQ(kinds[d].total(), one[d].total()) << d;
    EXPECT_LT(kinds[d].activations, all[d].activations) << d;
    EXPECT_DOUBLE_EQ(kinds[d].total(), s.estimate.memory[d]) << d;
  }
}

// The search counts each stage alone; the plan joined can keep more where
// a boundary is read directly by several operators (each receives its
// copy: docs/training.md "What each device keeps"). Data parallelism in
// 8 stages of gpt-tiny crosses so. A capacity between the two counts
// refuses the plan, naming the joined need; one above both returns it.
TEST(SimulatedPipeline, APlanWhoseJoinedCountIsOverCapacityIsNotReturned) {
  const Graph g = build_model("gpt-tiny", {{"batch", 32}});
  const Machine m = find_machine("dgx-a100").with_devices(16);
  const CostModel roomy(m, default_efficiency());
  const PipelineResult r = plan(g, roomy, {8, 8});
  const Strategy& s = r.search.strategy;
  ASSERT_TRUE(s.estimate.feasible);
  const std::vector<double> joined = Simulator(s.graph, s.views, roomy, shape_of(r, PipelineSchedule::k1F1B)).memory();
  const double search = s.estimate.max_memory(), most = *std::max_element(joined.begin(), joined.end());
  ASSERT_GT(most, search);  // the premise: the joined plan keeps more
  Machine tight = m;
  tight.device.memory_capacity = (search + most) / 2;
  try {
    plan(g, CostModel(tight, default_efficiency()), {8, 8});
    ADD_FAILURE() << "a plan was returned whose joined count is over the capacity of " << tight.device.memory_capacity << " B";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GiB with the stages joined"), std::string::npos) << e.what();
  }
  tight.device.memory_capacity = most;
  const CostModel enough(tight, default_efficiency());
  const PipelineResult fits = plan(g, enough, {8, 8});
  const Strategy& f = fits.search.strategy;
  ASSERT_TRUE(f.estimate.feasible);
  const std::vector<double> held = Simulator(f.graph, f.views, enough, shape_of(fits, PipelineSchedule::k1F1B)).memory();
  EXPECT_LE(*std::max_element(held.begin(), held.end()), tight.device.memory_capacity);
}

TEST(SimulatedPipeline, GradientAccumulationRunsMicroBatchesBackToBack) {
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency(), {}, {}, {Precision::kBf16});
  const Graph g = build_model("gpt-tiny", {{"batch", 64}});
  const PipelineResult r = plan(g, cm, {1, 4});
  const Strategy& s = r.search.strategy;
  ASSERT_TRUE(s.estimate.feasible);
  const Simulator without(s.graph, s.views, cm), with(s.graph, s.views, cm, shape_of(r, PipelineSchedule::k1F1B));
  EXPECT_DOUBLE_EQ(without.time(), with.time());  // one stage unless told
  EXPECT_EQ(with.pipeline()->stages, 1);
  // 8 steps (F, B per micro-batch) plus once-per-step work around them;
  // the last backward task by task (its operators' tasks in the timeline).
  int64_t steps = 0, last = 0;
  for (size_t i = 0; i < with.timeline().size(); ++i) {
    const SimTaskInfo& k = with.info(static_cast<TaskId>(i));
    steps += k.node < 0 && k.micro_batch >= 0;
    last += k.node >= 0 && k.micro_batch == 3 && k.kind == SimKind::kBackward;
  }
  EXPECT_EQ(steps, 8);
  EXPECT_GT(last, 0);
  EXPECT_NEAR(with.time() / s.estimate.time, 1.0, 0.1) << "simulated " << with.time() << ", predicted " << s.estimate.time;
}

// As the DP prices them (pipeline.h), the gradient buckets start inside
// the last micro-batch's backward, which the simulator runs task by task:
// they hide behind it, and only behind it.
TEST(SimulatedPipeline, BucketsHideInTheLastMicroBatchsBackward) {
  CommOptions each;  // a bucket per weight, ready one after another through the backward
  each.bucket_bytes = 16.0 * 1024 * 1024;
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency(), {}, each);
  const MachineMapper mapper(cm);
  const Graph g = data_parallel(chain(6, 32768, 2048), 8);
  const Strategy whole = mapper.map(g), micro = mapper.map(pipelined(g, 4, true));
  const Simulator ws(whole.graph, whole.views, cm), ms(micro.graph, micro.views, cm);
  const SimulationSummary w = ws.summary(), m = ms.summary();
  ASSERT_GT(w.sync_hidden(), 0);
  EXPECT_NEAR(m.sync_total, w.sync_total, 1e-12);  // the same buckets
  EXPECT_LT(m.sync_hidden(), w.sync_hidden());
  // The first bucket starts before the last backward task ends, and after
  // the last micro-batch's backward has started.
  double first_bucket = 1e30, backward_end = 0, last_start = 1e30;
  for (size_t i = 0; i < ms.timeline().size(); ++i) {
    const SimTaskInfo& k = ms.info(static_cast<TaskId>(i));
    const TimedTask& t = ms.timeline().task(static_cast<TaskId>(i));
    if (k.kind == SimKind::kSync) first_bucket = std::min(first_bucket, t.start);
    if (k.kind == SimKind::kBackward && t.duration > 0) backward_end = std::max(backward_end, t.end);
    if (k.kind == SimKind::kBackward && k.micro_batch == 3 && t.duration > 0) last_start = std::min(last_start, t.start);
  }
  EXPECT_LT(first_bucket, backward_end);
  EXPECT_GE(first_bucket, last_start);
  EXPECT_NEAR(m.time / micro.estimate.time, 1.0, 0.05) << "simulated " << m.time << ", predicted " << micro.estimate.time;
}

// Tensor parallel inside data parallel, accumulated over micro-batches:
// the buckets of the last micro-batch's backward share the NVSwitch ports
// with its tensor-parallel collectives, which go first (gradient_sync.h,
// timeline.h). The DP's replay and the simulator model that alike.
TEST(SimulatedPipeline, BucketsTakeTheLinkTimeTheBackwardsCollectivesLeave) {
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency(), {}, {}, {Precision::kBf16});
  const Graph g = build_model("gpt-tiny", {{"batch", 64}, {"hidden", 1024}, {"ffn", 4096}, {"seq", 256}});
  static const Ruleset empty;
  static const RuleLibrary rules(empty);
  SearchOptions o;
  o.algorithm = Algorithm::kExpert;
  o.tensor_degree = 2;
  const PipelineResult r = optimize_pipeline(g, rules, cm, o, {1, 2});
  const Strategy& s = r.search.strategy;
  ASSERT_TRUE(s.estimate.feasible);
  const Simulator sim(s.graph, s.views, cm, shape_of(r, PipelineSchedule::k1F1B));
  const SimulationSummary sum = sim.summary();
  // Some bucket waited on its links for the backward's own collectives.
  double held = 0;
  int64_t buckets = 0;
  for (size_t i = 0; i < sim.timeline().size(); ++i) {
    const TimedTask& t = sim.timeline().task(static_cast<TaskId>(i));
    if (sim.info(static_cast<TaskId>(i)).kind != SimKind::kSync) continue;
    ++buckets;
    held += t.end - t.start - t.duration;
  }
  ASSERT_GT(buckets, 0);
  EXPECT_GT(held, 1e-3 * sum.sync_total);
  EXPECT_NEAR(sum.time / s.estimate.time, 1.0, 0.02) << "simulated " << sum.time << ", predicted " << s.estimate.time;
  EXPECT_NEAR(sum.sync_past, s.estimate.sync - s.estimate.sync_hidden, 0.05 * s.estimate.sync) << "past the backward pass";
}

TEST(SimulatedPipeline, AViewChangeBuildsAgain) {
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const Graph g = chain(4, 8192, 1024);
  const PipelineResult r = plan(g, cm, {2, 4});
  const Strategy& s = r.search.strategy;
  Simulator sim(s.graph, s.views, cm, shape_of(r, PipelineSchedule::k1F1B));
  const double before = sim.time();
  NodeId last = -1;
  for (const Node& n : s.graph.nodes())
    if (n.op->name == "Linear") last = n.id;
  const MachineView kept = s.views[static_cast<size_t>(last)];
  MachineView moved = kept;
  moved.start -= 2;  // onto the first stage's devices: a third chunk where 2 stages have 2
  EXPECT_THROW(sim.set_view(last, moved), Error);
  sim.set_view(last, kept);
  EXPECT_DOUBLE_EQ(sim.time(), before);
}

// Megatron-LM's plan with sequence parallelism, interleaved (t = 8, 2
// stages x 2 chunks on DGX A100 nodes): each stage's last operators hold
// the residual stream split by samples over the data-parallel groups and
// by sequence inside each, and the boundary is split the same way, so it
// crosses as each device's own shard over its own adapter, as the
// estimate's crossing prices it, and nothing is gathered at the join.
// Micro-batches of one sequence on one group per stage, and of 4 on each
// of 2 groups. (Split by hidden, the first was gathered onto one device
// and sent whole through one adapter: simulated 27% above the estimate;
// split by samples over all 16 devices of a stage, the second needed an
// all-to-all at both ends.)
TEST(SimulatedPipeline, SequenceParallelBoundariesCrossAsEachDevicesShard) {
  static const Ruleset empty;
  static const RuleLibrary rules(empty);
  struct Case {
    int64_t devices, batch, micro_batches;
  };
  for (const Case c : {Case{16, 8, 8}, Case{32, 32, 4}}) {
    SCOPED_TRACE(std::to_string(c.devices) + " devices, " + std::to_string(c.micro_batches) + " micro-batches");
    const Graph g = build_model("gpt", {{"layers", 4}, {"hidden", 1024}, {"heads", 16}, {"ffn", 4096}, {"seq", 2048}, {"vocab", 1024},
                                        {"batch", c.batch}});
    const CostModel cm(find_machine("dgx-a100").with_devices(c.devices), default_efficiency(), {}, {},
                       TrainingRecipe{Precision::kFp16, Recompute::kNone, ZeroStage::k0});
    SearchOptions o;
    o.algorithm = Algorithm::kMegatron, o.tensor_degree = 8, o.sequence_parallel = true;
    PipelineOptions po{2, c.micro_batches};
    po.virtual_stages = 2;
    const PipelineResult r = optimize_pipeline(g, rules, cm, o, po);
    const Strategy& s = r.search.strategy;
    ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
    // (A boundary gathered and cut again another way: the join's.)
    const auto consumers = s.graph.consumers();
    for (const Node& n : s.graph.nodes())
      if (n.op->name == "Combine")
        for (const auto& [reader, input] : consumers[static_cast<size_t>(n.id)]) {
          const Node& cut = s.graph.node(reader);
          EXPECT_FALSE(cut.op->name == "Repartition" && cut.attrs.get_int("dim") != n.attrs.get_int("dim"))
              << "a boundary gathered and cut again at node " << n.id;
        }
    const double simulated = Simulator(s.graph, s.views, cm, shape_of(r, PipelineSchedule::kInterleaved)).time();
    EXPECT_NEAR(simulated / s.estimate.time, 1.0, 0.03) << "simulated " << simulated << ", predicted " << s.estimate.time;
  }
}

TEST(SimulatedPipeline, APipelineThePlanDoesNotHaveIsRefused) {
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const Graph g = chain(4, 8192, 1024);
  const PipelineResult r = plan(g, cm, {2, 4});
  const Strategy& s = r.search.strategy;
  // Other micro-batches than the graph's.
  EXPECT_THROW(Simulator(s.graph, s.views, cm, PipelineShape{2, 8, 1, PipelineSchedule::k1F1B}), Error);
  // Four stages where the operators sit on two.
  EXPECT_THROW(Simulator(s.graph, s.views, cm, PipelineShape{4, 4, 1, PipelineSchedule::k1F1B}), Error);
  // One stage over both: legal, each micro-batch through both stages
  // before the next starts (no two stages busy at once), so slower.
  EXPECT_GT(Simulator(s.graph, s.views, cm, PipelineShape{1, 4, 1, PipelineSchedule::k1F1B}).time(),
            Simulator(s.graph, s.views, cm, PipelineShape{2, 4, 1, PipelineSchedule::k1F1B}).time());
  // Three stages do not divide four devices.
  EXPECT_THROW(Simulator(s.graph, s.views, cm, PipelineShape{3, 4, 1, PipelineSchedule::k1F1B}), Error);
}

}  // namespace
}  // namespace pcgx::search
