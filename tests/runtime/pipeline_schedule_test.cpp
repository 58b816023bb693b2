// Pipeline schedules in the runtime (device_executor.h, "Pipeline
// schedules"): every device runs its stage's program, micro-batches in
// flight between the stages. Against the same plan run one micro-batch at
// a time: the same bits (the gradients add up in the same order); against
// one device: the same training; and each stage holds the activation sets
// of the micro-batches its schedule has in flight, each the size the
// memory model counts.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_chunks.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/rulesets/ruleset.h"
#include "mapped_plan.h"
#include "tensor_compare.h"

namespace pcgx::runtime {
namespace {

using Plan = pcgx::testing::MappedPlan;
using pcgx::testing::relative_difference;

using pcgx::testing::plan_of;

search::PipelineResult pipeline(const Graph& g, int devices, search::PipelineOptions po) {
  return pcgx::testing::pipeline_plan(g, "cpu-host", devices, search::Algorithm::kDataParallel, po);
}

PipelineShape shape_of(const search::PipelineResult& r, PipelineSchedule k) { return {r.stages, r.micro_batches, r.virtual_stages, k}; }

TrainResult run(const Plan& p, std::optional<PipelineShape> schedule, Recompute recompute = Recompute::kNone) {
  TrainOptions o;
  o.steps = 4, o.seed = 3, o.batches = 2, o.optimizer.lr = 0.05, o.optimizer.momentum = 0.9;
  o.pipeline = schedule, o.recompute = recompute;
  return train(p.graph, p.views, p.devices, o);
}

void expect_same_bits(const TrainResult& got, const TrainResult& want) {
  ASSERT_EQ(got.losses, want.losses);
  ASSERT_EQ(got.parameters.size(), want.parameters.size());
  for (const auto& [name, w] : want.parameters) EXPECT_EQ(got.parameters.at(name).data, w.data) << name;
}

TEST(PipelineSchedules, EveryScheduleTrainsAsTheMicroBatchesOneAtATime) {
  for (const char* model : {"bert-large-tiny", "gpt-tiny"}) {
    SCOPED_TRACE(model);
    const Graph g = build_model(model, {{"batch", 8}});
    const TrainResult one = run({g, {}, 1}, std::nullopt);
    for (int64_t v : {1, 2}) {
      SCOPED_TRACE("virtual stages " + std::to_string(v));
      const search::PipelineResult r = pipeline(g, 4, {2, 4, v});
      const Plan p = plan_of(r, 4);
      const TrainResult in_turn = run(p, std::nullopt);
      for (PipelineSchedule k : {PipelineSchedule::kGPipe, v > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::k1F1B}) {
        SCOPED_TRACE(name(k));
        const TrainResult got = run(p, shape_of(r, k));
        expect_same_bits(got, in_turn);
        EXPECT_EQ(got.bytes_sent, in_turn.bytes_sent);
        // And the model on one device, one batch, up to the order of the sums.
        for (size_t s = 0; s < one.losses.size(); ++s) EXPECT_NEAR(got.losses[s], one.losses[s], 1e-4 * std::fabs(one.losses[s])) << s;
        for (const auto& [name, w] : one.parameters) EXPECT_LT(relative_difference(got.parameters.at(name), w, 1e-2), 1e-4) << name;
      }
    }
  }
}

// An explicit order (three forwards before the first backward on stage 0,
// SuperScaler-style) trains to the same bits as running the micro-batches
// one at a time, and holds the micro-batches it has in flight.
TEST(PipelineSchedules, AnExplicitOrderTrainsAsTheMicroBatchesOneAtATime) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const search::PipelineResult r = pipeline(g, 4, {2, 4, 1});
  const Plan p = plan_of(r, 4);
  PipelineShape shape = shape_of(r, PipelineSchedule::kExplicit);
  shape.programs = parse_pipeline_programs("F0 F1 F2 B0 F3 B1 B2 B3\nF0 B0 F1 B1 F2 B2 F3 B3\n", "order");
  const TrainResult got = run(p, shape);
  expect_same_bits(got, run(p, std::nullopt));
  // Two devices per stage: stage 0's hold 3 activation sets, stage 1's one.
  for (int d = 0; d < 4; ++d) EXPECT_EQ(got.activation_sets[static_cast<size_t>(d)][static_cast<size_t>(d / 2)], d < 2 ? 3 : 1) << d;
}

// Four stages of one device, 8 micro-batches: under GPipe every stage
// holds all 8 micro-batches' activations at once, under 1F1B stage s holds
// 4 - s; interleaved (2 stages of 2 chunks) its warm-up's.
TEST(PipelineSchedules, EachStageHoldsTheMicroBatchesItsScheduleHasInFlight) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const search::PipelineResult r = pipeline(g, 4, {4, 8, 1});
  const Plan p = plan_of(r, 4);
  const TrainResult gpipe = run(p, shape_of(r, PipelineSchedule::kGPipe)), one_f_one_b = run(p, shape_of(r, PipelineSchedule::k1F1B));
  const auto held = in_flight_chunks(stage_programs(shape_of(r, PipelineSchedule::k1F1B)));
  ASSERT_EQ(one_f_one_b.activation_sets.size(), 4u);
  for (int64_t s = 0; s < 4; ++s) {
    const auto& sets = one_f_one_b.activation_sets[static_cast<size_t>(s)];
    ASSERT_EQ(sets.size(), 4u);
    for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(sets[static_cast<size_t>(c)], c == s ? held[static_cast<size_t>(s)] : 0) << s << " " << c;
    EXPECT_EQ(held[static_cast<size_t>(s)], 4 - s);
    EXPECT_EQ(gpipe.activation_sets[static_cast<size_t>(s)][static_cast<size_t>(s)], 8);
  }
  // The memory each extra micro-batch in flight takes, measured (GPipe's
  // buffers less 1F1B's, per set more), against the memory model's kept
  // activations of one micro-batch on that device: the outputs it keeps
  // and, on stages 1-3, the copy of the stage boundary it received.
  const TrainingRecipe recipe;
  const Placement place(p.graph, p.views, 4);
  const auto one_set = search::memory_breakdown(place, recipe, 1), two_sets = search::memory_breakdown(place, recipe, 2);
  for (int64_t s = 0; s < 4; ++s) {
    const double extra = static_cast<double>(gpipe.device_buffer_bytes[static_cast<size_t>(s)] -
                                             one_f_one_b.device_buffer_bytes[static_cast<size_t>(s)]);
    const double per_set = extra / static_cast<double>(8 - (4 - s));
    const double model = two_sets[static_cast<size_t>(s)].activations - one_set[static_cast<size_t>(s)].activations;
    EXPECT_NEAR(per_set / model, 1.0, 0.01) << "stage " << s << ": " << per_set << " B per micro-batch in flight measured, " << model
                                            << " B predicted";
  }
  // Interleaved (2 stages of 2 devices, 2 chunks each): per chunk, the
  // most micro-batches its stage's program has in flight through it.
  const search::PipelineResult ri = pipeline(g, 4, {2, 4, 2});
  const PipelineShape si = shape_of(ri, PipelineSchedule::kInterleaved);
  const TrainResult inter = run(plan_of(ri, 4), si);
  const auto programs = stage_programs(si);
  for (int d = 0; d < 4; ++d) {
    const int64_t stage = d / 2;
    for (int64_t c = 0; c < si.chunks(); ++c) {
      int64_t now = 0, most = 0;
      for (const PipelineStep& x : programs[static_cast<size_t>(stage)])
        if (x.chunk == c) most = std::max(most, now += x.backward ? -1 : 1);
      EXPECT_EQ(inter.activation_sets[static_cast<size_t>(d)][static_cast<size_t>(c)], most) << "device " << d << ", chunk " << c;
    }
  }
}

// Recomputation inside the chunks: the same bits as without a schedule.
TEST(PipelineSchedules, RecomputedChunksGiveTheSameBits) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const search::PipelineResult r = pipeline(g, 4, {2, 4, 1});
  const Plan p = plan_of(r, 4);
  expect_same_bits(run(p, shape_of(r, PipelineSchedule::k1F1B), Recompute::kFull), run(p, std::nullopt, Recompute::kFull));
}

// Some layers of each chunk recomputed (Megatron-LM's count per stage):
// one layer in each of the two chunks, the same bits as keeping everything,
// and the bytes the prediction counts on the chunks the schedule finds.
TEST(PipelineSchedules, SomeLayersOfEachChunkRecomputed) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}, {"layers", 4}});
  const search::PipelineResult r = pipeline(g, 4, {2, 4, 1});
  const Plan p = plan_of(r, 4);
  const PipelineShape sh = shape_of(r, PipelineSchedule::k1F1B);
  TrainOptions o;
  o.steps = 4, o.seed = 3, o.batches = 2, o.optimizer.lr = 0.05, o.optimizer.momentum = 0.9;
  o.pipeline = sh, o.recompute = Recompute::kFull, o.recompute_layers = 1;
  const TrainResult some = train(p.graph, p.views, p.devices, o);
  expect_same_bits(some, run(p, sh, Recompute::kNone));
  const std::vector<int64_t> chunk = pipeline_chunks(p.graph, p.views, 4, sh);
  const RecomputePlan per = plan_recompute(p.graph, source_layouts(p.graph), Recompute::kFull, 1, chunk);
  std::vector<std::set<int64_t>> chunks_of(static_cast<size_t>(per.segments));
  for (const Node& n : p.graph.nodes())
    if (const int32_t s = per.segment[static_cast<size_t>(n.id)]; s >= 0) chunks_of[static_cast<size_t>(s)].insert(chunk[static_cast<size_t>(n.id)]);
  ASSERT_EQ(per.segments, 2);
  EXPECT_EQ(chunks_of[0], std::set<int64_t>{0});
  EXPECT_EQ(chunks_of[1], std::set<int64_t>{1});
  const auto steps = static_cast<double>(some.losses.size());
  EXPECT_EQ(static_cast<double>(some.bytes_sent) / steps,
            step_bytes(p.graph, p.views, 4) + recompute_step_bytes(p.graph, p.views, 4, Recompute::kFull, true, 1, chunk));
}

// Megatron's plan (t = 2 in 2 stages of 4 devices, boundaries scattered
// and gathered) with full recomputation: the same bits under 1F1B as one
// micro-batch at a time, and a re-run sends again only its collectives
// and layout changes (its tasks keep the inputs they received), as
// recompute_step_bytes counts with kept inputs.
TEST(PipelineSchedules, RecomputedTensorParallelStagesSendTheirCollectivesAgain) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const search::PipelineResult r = pcgx::testing::pipeline_plan(g, "dgx-h100", 8, search::Algorithm::kMegatron, {2, 4}, 2);
  const Plan p = plan_of(r, 8);
  const TrainResult scheduled = run(p, shape_of(r, PipelineSchedule::k1F1B), Recompute::kFull);
  expect_same_bits(scheduled, run(p, std::nullopt, Recompute::kFull));
  const auto steps = static_cast<double>(scheduled.losses.size());
  const double again = recompute_step_bytes(p.graph, p.views, 8, Recompute::kFull, true);
  EXPECT_GT(again, 0);  // the tensor-parallel all-reduces
  EXPECT_EQ(static_cast<double>(scheduled.bytes_sent) / steps, step_bytes(p.graph, p.views, 8) + again);
  // Data-parallel stages: the first layer of the second stage reads the
  // boundary straight from the first stage's devices; one micro-batch at a
  // time its re-run receives it again, under a schedule it does not.
  const search::PipelineResult dp = pipeline(g, 4, {2, 4, 1});
  const Plan q = plan_of(dp, 4);
  const double kept = recompute_step_bytes(q.graph, q.views, 4, Recompute::kFull, true),
               sent = recompute_step_bytes(q.graph, q.views, 4, Recompute::kFull);
  EXPECT_LT(kept, sent);
  const TrainResult in_turn = run(q, std::nullopt, Recompute::kFull), under_1f1b = run(q, shape_of(dp, PipelineSchedule::k1F1B), Recompute::kFull);
  expect_same_bits(under_1f1b, in_turn);
  const auto n = static_cast<double>(in_turn.losses.size());
  EXPECT_EQ(static_cast<double>(in_turn.bytes_sent) / n, step_bytes(q.graph, q.views, 4) + sent);
  EXPECT_EQ(static_cast<double>(under_1f1b.bytes_sent) / n, step_bytes(q.graph, q.views, 4) + kept);
}

// The stages split the devices the strategy was planned for; more run
// idle, holding nothing, and the training is the same.
TEST(PipelineSchedules, DevicesBeyondTheStrategysRunIdle) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const search::PipelineResult r = pipeline(g, 4, {2, 4, 1});
  const Plan p = plan_of(r, 4);
  TrainOptions o;
  o.steps = 3, o.seed = 3, o.batches = 2, o.optimizer.lr = 0.05;
  o.pipeline = shape_of(r, PipelineSchedule::k1F1B), o.pipeline_devices = 4;
  const TrainResult four = train(p.graph, p.views, 4, o), eight = train(p.graph, p.views, 8, o);
  expect_same_bits(eight, four);
  ASSERT_EQ(eight.activation_sets.size(), 8u);
  for (size_t d = 4; d < 8; ++d)
    for (int64_t sets : eight.activation_sets[d]) EXPECT_EQ(sets, 0) << "device " << d;
  o.pipeline_devices = 2;  // fewer than the tasks use
  EXPECT_THROW(train(p.graph, p.views, 4, o), Error);
}

TEST(PipelineSchedules, AScheduleThePlanCannotRunIsRefused) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}});
  const search::PipelineResult r = pipeline(g, 4, {2, 4, 1});
  const Plan p = plan_of(r, 4);
  EXPECT_THROW(run(p, PipelineShape{2, 8, 1, PipelineSchedule::k1F1B}), Error);  // other micro-batches
  EXPECT_THROW(run(p, PipelineShape{4, 4, 1, PipelineSchedule::k1F1B}), Error);  // other stages
}

}  // namespace
}  // namespace pcgx::runtime
