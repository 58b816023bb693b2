// ZeRO stage 3's replay (gradient_sync.h's replay_sharded) worked by hand
// on the two-level toy machine: the gathers before use have a channel of
// their own, which the reduce-scatters never hold up (they yield the links
// to the gathers instead), and an operator's messages wait for a gather
// issued before them on a link level both cross.
#include <gtest/gtest.h>

#include <vector>

#include "pcgx/search/collectives.h"
#include "pcgx/search/gradient_sync.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

// A weight of `bytes` on the four devices of one node (link level 0 only),
// gathered before each use.
SyncGroup gathered(const Machine& m, double bytes, uint64_t key) {
  SyncGroup s{strided_group(m, 0, 1, 4), bytes, key};
  s.gathered_for_use = true;
  return s;
}

// Three operators, each gathering its weight (G) before its forward and
// its backward and reduce-scattering its gradient (R) once its backward is
// done; forward f = backward b = R + G/2 each. The third operator's bucket
// is ready as the first's backward gather is issued: that gather goes first
// on the links (R's bucket waits G) and arrives in time, so the compute
// never waits after the first gather, and the three buckets run back to
// back from t2 + G, t2 = G + 3f + b: exposed G (the first gather) + R (the
// buckets' run past the backward pass, 3R - (2b - G) with 2b = 2R + G).
// On one channel shared by both (before 2026-11-30) the gather queued
// behind the bucket and the last backward waited R + G - b = G/2 for it.
TEST(ShardedReplay, BucketsNeverHoldUpTheGathers) {
  const Machine m = two_level_machine();
  const CostModel cost(m, Efficiency{});
  std::vector<ShardedStep> ops(3);
  double G = 0, R = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const SyncGroup s = gathered(m, 4e6, 10 + i);
    G = cost.use_gather_time(s), R = cost.bucket_time(s.group, s.bytes);
    ops[i].gathers = true, ops[i].gather = G, ops[i].grads = {s};
  }
  ASSERT_GT(G, 0);
  ASSERT_GT(R, G / 2);  // so f = b >= G: every gather but the first arrives in time
  const double f = R + G / 2, b = R + G / 2;
  for (ShardedStep& op : ops) op.forward = f, op.backward = b;
  const SyncTimeline t = replay_sharded(cost, ops, 3 * f, 3 * b);
  EXPECT_EQ(t.buckets, 3);
  EXPECT_NEAR(t.total, 6 * G + 3 * R, 1e-15);
  EXPECT_NEAR(t.exposed, G + R, 1e-12 * (G + R));
}

// An operator that only sends messages (a layout change: f = its messages)
// after one that gathers: the two gathers issued at the start (the first
// operator's for its forward, then for its backward) run until 2G, so
// messages on link level 0, which the gathers cross, start at 2G, and the
// backward after them ends at 2G + m + b0: exposed 2G + R0 - f0. On the
// network level, which no gather crosses, they run at once; the backward
// then waits only for its gather, arrived at 2G: exposed G + R0.
TEST(ShardedReplay, MessagesWaitForTheGathersIssuedBeforeThemOnTheirLevel) {
  const Machine m = two_level_machine();
  const CostModel cost(m, Efficiency{});
  const SyncGroup s = gathered(m, 4e6, 10);
  const double G = cost.use_gather_time(s), R = cost.bucket_time(s.group, s.bytes);
  ASSERT_GT(G, 0);
  const double f0 = G / 2, b0 = G, messages = G;
  std::vector<ShardedStep> ops(2);
  ops[0].forward = f0, ops[0].backward = b0, ops[0].gathers = true, ops[0].gather = G, ops[0].grads = {s};
  ops[1].forward = messages, ops[1].messages_forward = messages;
  for (const uint32_t levels : {1u, 2u}) {
    SCOPED_TRACE(levels);
    ops[1].levels = levels;
    const SyncTimeline t = replay_sharded(cost, ops, f0 + messages, b0);
    EXPECT_NEAR(t.exposed, levels == 1u ? 2 * G + R - f0 : G + R, 1e-12 * (G + R));
  }
}

}  // namespace
}  // namespace pcgx::search
