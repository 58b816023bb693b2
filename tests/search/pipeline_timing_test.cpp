// A pipelined plan's step from its chunks' times (pipeline_timing.h): the
// search prices its plans with it, so the chunks it reports give back its
// estimate under its own order; under another order they give what the
// search finds for a plan stating that order (the same chunks), which the
// simulator confirms; a strategy file keeps them ("pipeline.chunks"), and
// a corrupted entry is an error naming it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <utility>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/gradient_sync.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/pipeline_timing.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"

namespace pcgx::search {
namespace {

const Graph& gpt() {
  static const Graph g =
      build_model("gpt", {{"layers", 6}, {"hidden", 1024}, {"heads", 16}, {"ffn", 4096}, {"seq", 1024}, {"vocab", 1024}, {"batch", 32}});
  return g;
}

CostModel cost(bool overlap_param_gather) {
  TrainingRecipe recipe{Precision::kBf16, Recompute::kNone, ZeroStage::k1};
  recipe.overlap_param_gather = overlap_param_gather;
  return CostModel(find_machine("dgx-a100").with_devices(32), default_efficiency(), {}, {}, recipe);
}

// Megatron-LM's plan, t = 4, on 2 stages of 16 devices, 4 micro-batches.
PipelineResult megatron(const CostModel& c, int64_t v, PipelineSchedule schedule) {
  static const Ruleset empty;
  static const RuleLibrary rules(empty);
  SearchOptions o;
  o.algorithm = Algorithm::kMegatron, o.tensor_degree = 4, o.sequence_parallel = true;
  PipelineOptions po{2, 4};
  po.virtual_stages = v, po.schedule = schedule;
  return optimize_pipeline(gpt(), rules, c, o, po);
}

PipelineShape shape_of(const PipelineResult& r, PipelineSchedule schedule) {
  return PipelineShape{r.stages, r.micro_batches, r.virtual_stages, schedule};
}

TEST(ScheduledTime, TheChunksGiveBackTheSearchsEstimate) {
  for (const bool beside : {false, true})
    for (const auto& [v, schedule] : {std::pair<int64_t, PipelineSchedule>{1, PipelineSchedule::k1F1B},
                                      {1, PipelineSchedule::kGPipe},
                                      {3, PipelineSchedule::kInterleaved},
                                      {3, PipelineSchedule::kGPipe}}) {
      SCOPED_TRACE(std::string(beside ? "gathers beside the forward pass, " : "") + name(schedule) + ", v " + std::to_string(v));
      const CostModel c = cost(beside);
      const PipelineResult r = megatron(c, v, schedule);
      ASSERT_TRUE(r.search.strategy.estimate.feasible);
      ASSERT_EQ(r.stage.size(), static_cast<size_t>(2 * v));
      const ScheduledTime t = scheduled_time(shape_of(r, schedule), r.stage, gathers_beside_forward(c));
      EXPECT_NEAR(t.time, r.search.strategy.estimate.time, 1e-12 * t.time);
      EXPECT_NEAR(t.time, t.steps + t.update + t.gather_wait, 1e-12 * t.time);
      // Megatron-LM's even layers leave the stages nearly alike: the steps
      // come to about the closed form (not defined for GPipe through
      // several chunks per stage; under the interleaved schedule a little
      // above it here, each step at its own chunk's time).
      if (!(schedule == PipelineSchedule::kGPipe && v > 1)) {
        EXPECT_NEAR((t.steps + t.update) / t.closed_form, 1.0, 0.03);
      }
      EXPECT_EQ(t.gather_wait > 0, beside);
      // Every chunk's micro-batch is its forward, its backward and the
      // boundary from the chunk before, both ways.
      for (size_t k = 0; k < r.stage.size(); ++k)
        EXPECT_NEAR(r.stage[k].micro_batch,
                    r.stage[k].forward + r.stage[k].backward + (k > 0 ? 2 * r.stage[k - 1].crossing : 0.0), 1e-12 * r.stage[k].micro_batch);
      EXPECT_GT(r.stage[0].crossing, 0);
      EXPECT_EQ(r.stage.back().crossing, 0);
    }
}

TEST(ScheduledTime, AnotherOrderIsPricedAsAPlanStatingIt) {
  for (const bool beside : {false, true}) {
    SCOPED_TRACE(beside ? "gathers beside the forward pass" : "gathers after the update");
    const CostModel c = cost(beside);
    const PipelineResult interleaved = megatron(c, 3, PipelineSchedule::kInterleaved), gpipe = megatron(c, 3, PipelineSchedule::kGPipe);
    // The same chunks (Megatron-LM's layers, mapped alike: the plan fits
    // either way)...
    ASSERT_EQ(interleaved.stage.size(), gpipe.stage.size());
    for (size_t k = 0; k < gpipe.stage.size(); ++k) {
      EXPECT_DOUBLE_EQ(interleaved.stage[k].forward, gpipe.stage[k].forward);
      EXPECT_DOUBLE_EQ(interleaved.stage[k].backward, gpipe.stage[k].backward);
    }
    // ... priced in GPipe's order: what the search found for GPipe.
    const PipelineShape as_gpipe = shape_of(interleaved, PipelineSchedule::kGPipe);
    const double repriced = scheduled_time(as_gpipe, interleaved.stage, gathers_beside_forward(c)).time;
    EXPECT_NEAR(repriced, gpipe.search.strategy.estimate.time, 1e-9 * repriced);
    EXPECT_GT(repriced, 1.2 * interleaved.search.strategy.estimate.time);  // GPipe through 3 chunks: a bubble 3x as long and more
    // And the simulator runs the interleaved strategy in GPipe's order
    // about as long.
    const Strategy& s = interleaved.search.strategy;
    EXPECT_NEAR(Simulator(s.graph, s.views, c, as_gpipe).time() / repriced, 1.0, 0.03);
  }
}

// Two stages, the second three times the first (f 1, b 2 against 3 and
// 6), 4 micro-batches of 1F1B, no boundary time: worked by hand, stage 1
// runs F0 at 0-1; stage 2 is then busy from 1 to 37 (4 x 9), and stage
// 1's last backward runs 37-39. The closed form charges the fill and
// drain the slowest stage's 9: (4 + 1) x 9 = 45.
TEST(ScheduledTime, StagesThatDifferAreRunStepByStep) {
  std::vector<PipelineStage> chunks(2);
  chunks[0].stage = 0, chunks[0].forward = 1, chunks[0].backward = 2, chunks[0].micro_batch = 3, chunks[0].update = 0.5;
  chunks[1].stage = 1, chunks[1].forward = 3, chunks[1].backward = 6, chunks[1].micro_batch = 9, chunks[1].update = 0.25;
  const ScheduledTime t = scheduled_time(PipelineShape{2, 4}, chunks, false);
  EXPECT_DOUBLE_EQ(t.steps, 39.0);
  EXPECT_DOUBLE_EQ(t.update, 0.5);
  EXPECT_DOUBLE_EQ(t.time, 39.5);
  EXPECT_DOUBLE_EQ(t.closed_form, 45.5);
  EXPECT_DOUBLE_EQ(t.slowest, 9.0);
  // Alike, the two agree.
  chunks[0] = chunks[1], chunks[0].stage = 0;
  const ScheduledTime alike = scheduled_time(PipelineShape{2, 4}, chunks, false);
  EXPECT_DOUBLE_EQ(alike.steps + alike.update, alike.closed_form);
}

// A boundary is held by the step that receives it (forward) or sends its
// gradient back (backward). Two stages, 2 micro-batches of 1F1B, chunk 0
// f 1, b 2 and a boundary of 0.5 to chunk 1, whose f 1, b 2 become steps
// of 1.5 and 2.5: stage 0 runs F0 0-1, F1 1-2; stage 1 F0 1-2.5, B0
// 2.5-5, F1 5-6.5, B1 6.5-9; stage 0 B0 5-7, B1 9-11. Then a gather
// beside the forward pass on stage 1, issued as the step starts and
// taking 3, read 0.2 into chunk 1's compute: its first forward, ready at
// 1, reads it at 1 + 0.5 + 0.2 and so waits 1.3, and everything after it
// on both stages moves by as much: 12.3.
TEST(ScheduledTime, ABoundaryIsHeldByTheStepsThatCrossIt) {
  std::vector<PipelineStage> chunks(2);
  chunks[0].stage = 0, chunks[0].forward = 1, chunks[0].backward = 2, chunks[0].crossing = 0.5, chunks[0].micro_batch = 3;
  chunks[1].stage = 1, chunks[1].forward = 1, chunks[1].backward = 2, chunks[1].micro_batch = 4;
  const PipelineShape shape{2, 2};
  const ScheduledTime t = scheduled_time(shape, chunks, false);
  EXPECT_DOUBLE_EQ(t.steps, 11.0);
  EXPECT_DOUBLE_EQ(t.closed_form, 12.0);  // (2 + 1) x 4
  chunks[1].param_gathers.push_back(ParamGather{3.0, 0.2, {0}});
  const ScheduledTime w = scheduled_time(shape, chunks, true);
  EXPECT_DOUBLE_EQ(w.steps, 11.0);
  EXPECT_DOUBLE_EQ(w.gather_wait, 1.3);
  EXPECT_DOUBLE_EQ(w.time, 12.3);
}

TEST(ScheduledTime, ChunksThatDoNotMatchThePipelineAreRefused) {
  const PipelineResult r = megatron(cost(false), 1, PipelineSchedule::k1F1B);
  const PipelineShape shape = shape_of(r, PipelineSchedule::k1F1B);
  std::vector<PipelineStage> one(r.stage.begin(), r.stage.begin() + 1);
  EXPECT_THROW(scheduled_time(shape, one, false), Error);
  std::vector<PipelineStage> swapped = r.stage;
  std::swap(swapped[0].stage, swapped[1].stage);
  EXPECT_THROW(scheduled_time(shape, swapped, false), Error);
}

TEST(ScheduledTime, AStrategyFileKeepsTheChunks) {
  const CostModel c = cost(true);
  const PipelineResult r = megatron(c, 3, PipelineSchedule::kInterleaved);
  StrategyFile f{"gpt", c.machine(), 32, "megatron+pipeline", r.search.applied, r.search.strategy};
  f.pipeline_stages = r.stages, f.micro_batches = r.micro_batches, f.virtual_stages = r.virtual_stages;
  f.schedule = PipelineSchedule::kInterleaved, f.recipe = c.recipe(), f.chunks = r.stage;
  const std::string text = strategy_to_json(f);
  const StrategyFile back = strategy_from_json(text, "s.json");
  ASSERT_EQ(back.chunks.size(), r.stage.size());
  const ScheduledTime a = scheduled_time(*pipeline_shape(back), back.chunks, true);
  EXPECT_NEAR(a.time, r.search.strategy.estimate.time, 1e-9 * a.time);
  EXPECT_GT(back.chunks[0].param_gathers.size(), 0u);
  EXPECT_EQ(back.chunks[0].param_gathers[0].devices, r.stage[0].param_gathers[0].devices);

  // Corrupted: each an error naming the field.
  auto refused = [&](const std::function<void(nlohmann::json&)>& spoil, const std::string& field) {
    nlohmann::json j = nlohmann::json::parse(text);
    spoil(j);
    try {
      strategy_from_json(j.dump(), "s.json");
      ADD_FAILURE() << "accepted, expected an error naming " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("s.json: " + field), std::string::npos) << e.what();
    }
  };
  refused([](nlohmann::json& j) { j["pipeline"]["chunks"][1]["backward"] = -1.0; }, "pipeline.chunks[1].backward");
  refused([](nlohmann::json& j) { j["pipeline"]["chunks"][0].erase("forward"); }, "pipeline.chunks[0].forward");
  refused([](nlohmann::json& j) { j["pipeline"]["chunks"][2]["stage"] = 1; }, "pipeline.chunks");
  refused([](nlohmann::json& j) { j["pipeline"]["chunks"].erase(0); }, "pipeline.chunks");
  refused([](nlohmann::json& j) { j["pipeline"]["chunks"][0]["gathers"][0]["devices"] = "all"; }, "pipeline.chunks[0].gathers[0].devices");
  refused([](nlohmann::json& j) { j["pipeline"]["chunks"] = 3; }, "pipeline.chunks");
}

}  // namespace
}  // namespace pcgx::search
