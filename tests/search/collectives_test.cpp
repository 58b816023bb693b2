// Every collective formula (collectives.h) on hand-worked cases over two
// link levels, and the bucket replay (gradient_sync.h).
#include <gtest/gtest.h>

#include "pcgx/pcg/error.h"
#include "pcgx/search/collectives.h"
#include "search/toy_machines.h"
#include "pcgx/search/gradient_sync.h"

namespace pcgx::search {
namespace {

Machine two_level() { return two_level_machine(); }

TEST(Collectives, GroupShapeCountsTheLevels) {
  const Machine m = two_level();
  const GroupShape node = strided_group(m, 0, 1, 4);
  EXPECT_EQ(node.size, 4);
  EXPECT_EQ(node.groups, (std::vector<int64_t>{1, 1}));
  EXPECT_TRUE(node.crossed(0));
  EXPECT_FALSE(node.crossed(1));
  const GroupShape all = strided_group(m, 0, 1, 8);
  EXPECT_EQ(all.groups, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(all.fewest[1], 4);
  EXPECT_TRUE(all.crossed(0) && all.crossed(1));
  EXPECT_EQ(all.top(), 1u);
  // One device per node: only the network is crossed, over one adapter each.
  const GroupShape pair = strided_group(m, 0, 4, 2);
  EXPECT_FALSE(pair.crossed(0));
  EXPECT_TRUE(pair.crossed(1));
  EXPECT_DOUBLE_EQ(bus_bandwidth(m, pair), 1e9);
  // Three on one node and one on the other: the lone device drives one adapter.
  const std::vector<int64_t> uneven{0, 1, 2, 4};
  EXPECT_EQ(group_shape(m, uneven).fewest[1], 1);
  EXPECT_DOUBLE_EQ(bus_bandwidth(m, group_shape(m, uneven)), 1e9);
}

// Rings that run at once share a node's adapters in proportion to their
// members there (two adapters of 1 GB/s per node on this machine).
TEST(Collectives, ConcurrentRingsShareANodesAdapters) {
  const Machine m = two_level();
  using Groups = std::vector<std::vector<int64_t>>;
  auto links = [&](const Groups& groups) {
    std::vector<double> out;
    for (const GroupShape& g : concurrent_shapes(m, groups)) out.push_back(g.links[1]);
    return out;
  };
  // Alone, a ring with one member per node drives one adapter.
  EXPECT_EQ(links({{0, 4}}), (std::vector<double>{1}));
  EXPECT_EQ(concurrent_shapes(m, Groups{{0, 4}})[0].groups, strided_group(m, 0, 4, 2).groups);
  // Four such rings (a weight split over a node's four devices, replicated
  // over the two nodes): the two adapters, half of one each.
  const Groups four{{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  EXPECT_EQ(links(four), (std::vector<double>(4, 0.5)));
  const GroupShape shared = concurrent_shapes(m, four)[2];
  EXPECT_DOUBLE_EQ(bus_bandwidth(m, shared), 5e8);
  // Ring: one network step each pass, 2 x 1/2 x 1 MB at 0.5 GB/s.
  EXPECT_DOUBLE_EQ(allreduce_times(m, shared, 1e6).ring, 2 * 1e-5 + 1e6 / 5e8);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kAllGather, shared, 1e6), 1e-5 + 0.5 * 1e6 / 5e8);
  // Two rings: an adapter each, as alone.
  EXPECT_EQ(links({{0, 4}, {1, 5}}), (std::vector<double>(2, 1)));
  // Two groups of two devices per node: one adapter each, not two.
  EXPECT_EQ(links({{0, 1, 4, 5}, {2, 3, 6, 7}}), (std::vector<double>(2, 1)));
  EXPECT_DOUBLE_EQ(strided_group(m, 0, 1, 8).links[1], 2);
  // A group inside a node uses no adapter and takes none.
  EXPECT_EQ(links({{0, 4}, {1, 2}})[0], 1);
  EXPECT_FALSE(concurrent_shapes(m, Groups{{0, 4}, {1, 2}})[1].crossed(1));
  // Unequal shares: node 0 holds three of the crossing members, node 1
  // two; each group takes the fewest links over the nodes it touches.
  const std::vector<double> uneven = links({{0, 4}, {1, 2, 5}});
  EXPECT_DOUBLE_EQ(uneven[0], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(uneven[1], 1.0);
  // The levels below the network are not shared (each device its own links).
  for (const GroupShape& g : concurrent_shapes(m, four)) EXPECT_DOUBLE_EQ(g.links[0], 1);
}

TEST(Collectives, AllReduceInsideANode) {
  const Machine m = two_level();
  const GroupShape g = strided_group(m, 0, 1, 4);
  // Ring: 2 x 3 steps of 1 us + 2 x 3/4 x 1 MB / 10 GB/s.
  // Tree: the node link is the top crossed level: 2 x ceil(log2 4) x 1 us
  // + 2 x 1 MB / 10 GB/s.
  const AllReduceTimes t = allreduce_times(m, g, 1e6);
  EXPECT_DOUBLE_EQ(t.ring, 6e-6 + 1.5e-4);
  EXPECT_DOUBLE_EQ(t.tree, 4e-6 + 2e-4);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kAllReduce, g, 1e6), t.ring);
}

TEST(Collectives, AllReduceAcrossNodesUsesEveryAdapter) {
  const Machine m = two_level();
  const GroupShape g = strided_group(m, 0, 1, 8);
  // Bus bandwidth: min(10 GB/s, 2 adapters x 1 GB/s) = 2 GB/s. A ring pass
  // crosses the node link on 8 - 2 = 6 steps and the network on 2 - 1 = 1.
  EXPECT_DOUBLE_EQ(bus_bandwidth(m, g), 2e9);
  EXPECT_DOUBLE_EQ(ring_pass_latency(m, g), 6e-6 + 1e-5);
  const AllReduceTimes big = allreduce_times(m, g, 1e6);
  EXPECT_DOUBLE_EQ(big.ring, 2 * 1.6e-5 + 2 * 7.0 / 8.0 * 1e6 / 2e9);
  // Tree: a chain of 3 hops in each node, ceil(log2 2) = 1 across nodes.
  EXPECT_DOUBLE_EQ(big.tree, 2 * (3e-6 + 1e-5) + 2 * 1e6 / 2e9);
  EXPECT_LT(big.ring, big.tree);  // bandwidth-bound: the ring
  const AllReduceTimes small = allreduce_times(m, g, 1e3);
  EXPECT_LT(small.tree, small.ring);  // latency-bound: the tree
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kAllReduce, g, 1e3), small.tree);
}

TEST(Collectives, TheOtherCollectivesOnTwoLevels) {
  const Machine m = two_level();
  const GroupShape g = strided_group(m, 0, 1, 8);
  const double pass = 6e-6 + 1e-5;
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kReduceScatter, g, 8e6), pass + 7.0 / 8.0 * 8e6 / 2e9);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kAllGather, g, 8e6), pass + 7.0 / 8.0 * 8e6 / 2e9);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kBroadcast, g, 1e6), pass + 1e6 / 2e9);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kReduce, g, 1e6), pass + 1e6 / 2e9);
  // All-to-all of 8 MB per device: a device sends 3/8 of it to its node
  // mates over its own link (3e-4 s); a node sends 4 x 8 MB x 4/8 to the
  // other node over its 2 adapters (8e-3 s).
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kAllToAll, g, 8e6), 1e-5 + 8e-3);
  // Scatter of 8 MB from one root: 3/8 to its node mates over its node link
  // (3e-4 s), the other node's half over the root's one adapter (4e-3 s).
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kScatter, g, 8e6), 1e-5 + 4e-3);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kGather, g, 8e6), 1e-5 + 4e-3);
  // Inside one node: only the node link.
  const GroupShape node = strided_group(m, 4, 1, 4);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kAllToAll, node, 4e6), 1e-6 + 3e6 / 1e10);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kBroadcast, node, 1e6), 3e-6 + 1e6 / 1e10);
  EXPECT_DOUBLE_EQ(send_time(m, 0, 5, 1e6), 1e-5 + 1e-3);
  EXPECT_DOUBLE_EQ(send_time(m, 1, 2, 1e6), 1e-6 + 1e-4);
  EXPECT_DOUBLE_EQ(send_time(m, 3, 3, 1e6), 0.0);
  // A group of one costs nothing.
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kAllReduce, strided_group(m, 2, 1, 1), 1e6), 0.0);
}

TEST(Collectives, ExchangeChargesTheBusiestLinks) {
  const Machine m = two_level();
  // Nothing moves: free.
  std::vector<Transfer> t{{3, 3, 1e6}};
  EXPECT_DOUBLE_EQ(exchange_time(m, t), 0.0);
  // Inside a node: device 0's link carries both of its messages (2 MB).
  t = {{0, 1, 1e6}, {0, 2, 1e6}, {3, 1, 5e5}};
  EXPECT_DOUBLE_EQ(exchange_time(m, t), 1e-6 + 2e6 / 1e10);
  // Across nodes: node 0 sends 3 MB from two devices, over its two
  // adapters; node 1 receives them on one device, over one adapter.
  t = {{0, 4, 1e6}, {1, 4, 2e6}};
  EXPECT_DOUBLE_EQ(exchange_time(m, t), 1e-5 + 3e6 / 1e9);
  t = {{0, 4, 1e6}, {1, 5, 2e6}};
  EXPECT_DOUBLE_EQ(exchange_time(m, t), 1e-5 + 3e6 / 2e9);
  // An all-to-all is an exchange: the same time.
  const GroupShape g = strided_group(m, 0, 1, 8);
  t.clear();
  for (int64_t a = 0; a < 8; ++a)
    for (int64_t b = 0; b < 8; ++b) t.push_back({a, b, 8e6 / 8});
  EXPECT_DOUBLE_EQ(exchange_time(m, t), collective_time(m, Collective::kAllToAll, g, 8e6));
  // Each exchange is priced from nothing: the larger one before leaves no
  // trace in the smaller ones after it.
  t = {{0, 1, 1e6}, {0, 2, 1e6}, {3, 1, 5e5}};
  EXPECT_DOUBLE_EQ(exchange_time(m, t), 1e-6 + 2e6 / 1e10);
  t = {{0, 4, 1e6}, {1, 5, 2e6}};
  EXPECT_DOUBLE_EQ(exchange_time(m, t), 1e-5 + 3e6 / 2e9);
}

// Transfers added one by one to an Exchange (how the cost model prices a
// relayout's pieces as they are made) cost what the same list does; time()
// leaves it empty for more; one exchange at a time per thread (its tables
// are the thread's), and devices past the count given are refused.
TEST(Collectives, AnExchangeBuiltOneByOneCostsWhatItsListDoes) {
  const Machine m = two_level();
  const std::vector<Transfer> t{{0, 4, 1e6}, {1, 4, 2e6}, {2, 2, 9e6}, {5, 1, 5e5}, {3, 0, 1e5}};
  const double listed = exchange_time(m, t);  // (before: x holds the thread's tables)
  EXPECT_GT(listed, 0.0);
  {
    Exchange x(m, 8);
    for (const Transfer& a : t) x.add(a.from, a.to, a.bytes);
    EXPECT_DOUBLE_EQ(x.time(), listed);
    EXPECT_DOUBLE_EQ(x.time(), 0.0);
    x.add(0, 1, 1e6);
    EXPECT_DOUBLE_EQ(x.time(), 1e-6 + 1e6 / 1e10);
    EXPECT_THROW(Exchange(m, 8), Error);
    EXPECT_THROW(x.add(0, 8, 1.0), Error);
  }
  // (Its tables cleared as it ends, whatever it held.)
  {
    Exchange x(m, 8);
    x.add(0, 4, 5e6);
  }
  Exchange y(m, 8);
  y.add(0, 1, 1e6);
  EXPECT_DOUBLE_EQ(y.time(), 1e-6 + 1e6 / 1e10);
}

// With a step latency (machine.h) the steps where every member sends and
// receives at once cost it; messages that go one way at a time (a chain's
// broadcast and reduce, a tree, scatter, gather, one-way exchanges, a
// lone send) keep the message latency.
TEST(Collectives, StepLatencyPricesTheTwoWaySteps) {
  Machine m = two_level();
  m.links[0].step_latency = 4e-6, m.links[1].step_latency = 3e-5;
  const GroupShape g = strided_group(m, 0, 1, 8);
  // A ring pass: 6 node-link steps and 1 network step, both ways.
  EXPECT_DOUBLE_EQ(ring_pass_latency(m, g), 6 * 4e-6 + 3e-5);
  EXPECT_DOUBLE_EQ(ring_pass_latency(m, g, false), 6e-6 + 1e-5);
  const AllReduceTimes big = allreduce_times(m, g, 1e6);
  EXPECT_DOUBLE_EQ(big.ring, 2 * (6 * 4e-6 + 3e-5) + 2 * 7.0 / 8.0 * 1e6 / 2e9);
  EXPECT_DOUBLE_EQ(big.tree, 2 * (3e-6 + 1e-5) + 2 * 1e6 / 2e9);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kReduceScatter, g, 8e6), 6 * 4e-6 + 3e-5 + 7.0 / 8.0 * 8e6 / 2e9);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kBroadcast, g, 1e6), 6e-6 + 1e-5 + 1e6 / 2e9);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kAllToAll, g, 8e6), 3e-5 + 8e-3);
  EXPECT_DOUBLE_EQ(collective_time(m, Collective::kScatter, g, 8e6), 1e-5 + 4e-3);
  EXPECT_DOUBLE_EQ(send_time(m, 0, 5, 1e6), 1e-5 + 1e-3);
  // Exchanges: device 1 sends and receives (two-way), or all go one way.
  std::vector<Transfer> both{{0, 1, 1e6}, {1, 2, 1e6}}, one{{0, 1, 1e6}, {2, 1, 1e6}};
  EXPECT_DOUBLE_EQ(exchange_time(m, both), 4e-6 + 1e6 / 1e10);
  EXPECT_DOUBLE_EQ(exchange_time(m, one), 1e-6 + 2e6 / 1e10);
  // Two members: the tree is the ring (one exchange each way), even where
  // the tree's one-way latencies would price it lower.
  const GroupShape pair = strided_group(m, 0, 1, 2);
  const AllReduceTimes p = allreduce_times(m, pair, 4);
  EXPECT_DOUBLE_EQ(p.ring, 2 * 4e-6 + 4 / 1e10);
  EXPECT_DOUBLE_EQ(p.tree, p.ring);
}

TEST(Collectives, ThreeLevelsTakeTheSlowestCrossedLevel) {
  // Summit-like: pairs on a fast link, sockets of 6... here nodes of 4 with
  // pairs of 2, the network between nodes with 2 adapters.
  Machine m;
  m.name = "three";
  m.nodes = 2;
  m.devices_per_node = 4;
  m.device = {"toy", 1e12, 1e11, 1e9};
  m.links = {{"pair", 2, 4e10, 1e-7, 1}, {"socket", 4, 1e10, 1e-6, 1}, {"net", 0, 1e9, 1e-5, 2}};
  const GroupShape g = strided_group(m, 0, 1, 8);
  EXPECT_EQ(g.groups, (std::vector<int64_t>{4, 2, 1}));
  // min(40, 10 x min(1, 2), 1 x min(2, 4)) GB/s.
  EXPECT_DOUBLE_EQ(bus_bandwidth(m, g), 2e9);
  EXPECT_DOUBLE_EQ(ring_pass_latency(m, g), 4 * 1e-7 + 2 * 1e-6 + 1 * 1e-5);
  const GroupShape two = strided_group(m, 0, 1, 2);
  EXPECT_DOUBLE_EQ(bus_bandwidth(m, two), 4e10);
}

TEST(GradientSync, BucketsReplayAgainstTheBackwardPass) {
  const Machine m = two_level();
  const CostModel cost(m, Efficiency{});
  const GroupShape g = strided_group(m, 0, 1, 4);
  // A bucket: copy in and copy out (4 bytes moved per byte, at the toy's
  // 100 GB/s times the default memory efficiency 0.7), and the all-reduce.
  EXPECT_DOUBLE_EQ(cost.bucket_pack_time(2e6), 4 * 2e6 / (1e11 * 0.7));
  const double one = allreduce_times(m, g, 2e6).best() + 4 * 2e6 / (1e11 * 0.7);
  // Two 1 MB gradients into a 2 MB bucket, ready at 1 ms and 2 ms of a
  // 5 ms backward pass: the bucket runs at 2 ms, all hidden.
  std::vector<ReadyGradient> grads{{1e-3, {g, 1e6, 7}}, {2e-3, {g, 1e6, 7}}};
  SyncTimeline t = replay_buckets(cost, grads, 5e-3, 2e6);
  EXPECT_EQ(t.buckets, 1);
  EXPECT_DOUBLE_EQ(t.total, one);
  EXPECT_DOUBLE_EQ(t.exposed, 0.0);
  // The same at the very end of the backward pass: all exposed.
  grads = {{5e-3, {g, 1e6, 7}}, {5e-3, {g, 1e6, 7}}};
  t = replay_buckets(cost, grads, 5e-3, 2e6);
  EXPECT_DOUBLE_EQ(t.exposed, one);
  // Smaller buckets: two all-reduces back to back on one channel, the
  // second starting when the first ends.
  grads = {{4.9e-3, {g, 1e6, 7}}, {4.9e-3, {g, 1e6, 7}}};
  const double half = allreduce_times(m, g, 1e6).best() + 4 * 1e6 / (1e11 * 0.7);
  t = replay_buckets(cost, grads, 5e-3, 1e6);
  EXPECT_EQ(t.buckets, 2);
  EXPECT_NEAR(t.exposed, 4.9e-3 + 2 * half - 5e-3, 1e-15);
  // Different groups never share a bucket.
  grads = {{1e-3, {g, 1e6, 7}}, {1e-3, {g, 1e6, 8}}};
  EXPECT_EQ(replay_buckets(cost, grads, 5e-3, 2e6).buckets, 2);
}

// The backward pass's own messages on a link level the bucket's group
// crosses go first; the bucket runs in the gaps they leave, and messages
// on another level do not hold it back.
TEST(GradientSync, BucketsYieldTheLinksToTheBackwardsOwnMessages) {
  const Machine m = two_level();
  const CostModel cost(m, Efficiency{});
  const GroupShape g = strided_group(m, 0, 1, 4);  // within a node: level 0 only
  ASSERT_TRUE(g.crossed(0) && !g.crossed(1));
  const std::vector<ReadyGradient> grads{{1e-3, {g, 1e6, 7}}, {1e-3, {g, 1e6, 7}}};
  const double one = replay_buckets(cost, grads, 5e-3, 2e6).total;
  ASSERT_GT(one, 0);
  ASSERT_LT(one, 3e-3);
  // Level 0 busy from 1 ms until half a bucket before the end: half of it is exposed.
  EXPECT_NEAR(replay_buckets(cost, grads, 5e-3, 2e6, {{1e-3, 5e-3 - one / 2, 1u}}).exposed, one / 2, 1e-15);
  // Busy on the network only: the bucket is not held back.
  EXPECT_DOUBLE_EQ(replay_buckets(cost, grads, 5e-3, 2e6, {{1e-3, 5e-3, 2u}}).exposed, 0.0);
  // A gap of half a bucket between two messages: it runs there, then after the second.
  const std::vector<LinkBusy> two{{1e-3, 2e-3, 1u}, {2e-3 + one / 2, 5e-3, 1u}};
  EXPECT_NEAR(replay_buckets(cost, grads, 5e-3, 2e6, two).exposed, one / 2, 1e-15);
}

// A device that does its own communication (pcgx's CPU runtime) runs its
// buckets after its backward pass: nothing is hidden, however early the
// gradients are ready.
TEST(GradientSync, DevicesThatDoNotOverlapExposeEveryBucket) {
  Machine m = two_level();
  m.device.overlaps_communication = false;
  const CostModel cost(m, Efficiency{});
  const GroupShape g = strided_group(m, 0, 1, 4);
  const double one = allreduce_times(m, g, 2e6).best() + cost.bucket_pack_time(2e6);
  std::vector<ReadyGradient> grads{{1e-3, {g, 1e6, 7}}, {2e-3, {g, 1e6, 7}}};
  SyncTimeline t = replay_buckets(cost, grads, 5e-3, 2e6);
  EXPECT_EQ(t.buckets, 1);
  EXPECT_DOUBLE_EQ(t.total, one);
  EXPECT_DOUBLE_EQ(t.exposed, one);
  // Two buckets: both after the backward pass, one after the other.
  t = replay_buckets(cost, grads, 5e-3, 1e6);
  EXPECT_EQ(t.buckets, 2);
  EXPECT_DOUBLE_EQ(t.exposed, t.total);
}

}  // namespace
}  // namespace pcgx::search
