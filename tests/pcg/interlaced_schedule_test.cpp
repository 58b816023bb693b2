// Interlaced pipelines (SuperScaler's, pcg/pipeline_schedule.h): chunks
// every stage runs together. Their steps are joint: in every stage's
// program, in one order, run once by run_order; the generated schedules
// put each where it is needed, and a written order that puts them in
// different orders on two stages deadlocks, the wait printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_schedule.h"

namespace pcgx {
namespace {

std::vector<PipelineShape> interlaced_shapes() {
  std::vector<PipelineShape> out;
  for (const int64_t S : {2, 3, 4})
    for (const int64_t M : {1, 2, 4, 8})
      for (const int64_t v : {1, 2}) {
        const int64_t C = S * v;
        for (const std::vector<int64_t>& joint : std::vector<std::vector<int64_t>>{{0}, {C}, {0, C + 1}, {1}, {0, 2, C + 2}}) {
          std::vector<PipelineSchedule> kinds = {PipelineSchedule::kGPipe};
          if (v == 1) kinds.push_back(PipelineSchedule::k1F1B);
          for (const PipelineSchedule k : kinds) out.push_back({S, M, v, k, {}, joint});
        }
      }
  return out;
}

std::string label(const PipelineShape& p) {
  std::string joint;
  for (const int64_t c : p.interlaced) joint += " " + std::to_string(c);
  return std::string(name(p.schedule)) + " S=" + std::to_string(p.stages) + " M=" + std::to_string(p.micro_batches) +
         " v=" + std::to_string(p.virtual_stages) + " interlaced" + joint;
}

TEST(InterlacedSchedule, StagedChunksSkipTheInterlacedOnes) {
  const PipelineShape p{2, 4, 1, PipelineSchedule::k1F1B, {}, {0, 3}};
  EXPECT_EQ(p.chunks(), 4);
  EXPECT_EQ(p.stage_of(0), -1);
  EXPECT_EQ(p.stage_of(1), 0);
  EXPECT_EQ(p.stage_of(2), 1);
  EXPECT_EQ(p.stage_of(3), -1);
  EXPECT_TRUE(p.runs_on(0, 1) && p.runs_on(3, 0) && p.runs_on(1, 0));
  EXPECT_FALSE(p.runs_on(1, 1) || p.runs_on(2, 0));
}

TEST(InterlacedSchedule, EveryStageRunsEveryJointStepInOneOrderAndEachOwnStepOnce) {
  for (const PipelineShape& p : interlaced_shapes()) {
    SCOPED_TRACE(label(p));
    const auto programs = stage_programs(p);
    ASSERT_EQ(static_cast<int64_t>(programs.size()), p.stages);
    const int64_t M = p.micro_batches, I = static_cast<int64_t>(p.interlaced.size());
    std::vector<PipelineStep> joint_order;
    for (int64_t s = 0; s < p.stages; ++s) {
      const auto& prog = programs[static_cast<size_t>(s)];
      EXPECT_EQ(static_cast<int64_t>(prog.size()), 2 * M * (p.virtual_stages + I));
      std::set<std::tuple<bool, int64_t, int64_t>> seen;
      std::vector<PipelineStep> joint;
      for (const PipelineStep& x : prog) {
        EXPECT_TRUE(p.runs_on(x.chunk, s)) << describe(x);
        EXPECT_TRUE(seen.insert({x.backward, x.micro_batch, x.chunk}).second) << describe(x);
        if (p.is_interlaced(x.chunk)) joint.push_back(x);
      }
      if (s == 0) joint_order = joint;
      EXPECT_EQ(joint, joint_order) << "stage " << s;
    }
    const std::vector<ScheduledStep> order = run_order(p, programs);
    EXPECT_EQ(static_cast<int64_t>(order.size()), 2 * M * p.chunks());
    // What the CPU runtime needs where a stage runs two adjacent chunks.
    EXPECT_NO_THROW(check_paired_backwards(p, programs));
    EXPECT_EQ(std::count_if(order.begin(), order.end(), [](const ScheduledStep& x) { return x.stage < 0; }), 2 * M * I);
    for (const ScheduledStep& x : order) EXPECT_EQ(x.stage < 0, p.is_interlaced(x.step.chunk));
  }
}

// A joint chunk before the staged ones runs each micro-batch just before
// the first stage needs it, and holds no more of them than that stage; one
// after the last runs a micro-batch's backward right after its forward.
TEST(InterlacedSchedule, JointStepsGoInWhereTheyAreNeeded) {
  const PipelineShape p{4, 8, 1, PipelineSchedule::k1F1B, {}, {0, 5}};
  const auto programs = stage_programs(p);
  const auto& first = programs[0];
  for (int64_t m = 0; m < 8; ++m) {
    const auto f = std::find(first.begin(), first.end(), PipelineStep{false, m, 1});
    ASSERT_NE(f, first.begin());
    EXPECT_EQ(*std::prev(f), (PipelineStep{false, m, 0}));
    const auto& last = programs[3];
    const auto h = std::find(last.begin(), last.end(), PipelineStep{false, m, 5});
    ASSERT_NE(h, last.end());
    EXPECT_EQ(*std::next(h), (PipelineStep{true, m, 5}));
  }
  const auto held = activation_sets_held(p, programs);
  const PipelineShape staged{4, 8, 1, PipelineSchedule::k1F1B};
  const auto staged_held = in_flight_chunks(stage_programs(staged));
  for (int64_t s = 0; s < 4; ++s) {
    const auto& h = held[static_cast<size_t>(s)];
    EXPECT_EQ(h[0], staged_held[0]) << "stage " << s;  // the first stage's
    EXPECT_EQ(h[5], 1) << "stage " << s;
    for (int64_t c = 1; c <= 4; ++c) EXPECT_EQ(h[static_cast<size_t>(c)], staged_held[static_cast<size_t>(s)]);
  }
}

// Every joint step holds every stage. Where a forward and a backward
// take one slot alike, the slots the joint steps were placed at are the
// time: the staged closed form, (M + S - 1)(f + b), plus every joint
// step's time. Otherwise a joint step is also a barrier (a stage may wait
// for another to end its step): never less than the busiest stage's work
// plus all joint work.
TEST(InterlacedSchedule, AJointStepHoldsEveryStage) {
  const PipelineShape p{2, 4, 1, PipelineSchedule::k1F1B, {}, {0, 3}};
  const auto programs = stage_programs(p);
  const std::vector<double> none(4, 0.0);
  EXPECT_DOUBLE_EQ(schedule_makespan(p, programs, std::vector<double>{0, 1, 1, 0}, std::vector<double>{0, 1, 1, 0}, none), (4 + 1) * 2.0);
  EXPECT_DOUBLE_EQ(schedule_makespan(p, programs, std::vector<double>{0.5, 1, 1, 0.25}, std::vector<double>{0.5, 1, 1, 0.25}, none),
                   (4 + 1) * 2.0 + 4 * (0.5 + 0.5 + 0.25 + 0.25));
  const std::vector<double> fwd{0.5, 1, 1, 0.25}, bwd{0.5, 2, 2, 0.25};
  EXPECT_GE(schedule_makespan(p, programs, fwd, bwd, none), 4 * 3.0 + 4 * (0.5 + 0.5 + 0.25 + 0.25));
}

TEST(InterlacedSchedule, WrittenOrdersAreCheckedAndADisagreementDeadlocks) {
  PipelineShape p{2, 2, 1, PipelineSchedule::kExplicit, {}, {0}};
  // Chunk 0 interlaced: stage 0 runs chunk 1, stage 1 chunk 2.
  p.programs = parse_pipeline_programs("F0@0 F0@1 F1@0 F1@1 B0@1 B0@0 B1@1 B1@0\n"
                                       "F0@0 F1@0 F0@2 B0@2 B0@0 F1@2 B1@2 B1@0\n",
                                       "ok.txt");
  EXPECT_NO_THROW(check(p));
  EXPECT_EQ(parse_pipeline_programs(format_pipeline_programs(p.programs), "again"), p.programs);
  // Stage 1 runs micro-batch 1's joint forward before micro-batch 0's.
  p.programs = parse_pipeline_programs("F0@0 F0@1 F1@0 F1@1 B0@1 B0@0 B1@1 B1@0\n"
                                       "F1@0 F0@0 F0@2 B0@2 B0@0 F1@2 B1@2 B1@0\n",
                                       "dead.txt");
  try {
    check(p);
    FAIL() << "no deadlock found";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ascending"), std::string::npos) << e.what();
  }
  // Two joint steps in opposite orders on the two stages: stage 0 runs
  // micro-batch 1's embedding before micro-batch 0's head, stage 1 after.
  PipelineShape q{2, 2, 1, PipelineSchedule::kExplicit, {}, {0, 3}};
  q.programs = parse_pipeline_programs("F0@0 F0@1 F1@0 F1@1 F0@3 B0@3 B0@1 B0@0 F1@3 B1@3 B1@1 B1@0\n"
                                       "F0@0 F0@2 F0@3 B0@3 F1@0 B0@2 B0@0 F1@2 F1@3 B1@3 B1@2 B1@0\n",
                                       "crossed.txt");
  try {
    check(q);
    FAIL() << "no deadlock found";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "pipeline schedule deadlocks: stage 0 waits at the forward of micro-batch 1 through chunk 0 for stage 1 to run it too -> "
              "stage 1 waits at the forward of micro-batch 0 through chunk 3 for stage 0 to run it too -> stage 0");
  }
  // A joint step one stage leaves out.
  q.programs = parse_pipeline_programs("F0@0 F0@1 F1@0 F1@1 F0@3 B0@3 B0@1 B0@0 F1@3 B1@3 B1@1 B1@0\n"
                                       "F0@0 F0@2 F1@0 F0@3 B0@3 B0@2 B0@0 F1@2 F1@3 B1@3 B1@2\n",
                                       "short.txt");
  try {
    check(q);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("which stage 1 never runs"), std::string::npos) << e.what();
  }
}

// The CPU runtime keeps the gradient a stage's later chunk leaves for its
// earlier one beside it: another micro-batch's backward between is refused.
TEST(InterlacedSchedule, ABackwardBetweenAStagesAdjacentChunksIsNamed) {
  PipelineShape p{2, 2, 1, PipelineSchedule::kExplicit, {}, {0}};
  p.programs = parse_pipeline_programs("F0@0 F0@1 F1@0 F1@1 B0@1 B1@1 B0@0 B1@0\n"
                                       "F0@0 F0@2 F1@0 B0@2 F1@2 B1@2 B0@0 B1@0\n",
                                       "between.txt");
  EXPECT_NO_THROW(check(p));
  try {
    check_paired_backwards(p, p.programs);
    FAIL() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "pipeline: stage 0 runs the backward of micro-batch 1 through chunk 1 after the backward of micro-batch 0 through "
                                     "chunk 1; the runtime runs a backward through chunk 0 right after the same micro-batch's through chunk 1 on "
                                     "a stage running both (no other backward through either between)");
  }
  // Without interlaced chunks nothing is asked (S = 1 with v chunks runs them all on stage 0).
  EXPECT_NO_THROW(check_paired_backwards(PipelineShape{1, 2, 2, PipelineSchedule::kGPipe}, stage_programs({1, 2, 2, PipelineSchedule::kGPipe})));
}

TEST(InterlacedSchedule, ImpossibleInterlacedChunksAreRefused) {
  EXPECT_THROW(check(PipelineShape{1, 4, 1, PipelineSchedule::k1F1B, {}, {0}}), Error);   // one stage
  EXPECT_THROW(check(PipelineShape{2, 4, 1, PipelineSchedule::k1F1B, {}, {4}}), Error);   // past the 3 chunks
  EXPECT_THROW(check(PipelineShape{2, 4, 1, PipelineSchedule::k1F1B, {}, {2, 0}}), Error);  // not ascending
  EXPECT_THROW(check(PipelineShape{2, 4, 1, PipelineSchedule::k1F1B, {}, {-1}}), Error);
  EXPECT_THROW(check(PipelineShape{2, 4, 1, PipelineSchedule::k1F1B, {}, {0, 1}}), Error);  // side by side: one chunk
  EXPECT_THROW(check(PipelineShape{2, 4, 2, PipelineSchedule::kInterleaved, {}, {0}}), Error);  // not run yet
}

}  // namespace
}  // namespace pcgx
