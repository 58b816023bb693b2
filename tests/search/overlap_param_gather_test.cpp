// ZeRO's weights gathered beside the next forward pass
// (TrainingRecipe::overlap_param_gather, Megatron-LM's
// --overlap-param-gather): the estimate replays the gathers against the
// forward pass (replay_param_gathers), the simulator runs them beside it,
// each operator's first forward waiting for its bucket's, and the two
// save the same time where they model the same (else the estimate saves
// no more). Nothing moves where nothing is gathered after the
// update (ZeRO 0, ZeRO 3's gathers before use) or where the devices do
// their own communication. A strategy file records it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/collectives.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/gradient_sync.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "search/priced_both_ways.h"
#include "search/recipe_flag_checks.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

CostModel model(bool overlap, ZeroStage zero = ZeroStage::k1, Machine m = toy_machine(), double bucket_bytes = 64 << 10,
                bool grad_input = false) {
  TrainingRecipe recipe{Precision::kFp32, Recompute::kNone, zero};
  recipe.overlap_param_gather = overlap, recipe.overlap_grad_input = grad_input;
  CommOptions comm;
  comm.bucket_bytes = bucket_bytes;
  return CostModel(std::move(m), toy_efficiency(), {}, comm, recipe);
}

Graph gpt(int64_t batch = 8) { return build_model("gpt-tiny", {{"batch", batch}, {"seq", 128}}); }


// The gathers issued one at a time: the first at 0, each next one as the
// first reader of the one before it starts; a reader starts when the
// forward pass reaches it (delayed by the waits so far) and its gather
// has arrived, one chain per set of devices. Worked by hand: gathers of 2,
// 1 and 3 s first read at 0, 5
// and 6 s: the first reader waits 2 s (starts at 2), the second starts at
// max(5 + 2, 2 + 1) = 7, the third at max(6 + 2, 7 + 3) = 10: 4 s in all.
TEST(OverlapParamGather, TheForwardPassWaitsForEachBucketsGatherIssuedAtTheReaderBefore) {
  EXPECT_DOUBLE_EQ(replay_param_gathers({{2, 0}, {1, 5}, {3, 6}}), 4.0);
  EXPECT_DOUBLE_EQ(replay_param_gathers({{3, 6}, {2, 0}, {1, 5}}), 4.0) << "in the order the forward pass reads them";
  EXPECT_DOUBLE_EQ(replay_param_gathers({{1, 0}, {1, 10}, {1, 20}}), 1.0) << "only the first waits where the pass outlasts the rest";
  EXPECT_DOUBLE_EQ(replay_param_gathers({}), 0.0);
  // One chain per set of devices: gathers of 2 and 3 s on two sets, read
  // at 0 and 0.5 s, both issued at 0: the second reader starts at
  // max(0.5 + 2, 0 + 3) = 3 (on one set: max(2.5, 2 + 3) = 5).
  EXPECT_DOUBLE_EQ(replay_param_gathers({{2, 0, {0, 1}}, {3, 0.5, {2, 3}}}), 2.5);
  EXPECT_DOUBLE_EQ(replay_param_gathers({{2, 0, {0, 1}}, {3, 0.5, {0, 1}}}), 4.5);
}

// A pass replayed from when it starts, the chains carrying over: gathers
// of 2 and 1 s first read 0 and 5 s into a pass starting at 3 s (a later
// stage's): the first arrives at 2, its reader starts at 3 and issues the
// second, which arrives at 4, before its reader at 8: no wait (from the
// step's start the first reader would wait 2 s). The same chain then
// feeds a pass starting at 10 (the stage's next chunk) whose one gather
// of 4 s is issued at 8, the reader before it: it waits until 12, 2 s.
TEST(OverlapParamGather, APassReplayedFromItsStartTheChainsCarryingOver) {
  GatherChains chains;
  EXPECT_DOUBLE_EQ(replay_param_gathers({{2, 0}, {1, 5}}, 3, chains), 0.0);
  EXPECT_DOUBLE_EQ(replay_param_gathers({{4, 0}}, 10, chains), 2.0);
  GatherChains fresh;
  EXPECT_DOUBLE_EQ(replay_param_gathers({{2, 0}, {1, 5}}, 0, fresh), 2.0);
  EXPECT_DOUBLE_EQ(replay_param_gathers({{2, 0}, {1, 5}}), 2.0);
  GatherChains other;  // another chain's state does not delay this one
  EXPECT_DOUBLE_EQ(replay_param_gathers({{1, 0, {0}}}, 0, other), 1.0);
  EXPECT_DOUBLE_EQ(replay_param_gathers({{1, 0, {1}}}, 0, other), 1.0);
}

// A pipelined plan's gathers replayed forward step by forward step
// (PipelineGathers), 2 stages x 3 chunks, each chunk one gather of 1 s
// read as its first forward starts. Interleaved (aligned): stage 0 issues
// chunks 0 and 2 as the step starts (arriving at 1 and 2 s) and chunk 4
// at its forward step S (3 - 1 - 1) - 0 = 2, here at 5 s (arriving at 6);
// stage 1 chunks 1 and 3 at the start, chunk 5 at its step 1 (2.5 s,
// arriving at 3.5). A chunk's first forward waits until its gather
// arrives; later forwards never wait. Chained (GPipe), stage 1's chunk 5
// is issued only as the reader of chunk 3's starts (3 s) and arrives at
// 4 s: its first forward at 3 s waits 1 s (aligned, 0.5 s).
TEST(OverlapParamGather, APipelinesGathersAreAlignedUnderTheInterleavedScheduleAndChainedOtherwise) {
  std::vector<std::vector<ParamGather>> gathers(6, std::vector<ParamGather>{{1.0, 0.0}});
  auto forward = [](int64_t chunk, int64_t m) { return PipelineStep{false, m, chunk}; };
  PipelineGathers aligned(PipelineShape{2, 2, 3, PipelineSchedule::kInterleaved}, gathers);
  EXPECT_DOUBLE_EQ(aligned(0, forward(0, 0), 0.0), 1.0);
  EXPECT_DOUBLE_EQ(aligned(0, forward(0, 1), 0.5), 0.0) << "only a chunk's first forward waits";
  EXPECT_DOUBLE_EQ(aligned(0, forward(2, 0), 5.0), 0.0);
  EXPECT_DOUBLE_EQ(aligned(1, forward(1, 0), 2.0), 0.0);
  EXPECT_DOUBLE_EQ(aligned(1, forward(1, 1), 2.5), 0.0);
  EXPECT_DOUBLE_EQ(aligned(0, forward(2, 1), 6.0), 0.0);
  EXPECT_DOUBLE_EQ(aligned(0, forward(4, 0), 5.5), 0.5) << "chunk 4 issued at stage 0's third forward (5 s)";
  EXPECT_DOUBLE_EQ(aligned(1, forward(3, 0), 3.0), 0.0);
  EXPECT_DOUBLE_EQ(aligned(1, forward(5, 0), 3.0), 0.5) << "chunk 5 issued at stage 1's second forward (2.5 s)";
  PipelineGathers chained(PipelineShape{2, 2, 3, PipelineSchedule::kGPipe}, gathers);
  EXPECT_DOUBLE_EQ(chained(1, forward(1, 0), 2.0), 0.0);
  EXPECT_DOUBLE_EQ(chained(1, forward(3, 0), 3.0), 0.0);
  EXPECT_DOUBLE_EQ(chained(1, forward(5, 0), 3.0), 1.0);
}

// The gathers' buckets follow the operators' order (`needed`), not the
// order gradients are ready in (a weight product run beside its
// collective makes an early layer's gradient ready early). Three 1 MB
// gradients of one group over two nodes, 2 MB buckets: ready at 1, 2 and
// 3 ms, first read at 20 ms, 1 us and 10 ms. In the operators' order the
// buckets are {20, 10 ms} (needed at 10 ms) and {1 us}: the forward pass
// waits for the 1 MB bucket's gather only, the other arriving in time; in
// the ready order they would be {20 ms, 1 us} (needed at 1 us) and
// {10 ms}: it would wait for the 2 MB one.
TEST(OverlapParamGather, BucketsFollowTheOperatorsOrderNotTheReadyOrder) {
  const Machine m = two_level_machine();
  TrainingRecipe recipe{Precision::kFp32, Recompute::kNone, ZeroStage::k1};
  recipe.overlap_param_gather = true;
  const CostModel cost(m, toy_efficiency(), {}, {}, recipe);
  SyncGroup s{strided_group(m, 0, 1, 8), 1e6, 7, {0, 1, 2, 3, 4, 5, 6, 7}};
  const std::vector<ReadyGradient> grads{{1e-3, s, 0, 20e-3}, {2e-3, s, 0, 1e-6}, {3e-3, s, 0, 10e-3}};
  const double one = cost.weight_gather_time(s, 1e6), two = cost.weight_gather_time(s, 2e6);
  const double operators = replay_param_gathers({{one, 1e-6, s.devices}, {two, 10e-3, s.devices}});
  const double ready = replay_param_gathers({{two, 1e-6, s.devices}, {one, 10e-3, s.devices}});
  EXPECT_DOUBLE_EQ(operators, one - 1e-6) << "only the first bucket waited for";
  ASSERT_GT(std::abs(operators - ready), 1e-9) << "the two orders must wait differently for the test to tell them apart";
  EXPECT_DOUBLE_EQ(replay_buckets(cost, grads, 10e-3, 2e6).gather, operators);
}

// Data parallelism (and Megatron-LM's tensor parallelism times data
// parallelism, with and without sequence parallelism), in one batch and
// in 4 micro-batches (at ZeRO 1, whose gradients are reduce-scattered
// once, and ZeRO 2, every micro-batch's): the estimate saves what the
// simulator does (as `Check` below says how closely), no more than the
// gathers after the update cost, and the simulator runs the gathers
// beside forward tasks.
TEST(OverlapParamGather, EstimateAndSimulatorSaveAlikeAndTheGathersRunBesideTheForwardPass) {
  const Graph g = gpt();
  const std::optional<Graph> tensor = expert(g, toy_machine(), 8, 4, false), sequence = expert(g, toy_machine(), 8, 4, true);
  ASSERT_TRUE(tensor && sequence);
  // How closely the two agree: to 1e-6 of the step (exact); within their
  // gap without the overlap too (gap); or only that the estimate saves no
  // more than the simulator (conservative), which lets operators that do
  // not read a late bucket go on where the estimate delays the whole
  // pass, and in a micro-batched plan does not make an operator run once
  // per step wait (docs/training.md).
  enum Check { kExact, kGap, kConservative };
  const std::tuple<const char*, Graph, ZeroStage, Check> plans[] = {
      {"data parallel", data_parallel(g, 8), ZeroStage::k1, kExact},
      {"data parallel, 4 micro-batches", pipelined(data_parallel(gpt(32), 8), 4, true), ZeroStage::k1, kGap},
      {"data parallel, 4 micro-batches, ZeRO 2", pipelined(data_parallel(gpt(32), 8), 4, true), ZeroStage::k2, kGap},
      // (The vocabulary-parallel embedding's all-reduce reads no late
      // bucket: the simulator runs it while the position table's gather
      // arrives, where the estimate delays the whole pass.)
      {"tensor x data parallel", *tensor, ZeroStage::k1, kConservative},
      {"sequence x data parallel, input gradients beside the weight products", *sequence, ZeroStage::k1, kConservative}};
  for (const auto& [what, plan, zero, check] : plans) {
    SCOPED_TRACE(what);
    // (Input gradients beside the weight products make some gradients
    // ready late: the gathers' buckets still follow the operators' order.)
    const bool grad_input = std::string(what).find("input gradients") != std::string::npos;
    const CostModel off = model(false, zero, toy_machine(), 64 << 10, grad_input), on = model(true, zero, toy_machine(), 64 << 10, grad_input);
    const BothWays b = both_ways(plan, off, on);
    ASSERT_TRUE(b.off.estimate.feasible && b.on.estimate.feasible);
    const double saved = b.off.estimate.time - b.on.estimate.time, simulated = b.simulated_off - b.simulated_on;
    EXPECT_GT(saved, 0) << "the gathers hide behind the forward pass";
    EXPECT_LE(saved, b.off.estimate.gather * (1 + 1e-9)) << "no more than the gathers hide";
    const double eps = 1e-6 * b.off.estimate.time;
    if (check == kExact) {
      EXPECT_NEAR(simulated, saved, eps);
    }
    if (check == kGap) {
      EXPECT_NEAR(simulated, saved, std::abs(b.simulated_off - b.off.estimate.time) + eps);
    }
    EXPECT_LE(saved, simulated + eps);
    const Simulator sim(b.on.graph, b.on.views, on);
    const Timeline& tl = sim.timeline();
    int gathers = 0;
    bool beside = false;
    for (TaskId t = 0; t < static_cast<TaskId>(tl.size()); ++t) {
      if (sim.info(t).kind != SimKind::kGather) continue;
      ++gathers;
      EXPECT_GE(sim.info(t).node, 0) << sim.label(t) << " runs after the update";
      for (TaskId f = 0; f < static_cast<TaskId>(tl.size()) && !beside; ++f)
        beside = sim.info(f).kind == SimKind::kForward && tl.task(f).duration > 0 && tl.task(f).start < tl.task(t).end &&
                 tl.task(t).start < tl.task(f).end;
    }
    EXPECT_GT(gathers, 1);
    EXPECT_TRUE(beside);
  }
}

// Pipeline stages (Megatron-LM's plan, t = 4, 2 stages, 4 micro-batches
// on 32 dgx-a100 devices): every stage's gathers start with the step, but
// a stage's first forward waits for them only from when the first
// micro-batch reaches it. One chunk per stage, or GPipe through 3 chunks
// per stage: a stage's chain goes on from there (through its chunks);
// interleaved (3 virtual stages), a stage issues its first two chunks'
// gathers as the step starts and each later chunk's at its forward step
// S (k - 1) - stage, as that step starts (aligned, param_gathers.h). The estimate
// replays each chunk's gathers as the schedule reaches it and agrees with
// the simulator within the gap the two have without the overlap; every
// gather is waited for by a forward reading its bucket (a later chunk's
// first one, issued in the chunk before it, too), and aligned, none
// starts before its chunk is issued.
TEST(OverlapParamGather, EachStageWaitsFromWhenTheFirstMicroBatchReachesIt) {
  static const Ruleset empty;
  static const RuleLibrary rules(empty);
  SearchOptions o;
  o.algorithm = Algorithm::kMegatron, o.tensor_degree = 4, o.sequence_parallel = true;
  const Graph g = build_model("gpt", {{"layers", 6}, {"hidden", 1024}, {"heads", 16}, {"ffn", 4096}, {"seq", 2048}, {"vocab", 1024}, {"batch", 32}});
  for (const auto& [v, schedule] : {std::pair<int64_t, PipelineSchedule>{1, PipelineSchedule::k1F1B},
                                    {3, PipelineSchedule::kInterleaved}, {3, PipelineSchedule::kGPipe}}) {
    SCOPED_TRACE("virtual stages " + std::to_string(v) + ", " + name(schedule));
    TrainingRecipe recipe{Precision::kBf16, Recompute::kNone, ZeroStage::k1};
    const Machine m = find_machine("dgx-a100").with_devices(32);
    const CostModel off(m, default_efficiency(), {}, {}, recipe);
    recipe.overlap_param_gather = true;
    const CostModel on(m, default_efficiency(), {}, {}, recipe);
    PipelineOptions po{2, 4};
    po.virtual_stages = v, po.schedule = schedule;
    const PipelineResult a = optimize_pipeline(g, rules, off, o, po), b = optimize_pipeline(g, rules, on, o, po);
    const PipelineShape shape{a.stages, a.micro_batches, a.virtual_stages, schedule};
    const Strategy &x = a.search.strategy, &y = b.search.strategy;
    const Simulator sim(y.graph, y.views, on, shape);
    const double sim_off = Simulator(x.graph, x.views, off, shape).time(), sim_on = sim.time();
    ASSERT_TRUE(x.estimate.feasible && y.estimate.feasible);
    EXPECT_GT(y.estimate.gather, 0) << "the first stage waits for its weights";
    // (GPipe through 3 chunks per stage priced by its steps, not by the
    // interleaved schedule's closed form, which would be 35% short here.)
    EXPECT_NEAR(x.estimate.time / sim_off, 1.0, 0.03);
    EXPECT_NEAR(y.estimate.time, sim_on, std::abs(x.estimate.time - sim_off) + 1e-6 * x.estimate.time);
    // What the overlap changes, estimated and simulated: the same, but for
    // where the two already part on the gathers after the update (with
    // several chunks per stage the estimate buckets those chunk by chunk,
    // the simulator over a stage's chunks: 75 us more estimated here).
    const double changed = y.estimate.time - x.estimate.time, simulated = sim_on - sim_off;
    const double after_update = x.estimate.gather - Simulator(x.graph, x.views, off, shape).summary().gather;
    EXPECT_NEAR(changed, simulated - after_update, 1e-6 * x.estimate.time);
    // Every gather is waited for by a forward task reading its bucket,
    // the first bucket of a stage's next chunk too (issued in the chunk
    // before it), and runs on its stage's devices' links only.
    const Timeline& tl = sim.timeline();
    std::vector<char> waited(tl.size(), 0);
    for (TaskId t = 0; t < static_cast<TaskId>(tl.size()); ++t)
      if (sim.info(t).kind == SimKind::kForward && sim.info(t).node >= 0)
        for (TaskId p : tl.task(t).preds) waited[static_cast<size_t>(p)] = 1;
    // Interleaved (aligned): a stage issues its chunks from the third on
    // at its forward step S (k - 1) - stage, none of their gathers
    // starting before.
    std::map<int64_t, double> issued;  // by chunk
    for (TaskId t = 0; t < static_cast<TaskId>(tl.size()); ++t)
      if (sim.info(t).kind == SimKind::kGatherIssue) issued[sim.info(t).chunk] = tl.task(t).end;
    EXPECT_EQ(static_cast<int64_t>(issued.size()), schedule == PipelineSchedule::kInterleaved ? 2 * (v - 2) : 0);
    // ... as that forward step starts (its first task, the boundary's
    // transfer included, starts then).
    const auto programs = stage_programs(shape);
    for (const auto& [chunk, at] : issued) {
      const int64_t stage = chunk % 2, k = chunk / 2;
      std::vector<PipelineStep> forwards;
      for (const PipelineStep& p : programs[static_cast<size_t>(stage)])
        if (!p.backward) forwards.push_back(p);
      const PipelineStep& step = forwards.at(static_cast<size_t>(2 * (k - 1) - stage));
      double starts = std::numeric_limits<double>::infinity();
      for (TaskId t = 0; t < static_cast<TaskId>(tl.size()); ++t)
        if (const SimTaskInfo& i = sim.info(t);
            (i.kind == SimKind::kForward || i.kind == SimKind::kTransfer) && i.chunk == step.chunk && i.micro_batch == step.micro_batch &&
            tl.task(t).duration > 0)
          starts = std::min(starts, tl.task(t).start);
      EXPECT_NEAR(at, starts, 1e-12) << "chunk " << chunk;
    }
    int gathers = 0;
    for (TaskId t = 0; t < static_cast<TaskId>(tl.size()); ++t)
      if (sim.info(t).kind == SimKind::kGather) {
        ++gathers;
        EXPECT_TRUE(waited[static_cast<size_t>(t)]) << sim.label(t);
        if (const auto it = issued.find(sim.info(t).chunk); it != issued.end()) {
          EXPECT_GE(tl.task(t).start, it->second) << sim.label(t);
        }
      }
    EXPECT_GT(gathers, 2 * v) << "several buckets per chunk";
  }
}

// Interlaced chunks run on every stage's devices, each stage's chain
// reaching into them: not modelled, refused naming the recipe field.
TEST(OverlapParamGather, InterlacedChunksAreRefused) {
  static const Ruleset empty;
  static const RuleLibrary rules(empty);
  SearchOptions o;
  o.algorithm = Algorithm::kPlan;
  PipelineOptions po{2, 4};
  po.interlaced = {0};
  try {
    (void)optimize_pipeline(gpt(32), rules, model(true), o, po);
    ADD_FAILURE() << "interlaced chunks searched";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "TrainingRecipe.overlap_param_gather") << e.what();
  }
}

// Each operator's first forward starts after its bucket's gather ends: a
// simulator whose readers did not wait would finish the forward pass
// earlier than the gathers arrive. Here the links are 100 times slower,
// so that the gathers outlast the forward pass and the step waits for
// them in both.
TEST(OverlapParamGather, ReadersWaitForTheirBuckets) {
  Machine slow = toy_machine();
  for (auto& l : slow.links) l.bandwidth /= 100;
  const Graph plan = data_parallel(gpt(), 8);
  const CostModel off = model(false, ZeroStage::k1, slow), on = model(true, ZeroStage::k1, slow);
  const BothWays b = both_ways(plan, off, on);
  const Simulator sim(b.on.graph, b.on.views, on);
  const Timeline& tl = sim.timeline();
  double last_gather = 0, first_forward_after = 0;
  for (TaskId t = 0; t < static_cast<TaskId>(tl.size()); ++t)
    if (sim.info(t).kind == SimKind::kGather) last_gather = std::max(last_gather, tl.task(t).end);
  for (TaskId t = 0; t < static_cast<TaskId>(tl.size()); ++t)
    if (sim.info(t).kind == SimKind::kForward && tl.task(t).duration > 0) first_forward_after = std::max(first_forward_after, tl.task(t).start);
  EXPECT_GE(first_forward_after, last_gather) << "the last bucket's reader starts after its gather";
  EXPECT_NEAR(b.simulated_off - b.simulated_on, b.off.estimate.time - b.on.estimate.time, 1e-6 * b.off.estimate.time);
}

// No gather after the update to move (ZeRO 0; ZeRO 3 gathering every
// block before use), or devices that do their own communication: the same
// step, to the bit, in the estimate and the simulator.
TEST(OverlapParamGather, NothingChangesWithoutAGatherAfterTheUpdateOrALinkOfItsOwn) {
  const Graph plan = data_parallel(gpt(), 8);
  Machine cpu = toy_machine();
  cpu.device.overlaps_communication = false;
  TrainingRecipe every{Precision::kFp32, Recompute::kNone, ZeroStage::k3};
  every.zero_persistence_threshold = 0;
  for (const auto& [what, off_recipe] : {std::pair<const char*, std::pair<ZeroStage, Machine>>{"ZeRO 0", {ZeroStage::k0, toy_machine()}},
                                         {"devices doing their own communication", {ZeroStage::k1, cpu}}}) {
    SCOPED_TRACE(what);
    const BothWays b = both_ways(plan, model(false, off_recipe.first, off_recipe.second), model(true, off_recipe.first, off_recipe.second));
    EXPECT_DOUBLE_EQ(b.on.estimate.time, b.off.estimate.time);
    EXPECT_DOUBLE_EQ(b.simulated_on, b.simulated_off);
  }
  TrainingRecipe on = every;
  on.overlap_param_gather = true;
  CommOptions comm;
  comm.bucket_bytes = 64 << 10;
  const CostModel a(toy_machine(), toy_efficiency(), {}, comm, every), c(toy_machine(), toy_efficiency(), {}, comm, on);
  const BothWays z = both_ways(plan, a, c);
  EXPECT_GT(z.off.estimate.gathered_for_use, 0);
  EXPECT_DOUBLE_EQ(z.on.estimate.time, z.off.estimate.time);
  EXPECT_DOUBLE_EQ(z.simulated_on, z.simulated_off);
}

TEST(OverlapParamGather, AStrategyFileRecordsIt) {
  const CostModel on = model(true);
  const StrategyFile f = mapped_file(on, data_parallel(gpt(), 8), "gpt-tiny", 8);
  expect_recipe_flag_round_trip(f, "overlap_param_gather", &TrainingRecipe::overlap_param_gather);
}

}  // namespace
}  // namespace pcgx::search
