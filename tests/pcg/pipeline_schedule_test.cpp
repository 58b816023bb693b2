// Pipeline schedules' programs: every step once, no deadlock, the
// activations in flight the cost model's memory model assumes
// (search/pipeline.h), and deadlocks found and named.
#include "pcgx/pcg/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "pcgx/pcg/error.h"

namespace pcgx {
namespace {

std::vector<PipelineShape> shapes() {
  std::vector<PipelineShape> out;
  for (int64_t S : {1, 2, 3, 4, 8})
    for (int64_t M : {1, 2, 3, 4, 8, 16}) {
      out.push_back({S, M, 1, PipelineSchedule::kGPipe});
      out.push_back({S, M, 1, PipelineSchedule::k1F1B});
      for (int64_t v : {2, 3, 4}) {
        if (M % S == 0) out.push_back({S, M, v, PipelineSchedule::kInterleaved});
        out.push_back({S, M, v, PipelineSchedule::kGPipe});  // any M: micro-batch by micro-batch
      }
    }
  return out;
}

std::string label(const PipelineShape& p) {
  return std::string(name(p.schedule)) + " S=" + std::to_string(p.stages) + " M=" + std::to_string(p.micro_batches) +
         " v=" + std::to_string(p.virtual_stages);
}

TEST(PipelineSchedule, EveryStageRunsEachOfItsStepsOnceAndTheProgramsRunTogether) {
  for (const PipelineShape& p : shapes()) {
    SCOPED_TRACE(label(p));
    const auto programs = stage_programs(p);
    ASSERT_EQ(static_cast<int64_t>(programs.size()), p.stages);
    for (int64_t s = 0; s < p.stages; ++s) {
      const auto& prog = programs[static_cast<size_t>(s)];
      EXPECT_EQ(static_cast<int64_t>(prog.size()), 2 * p.micro_batches * p.virtual_stages);
      std::set<std::tuple<bool, int64_t, int64_t>> seen;
      for (const PipelineStep& x : prog) {
        EXPECT_EQ(x.chunk % p.stages, s);
        EXPECT_TRUE(seen.insert({x.backward, x.micro_batch, x.chunk}).second) << describe(x);
      }
      // A chunk's backwards run in ascending micro-batch order in every
      // schedule (the gradients add up in one order).
      for (int64_t c = s; c < p.chunks(); c += p.stages) {
        int64_t last = -1;
        for (const PipelineStep& x : prog)
          if (x.backward && x.chunk == c) {
            EXPECT_GT(x.micro_batch, last);
            last = x.micro_batch;
          }
      }
    }
    const std::vector<ScheduledStep> order = run_order(p, programs);
    EXPECT_EQ(static_cast<int64_t>(order.size()), 2 * p.micro_batches * p.chunks());
  }
}

TEST(PipelineSchedule, InFlightActivationsAreWhatTheMemoryModelCounts) {
  for (const PipelineShape& p : shapes()) {
    SCOPED_TRACE(label(p));
    const std::vector<int64_t> held = in_flight_chunks(stage_programs(p));
    const int64_t S = p.stages, M = p.micro_batches, v = p.virtual_stages;
    for (int64_t s = 0; s < S; ++s) {
      int64_t expect = M * v;  // gpipe
      if (p.schedule == PipelineSchedule::k1F1B) expect = std::min(S - s, M);
      if (p.schedule == PipelineSchedule::kInterleaved && M != S) expect = std::min(2 * (S - s - 1) + (v - 1) * S + 1, M * v);
      EXPECT_EQ(held[static_cast<size_t>(s)], expect) << "stage " << s;
    }
  }
}

TEST(PipelineSchedule, OneFOneBAlternatesAfterItsWarmUp) {
  const auto programs = stage_programs({4, 8, 1, PipelineSchedule::k1F1B});
  // Stage 1 of 4: two forwards, then F B F B ..., then two backwards.
  const auto& p = programs[1];
  ASSERT_EQ(p.size(), 16u);
  EXPECT_EQ(p[0], (PipelineStep{false, 0, 1}));
  EXPECT_EQ(p[1], (PipelineStep{false, 1, 1}));
  EXPECT_EQ(p[2], (PipelineStep{false, 2, 1}));
  EXPECT_EQ(p[3], (PipelineStep{true, 0, 1}));
  EXPECT_EQ(p[4], (PipelineStep{false, 3, 1}));
  EXPECT_EQ(p[5], (PipelineStep{true, 1, 1}));
  EXPECT_EQ(p[14], (PipelineStep{true, 6, 1}));
  EXPECT_EQ(p[15], (PipelineStep{true, 7, 1}));
  // The last stage alternates from the start.
  EXPECT_EQ(programs[3][0], (PipelineStep{false, 0, 3}));
  EXPECT_EQ(programs[3][1], (PipelineStep{true, 0, 3}));
}

TEST(PipelineSchedule, InterleavedRunsGroupsOfStageMicroBatchesThroughEachChunk) {
  // S = 2, v = 2, M = 4: stage 0 holds chunks 0 and 2.
  const auto programs = stage_programs({2, 4, 2, PipelineSchedule::kInterleaved});
  std::vector<PipelineStep> forwards;
  for (const PipelineStep& x : programs[0])
    if (!x.backward) forwards.push_back(x);
  const std::vector<PipelineStep> expect = {{false, 0, 0}, {false, 1, 0}, {false, 0, 2}, {false, 1, 2},
                                            {false, 2, 0}, {false, 3, 0}, {false, 2, 2}, {false, 3, 2}};
  EXPECT_EQ(forwards, expect);
  // Warm-up 2 (S - 0 - 1) + (v - 1) S = 4 forwards before the first backward,
  // which is the last chunk's.
  EXPECT_TRUE(programs[0][4].backward == false && programs[0][5].backward);
  EXPECT_EQ(programs[0][5], (PipelineStep{true, 0, 2}));
}

TEST(PipelineSchedule, ADeadlockIsFoundAndNamed) {
  const PipelineShape p{2, 1, 1, PipelineSchedule::k1F1B};
  std::vector<std::vector<PipelineStep>> programs = {{{true, 0, 0}, {false, 0, 0}}, {{false, 0, 1}, {true, 0, 1}}};
  try {
    run_order(p, programs);
    FAIL() << "no deadlock found";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlocks: stage 0 waits at the backward of micro-batch 0 through chunk 0 for the forward "
                                         "of micro-batch 0 through chunk 0"),
              std::string::npos)
        << e.what();
  }
  programs[0] = {{false, 0, 0}, {false, 0, 0}};
  EXPECT_THROW(run_order(p, programs), Error);  // a step twice, another never
  programs[0] = {{false, 0, 1}, {true, 0, 0}};
  EXPECT_THROW(run_order(p, programs), Error);  // a chunk of another stage
}

// Explicit schedules (a person's order, as a plan states it): written and
// read back as text; one that runs every step, each chunk's micro-batches
// in order, is what the stages run; a deadlock is refused with its cycle,
// stage by stage.
TEST(PipelineSchedule, ExplicitOrdersRunAsWrittenAndADeadlockPrintsItsCycle) {
  // Three forwards before the first backward on stage 0, then 1F1B.
  const std::string text = "# stage 0\nF0 F1 F2 B0 F3 B1 B2 B3\n\nF0 B0 F1 B1 F2 B2 F3 B3  # stage 1\n";
  const auto programs = parse_pipeline_programs(text, "order.txt");
  ASSERT_EQ(programs.size(), 2u);
  EXPECT_EQ(programs[0][3], (PipelineStep{true, 0, 0}));
  EXPECT_EQ(programs[1][0], (PipelineStep{false, 0, 1}));
  EXPECT_EQ(parse_pipeline_programs(format_pipeline_programs(programs), "again"), programs);
  PipelineShape p{2, 4, 1, PipelineSchedule::kExplicit, programs};
  EXPECT_NO_THROW(check(p));
  EXPECT_EQ(stage_programs(p), programs);
  EXPECT_EQ(in_flight_chunks(programs), (std::vector<int64_t>{3, 1}));
  // The generated schedules, written out and read back, are valid explicit ones.
  for (PipelineSchedule k : {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    const auto generated = stage_programs({2, 4, 1, k});
    EXPECT_NO_THROW(check({2, 4, 1, PipelineSchedule::kExplicit, parse_pipeline_programs(format_pipeline_programs(generated), "g")}));
  }
  // Stage 0 runs a backward before stage 1 can: stage 1 waits for a
  // forward stage 0 has not run.
  p.programs = parse_pipeline_programs("F0 B0 F1 B1 F2 B2 F3 B3\nF0 F1 B0 B1 F2 F3 B2 B3\n", "dead.txt");
  try {
    check(p);
    FAIL() << "no deadlock found";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "pipeline schedule deadlocks: stage 0 waits at the backward of micro-batch 0 through chunk 0 for the backward of micro-batch 0 "
              "through chunk 1 -> stage 1 waits at the forward of micro-batch 1 through chunk 1 for the forward of micro-batch 1 through "
              "chunk 0 -> stage 0");
  }
  // A chunk's micro-batches out of order, a missing stage, a bad token.
  p.programs = parse_pipeline_programs("F1 F0 F2 B0 F3 B1 B2 B3\nF0 B0 F1 B1 F2 B2 F3 B3\n", "o");
  EXPECT_THROW(check(p), Error);
  p.programs.pop_back();
  EXPECT_THROW(check(p), Error);
  try {
    parse_pipeline_programs("F0 F1\nF0 X1\n", "bad.txt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "bad.txt: line 2: 'X1': expected F<micro-batch> or B<micro-batch>, optionally @<chunk>");
  }
  EXPECT_THROW(parse_pipeline_programs("# nothing\n", "empty.txt"), Error);
}

// The makespan of the programs run together, with every chunk alike and
// no transfer, is the closed form of search/pipeline.h for 1f1b and gpipe,
// (M + S - 1)(f + b), and for interleaved (M + (S - 1)/v)(f + b) with f
// and b a stage's over its v chunks. Transfers sit between chunks (a
// 2-stage 1f1b with one: each micro-batch's first forward and last
// backward wait for it); a written order takes its own time (three
// forwards first on 2 stages: no shorter than 1f1b here).
TEST(PipelineSchedule, MakespanIsTheClosedFormForEveryStageAlike) {
  for (const int64_t S : {1, 2, 4})
    for (const int64_t v : {1, 2})
      for (const int64_t M : {4, 8}) {
        if (v > 1 && S == 1) continue;
        for (const PipelineSchedule k : kPipelineSchedules) {
          if ((k == PipelineSchedule::kInterleaved) != (v > 1)) continue;
          const PipelineShape p{S, M, v, k};
          SCOPED_TRACE(std::string(name(k)) + " S " + std::to_string(S) + " v " + std::to_string(v) + " M " + std::to_string(M));
          const auto C = static_cast<size_t>(p.chunks());
          const double f = 1.0 / static_cast<double>(v), b = 2.0 / static_cast<double>(v);
          const std::vector<double> fwd(C, f), bwd(C, b), none(C, 0.0);
          const double want = (static_cast<double>(M) + static_cast<double>(S - 1) / static_cast<double>(v)) * 3.0;
          EXPECT_NEAR(schedule_makespan(p, stage_programs(p), fwd, bwd, none), want, 1e-9);
        }
      }
  const PipelineShape two{2, 4, 1, PipelineSchedule::k1F1B};
  const std::vector<double> fwd(2, 1.0), bwd(2, 2.0), none(2, 0.0), tau{0.5, 0.0};
  const double plain = schedule_makespan(two, stage_programs(two), fwd, bwd, none);
  EXPECT_DOUBLE_EQ(plain, 15.0);
  EXPECT_GT(schedule_makespan(two, stage_programs(two), fwd, bwd, tau), plain);
  EXPECT_LE(schedule_makespan(two, stage_programs(two), fwd, bwd, tau), plain + 2 * 4 * 0.5);
  const auto written = parse_pipeline_programs("F0 F1 F2 B0 F3 B1 B2 B3\nF0 B0 F1 B1 F2 B2 F3 B3\n", "t");
  const PipelineShape explicit_two{2, 4, 1, PipelineSchedule::kExplicit, written};
  EXPECT_GE(schedule_makespan(explicit_two, written, fwd, bwd, none), plain);
  EXPECT_THROW(schedule_makespan(two, stage_programs(two), std::vector<double>(3, 1.0), bwd, none), Error);
}

// A forward waiting (ZeRO's weights gathered beside the forward pass):
// 2 stages, 1f1b, 4 micro-batches, f = 1, b = 2 (15 plain). The first
// stage's first forward waiting 1 s shifts everything: 16. The second
// stage's, ready at 1 s, waiting until 2.5 s: its steps, back to back
// from then, end at 14.5 and the first stage's last backward at 16.5.
// Waiting until 0.5 s: no wait, the first micro-batch takes longer to
// reach it. Asked for every forward, in run order, with its stage and
// when it is ready.
TEST(PipelineSchedule, AForwardWaitsAsTold) {
  const PipelineShape two{2, 4, 1, PipelineSchedule::k1F1B};
  const std::vector<double> fwd(2, 1.0), bwd(2, 2.0), none(2, 0.0);
  std::vector<std::pair<int64_t, double>> asked;  // (stage, start) of the first micro-batch's forwards
  int64_t forwards = 0;
  auto until = [&](int64_t chunk, double at, double time) {
    return [&, chunk, at, time](int64_t stage, const PipelineStep& x, double start) {
      ++forwards;
      EXPECT_EQ(stage, x.chunk);
      if (x.micro_batch != 0) return 0.0;
      asked.emplace_back(stage, start);
      return x.chunk == chunk ? std::max(0.0, at - start) + time : 0.0;
    };
  };
  EXPECT_DOUBLE_EQ(schedule_makespan(two, stage_programs(two), fwd, bwd, none, until(0, 0.0, 1.0)), 16.0);
  EXPECT_EQ(asked, (std::vector<std::pair<int64_t, double>>{{0, 0.0}, {1, 2.0}}));
  EXPECT_EQ(forwards, 8);
  EXPECT_DOUBLE_EQ(schedule_makespan(two, stage_programs(two), fwd, bwd, none, until(1, 2.5, 0.0)), 16.5);
  EXPECT_DOUBLE_EQ(schedule_makespan(two, stage_programs(two), fwd, bwd, none, until(1, 0.5, 0.0)), 15.0);
  EXPECT_DOUBLE_EQ(schedule_makespan(two, stage_programs(two), fwd, bwd, none, {}), 15.0);
}

TEST(PipelineSchedule, ImpossibleShapesAreRefused) {
  EXPECT_THROW(stage_programs({0, 4, 1, PipelineSchedule::k1F1B}), Error);
  EXPECT_THROW(stage_programs({2, 0, 1, PipelineSchedule::k1F1B}), Error);
  EXPECT_THROW(stage_programs({2, 4, 2, PipelineSchedule::k1F1B}), Error);
  EXPECT_THROW(stage_programs({4, 6, 2, PipelineSchedule::kInterleaved}), Error);
  EXPECT_THROW(stage_programs({4, 8, 1, PipelineSchedule::kInterleaved}), Error);
  EXPECT_EQ(pipeline_schedule_named("1f1b"), PipelineSchedule::k1F1B);
  EXPECT_EQ(pipeline_schedule_named("interleaved"), PipelineSchedule::kInterleaved);
  EXPECT_EQ(pipeline_schedule_named("gpipe"), PipelineSchedule::kGPipe);
  EXPECT_FALSE(pipeline_schedule_named("zb-h1"));
}

}  // namespace
}  // namespace pcgx
