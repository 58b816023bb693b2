// The task-graph timeline (search/timeline.h): hand-built graphs whose
// timelines are worked out by hand, and delta simulation against full
// simulation on random graphs and random changes.
#include "pcgx/search/timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "pcgx/pcg/error.h"

namespace pcgx::search {
namespace {

// Resources of the hand-built cases.
constexpr ResourceId kGpu0 = 0, kGpu1 = 1, kLink = 2, kSync0 = 3;

// A timeline holds at most its limit of tasks (kMaxTimelineTasks unless
// given): the next is refused with TooManyTasks, which the optimize
// report and the final ranking catch (the plan's prediction then stands
// alone), instead of a simulation exhausting the machine's memory.
TEST(Timeline, RefusesTasksPastItsLimit) {
  Timeline tl(1, 3);
  for (uint64_t k = 0; k < 3; ++k) tl.add(k, {}, 1.0, {0});
  EXPECT_THROW(tl.add(3, {}, 1.0, {0}), TooManyTasks);
  EXPECT_EQ(tl.size(), 3u);
  tl.simulate_full();
  EXPECT_DOUBLE_EQ(tl.task(2).end, 3.0);
}

// A builder that knows how many tasks it will add at least is refused
// before it builds any of them (Simulator: each task's transfers and
// passes), with the same error, and the timeline is left as it was.
TEST(Timeline, RefusesAPlanPastItsLimitBeforeItIsBuilt) {
  Timeline tl(1, 5);
  EXPECT_NO_THROW(tl.refuse_past_limit(5));
  EXPECT_THROW(tl.refuse_past_limit(6), TooManyTasks);
  for (uint64_t k = 0; k < 2; ++k) tl.add(k, {}, 1.0, {0});
  EXPECT_NO_THROW(tl.refuse_past_limit(3));
  EXPECT_THROW(tl.refuse_past_limit(4), TooManyTasks);
  EXPECT_EQ(tl.size(), 2u);
}

TEST(Timeline, TasksOnDifferentResourcesOverlap) {
  Timeline tl;
  const TaskId a = tl.add(1, {}, 2.0, {kGpu0});
  const TaskId b = tl.add(2, {}, 3.0, {kGpu1});
  tl.simulate_full();
  EXPECT_EQ(tl.task(a).start, 0.0);
  EXPECT_EQ(tl.task(b).start, 0.0);
  EXPECT_EQ(tl.makespan(), 3.0);
}

TEST(Timeline, TransfersThroughOnePortContend) {
  // Two messages leave device 0 at once through its one port: the second
  // waits for the first, although neither depends on the other.
  Timeline tl;
  const TaskId x = tl.add(1, {}, 1.5, {kLink});
  const TaskId y = tl.add(2, {}, 1.0, {kLink});
  tl.simulate_full();
  EXPECT_EQ(tl.task(x).end, 1.5);
  EXPECT_EQ(tl.task(y).start, 1.5);
  EXPECT_EQ(tl.makespan(), 2.5);
}

TEST(Timeline, CommunicationOverlapsIndependentCompute) {
  // a (gpu0, 2) -> send (link, 3) -> c (gpu1, 1); b (gpu0, 4) runs while the
  // message travels; c waits for the message, not for b.
  Timeline tl;
  const TaskId a = tl.add(1, {}, 2.0, {kGpu0});
  const TaskId send = tl.add(2, {a}, 3.0, {kLink});
  const TaskId b = tl.add(3, {}, 4.0, {kGpu0});
  const TaskId c = tl.add(4, {send}, 1.0, {kGpu1});
  tl.simulate_full();
  EXPECT_EQ(tl.task(b).start, 2.0);
  EXPECT_EQ(tl.task(b).end, 6.0);
  EXPECT_EQ(tl.task(c).start, 5.0);
  EXPECT_EQ(tl.makespan(), 6.0);
  // The critical path is a then b, on gpu0.
  EXPECT_EQ(tl.critical_path(), (std::vector<TaskId>{a, b}));
}

TEST(Timeline, ABucketThatCannotHideIsExposed) {
  // Backward: b1 (0-5), b2 (5-10) on gpu0. Bucket 1 (3 s) waits for b1 and
  // hides behind b2; bucket 2 (4 s) waits for b2, the last gradient, and
  // nothing is left to hide it: the iteration ends at 14.
  Timeline tl;
  const TaskId b1 = tl.add(1, {}, 5.0, {kGpu0});
  const TaskId s1 = tl.add(2, {b1}, 3.0, {kSync0, kLink});
  const TaskId b2 = tl.add(3, {}, 5.0, {kGpu0});
  const TaskId s2 = tl.add(4, {b2}, 4.0, {kSync0, kLink});
  const TaskId update = tl.add(5, {s1, s2}, 0.5, {kGpu0});
  tl.simulate_full();
  EXPECT_EQ(tl.task(s1).start, 5.0);
  EXPECT_EQ(tl.task(s1).end, 8.0);
  EXPECT_EQ(tl.task(s2).start, 10.0);
  EXPECT_EQ(tl.task(update).start, 14.0);
  EXPECT_EQ(tl.makespan(), 14.5);
  EXPECT_EQ(tl.critical_path(), (std::vector<TaskId>{b1, b2, s2, update}));
}

TEST(Timeline, ABucketThatFollowsAnotherOnItsChannelWaits) {
  // Two buckets ready at once share the sync channel: they run back to back.
  Timeline tl;
  const TaskId b = tl.add(1, {}, 1.0, {kGpu0});
  const TaskId s1 = tl.add(2, {b}, 2.0, {kSync0});
  const TaskId s2 = tl.add(3, {b}, 2.0, {kSync0});
  tl.simulate_full();
  EXPECT_EQ(tl.task(s1).end, 3.0);
  EXPECT_EQ(tl.task(s2).start, 3.0);
}

TEST(Timeline, RejectsAPredecessorThatDoesNotComeFirst) {
  Timeline tl;
  tl.add(5, {}, 1.0, {kGpu0});
  EXPECT_THROW(tl.add(3, {0}, 1.0, {kGpu0}), Error);
  EXPECT_THROW(tl.add(5, {}, 1.0, {kGpu0}), Error);
  EXPECT_EQ(tl.size(), 1u);
}

TEST(Timeline, ABackgroundTaskRunsInTheGapsTheForegroundLeaves) {
  // The link carries a (0-2) and, after the compute g (0-3), b (3-5). A
  // bucket of 2 s holding the link in the background, issued first, runs
  // 2-3 and 5-6: it delays neither a nor b, and ends at 6.
  Timeline tl;
  const TaskId bucket = tl.add(0, {}, 2.0, {kSync0}, {kLink});
  const TaskId a = tl.add(1, {}, 2.0, {kLink});
  const TaskId g = tl.add(2, {}, 3.0, {kGpu0});
  const TaskId b = tl.add(3, {g}, 2.0, {kLink});
  tl.simulate_full();
  EXPECT_EQ(tl.task(a).start, 0.0);
  EXPECT_EQ(tl.task(b).start, 3.0);
  EXPECT_EQ(tl.task(b).end, 5.0);
  EXPECT_EQ(tl.task(bucket).start, 0.0);
  EXPECT_EQ(tl.task(bucket).end, 6.0);
  // Held in the foreground instead, it goes first and delays a by 2 s.
  tl.set_cost(bucket, 2.0, {kSync0, kLink});
  tl.simulate_delta();
  EXPECT_EQ(tl.task(bucket).end, 2.0);
  EXPECT_EQ(tl.task(a).start, 2.0);
}

TEST(Timeline, BackgroundTasksOnOneResourceRunOneAtATime) {
  // Two buckets on different channels share the link in the background:
  // the second starts when the first ends; the update waits for both.
  Timeline tl;
  const TaskId fg = tl.add(1, {}, 1.0, {kLink});
  const TaskId x = tl.add(2, {}, 1.5, {kSync0}, {kLink});
  const TaskId y = tl.add(3, {}, 1.0, {kSync0 + 1}, {kLink});
  const TaskId update = tl.add(4, {x, y}, 0.5, {kGpu0});
  tl.simulate_full();
  EXPECT_EQ(tl.task(fg).end, 1.0);
  EXPECT_EQ(tl.task(x).start, 0.0);
  EXPECT_EQ(tl.task(x).end, 2.5);
  EXPECT_EQ(tl.task(y).start, 2.5);
  EXPECT_EQ(tl.task(y).end, 3.5);
  EXPECT_EQ(tl.task(update).start, 3.5);
  EXPECT_EQ(tl.binding(y), x);
}

TEST(Timeline, RejectsAResourceHeldBothWays) {
  Timeline tl;
  EXPECT_THROW(tl.add(1, {}, 1.0, {kLink}, {kLink}), Error);
  EXPECT_EQ(tl.size(), 0u);
  const TaskId t = tl.add(1, {}, 1.0, {kSync0}, {kLink});
  EXPECT_THROW(tl.set_cost(t, 1.0, {kSync0, kLink}, {kLink}), Error);
  EXPECT_EQ(tl.task(t).background, std::vector<ResourceId>{kLink});
}

// Resources [from, to), each with probability 1/4.
std::vector<ResourceId> random_resources(std::mt19937_64& rng, int from, int to) {
  std::vector<ResourceId> res;
  for (ResourceId r = from; r < to; ++r)
    if (rng() % 4 == 0) res.push_back(r);
  return res;
}

// A task's random resources out of `resources`; a background task (as a
// bucket, with a channel and links) holds the first half in the foreground
// and the second half in the background.
void random_holding(std::mt19937_64& rng, int resources, bool background, std::vector<ResourceId>& fg, std::vector<ResourceId>& bg) {
  if (!background) {
    fg = random_resources(rng, 0, resources), bg.clear();
    return;
  }
  fg = random_resources(rng, 0, resources / 2), bg = random_resources(rng, resources / 2, resources);
  if (bg.empty()) bg.push_back(resources - 1);
}

// A random layered task graph over `resources` resources; with
// `background`, a fifth of the tasks hold some in the background.
Timeline random_graph(std::mt19937_64& rng, int tasks, int resources, bool background = false) {
  Timeline tl;
  std::uniform_real_distribution<double> dur(0.0, 2.0);
  for (int i = 0; i < tasks; ++i) {
    std::vector<TaskId> preds;
    for (int k = 0; k < 3 && i > 0; ++k)
      if (rng() % 2) preds.push_back(static_cast<TaskId>(rng() % static_cast<uint64_t>(i)));
    std::vector<ResourceId> res, behind;
    random_holding(rng, resources, background && rng() % 5 == 0, res, behind);
    tl.add(static_cast<uint64_t>(10 * i), preds, rng() % 5 == 0 ? 0.0 : dur(rng), res, behind);
  }
  return tl;
}

Timeline full_copy(const Timeline& tl) {
  Timeline full;
  for (const TimedTask& t : tl.tasks()) full.add(t.order, t.preds, t.duration, t.resources, t.background);
  full.simulate_full();
  return full;
}

void expect_same_timeline(const Timeline& delta, const Timeline& full) {
  ASSERT_EQ(delta.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) {
    ASSERT_EQ(delta.task(static_cast<TaskId>(i)).start, full.task(static_cast<TaskId>(i)).start) << "task " << i;
    ASSERT_EQ(delta.task(static_cast<TaskId>(i)).end, full.task(static_cast<TaskId>(i)).end) << "task " << i;
  }
}

void delta_equals_full(bool background) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> dur(0.0, 2.0);
  int64_t visited = 0, changes = 0;
  for (int graph = 0; graph < 20; ++graph) {
    Timeline tl = random_graph(rng, 200, 6, background);
    tl.simulate_full();
    for (int step = 0; step < 50; ++step, ++changes) {
      // Change a few tasks' durations and resources, as a new operator
      // configuration does.
      const int k = 1 + static_cast<int>(rng() % 3);
      for (int j = 0; j < k; ++j) {
        const auto t = static_cast<TaskId>(rng() % tl.size());
        std::vector<ResourceId> res = tl.task(t).resources, behind = tl.task(t).background;
        if (rng() % 2) random_holding(rng, 6, background && rng() % 3 == 0, res, behind);
        tl.set_cost(t, rng() % 3 == 0 ? tl.task(t).duration : dur(rng), res, behind);
      }
      tl.simulate_delta();
      visited += tl.recomputed();
      const Timeline full = full_copy(tl);
      expect_same_timeline(tl, full);
      ASSERT_EQ(tl.makespan(), full.makespan());
    }
  }
  // Delta simulation visits a fraction of the tasks.
  EXPECT_LT(visited, changes * 200);
}

TEST(Timeline, DeltaSimulationEqualsFullSimulation) { delta_equals_full(false); }

TEST(Timeline, DeltaSimulationEqualsFullSimulationWithBackgroundTasks) { delta_equals_full(true); }

// As the simulator rebuilds its buckets: the tail truncated and added
// again, some of it holding links in the background.
TEST(Timeline, TruncateAndRebuildTheTailEqualsFullSimulation) {
  std::mt19937_64 rng(5);
  Timeline tl = random_graph(rng, 120, 4);
  tl.simulate_full();
  for (int step = 0; step < 30; ++step) {
    tl.truncate(100);
    const int extra = static_cast<int>(rng() % 30);
    for (int i = 0; i < extra; ++i) {
      std::vector<TaskId> preds{static_cast<TaskId>(rng() % 100)};
      const auto r = static_cast<ResourceId>(rng() % 4);
      std::vector<ResourceId> behind;
      if (rng() % 2) behind.push_back(4 + static_cast<ResourceId>(rng() % 2));
      tl.add(static_cast<uint64_t>(2000 + i), preds, 0.5 + static_cast<double>(rng() % 4), {r}, behind);
    }
    // The links held in the background carry foreground work too.
    if (step % 3 == 0) tl.set_cost(static_cast<TaskId>(rng() % 100), 1.0, {4 + static_cast<ResourceId>(rng() % 2)});
    tl.simulate_delta();
    expect_same_timeline(tl, full_copy(tl));
  }
}

}  // namespace
}  // namespace pcgx::search
