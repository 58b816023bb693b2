#pragma once
// Time of the collectives pcgx's parallel operators and gradient
// synchronization perform, as NCCL runs them (docs/design.md, "Search").
//
// Sources: NCCL's own tuning model (NVIDIA/nccl, src/graph/tuning.cc:
// ncclTopoTuneModel and ncclTopoGetAlgoTime), which prices every collective
// as latency + bytes / algorithm bandwidth, and the nccl-tests performance
// notes (doc/PERFORMANCE.md: bus bandwidth = algorithm bandwidth x
// 2(k-1)/k for all-reduce, (k-1)/k for reduce-scatter and all-gather, 1 for
// broadcast and reduce).
//
// A collective's members spread over the machine's link levels
// (machine.h). For level l, let G(l) be the number of level-l groups the
// members touch (G(-1) = k, the members themselves; the last level: 1).
// A ring through the members in device order crosses level l on
// s(l) = G(l-1) - G(l) of its k - 1 steps (NCCL: nInterSteps = nNodes - 1).
// Every crossed level carries the ring's whole flow, each of its groups
// over C(l) links at once: C(0) = ports(0), and above it
// C(l) = min(ports(l), fewest members in one group of the level below)
// (NCCL runs one ring channel per network adapter, each driven by its own
// GPU). Collectives over disjoint groups that run at once (one weight's
// shards synchronized over their data-parallel groups, one layout change's
// groups: concurrent_shapes; a device in several of them counted once;
// scatter and gather, through their roots' one link, are not shared)
// share each group's adapters in proportion to
// their members in it: a group with m of the M members of the crossing
// groups in a group of the level below gets min(m, ports(l) x m / M) of its
// links, and C(l) is the fewest over the groups it touches (BLOOM's four
// tensor-parallel ranks of a Jean Zay node drive four data-parallel rings
// through its four Omni-Path adapters: one each, not two; fractions where
// the rings outnumber the adapters, as six V100s' rings on Summit's two).
// The bus bandwidth is the slowest crossed level's:
//     B = min over crossed l of bandwidth(l) x C(l).
// With alpha(l) the level's latency per step and n the bytes of the whole
// buffer on one member (the gathered buffer for all-gather and
// reduce-scatter):
//
//   all-reduce, ring     2 sum_l s(l) alpha(l) + 2(k-1)/k n / B
//   all-reduce, tree     2 (sum_{l<top} chain(l) alpha(l) + ceil(log2 G(top-1)) alpha(top)) + 2 n / B
//                        (NCCL: a chain inside the lower levels, a double binary tree across
//                         the top one; algorithm bandwidth B/2)
//   all-reduce           the faster of the two (NCCL picks by the same model); the ring on 2 members
//   reduce-scatter,
//   all-gather             sum_l s(l) alpha(l) +  (k-1)/k n / B
//   broadcast, reduce      sum_l s(l) alpha(l) +          n / B   (pipelined chain)
//   all-to-all             alpha(top) + max over crossed l of the bytes one level-(l-1)
//                          group sends to the rest of its level-l group, through its
//                          C(l) links (grouped send/recv, every pair at once)
//   scatter, gather        alpha(top) + max over crossed l of the bytes the root sends to
//                          (receives from) the rest of its level-l group, through one link
//   exchange               any set of transfers posted at once: alpha of the highest
//                          level crossed + max over levels l and groups G of the level
//                          below of the bytes G sends (receives) through level l, over
//                          min(ports(l), devices of G sending (receiving)) links
//                          (the exchange lists every transfer, its sharers included)
//   send/recv              latency(l) + n / bandwidth(l), l the pair's level (a lone message)
//
// A transfer uses the links of the level where its two ends first meet:
// inside a node NVLink, between nodes the network adapters (NCCL's p2p
// transports), not both.
//
// where chain(l) = (G(l-1) - G(l)) / G(l) is the length of the chain in one
// level-l group and "top" the highest crossed level. A group of one device
// costs nothing.
//
// alpha(l) is one of two latencies (machine.h): where every member sends
// and receives at once (a ring's steps, all-to-all, an exchange in which
// some device both sends and receives) the level's step latency
// (LinkLevel::collective_latency); where messages go one way at a time
// (a tree, a chain's broadcast and reduce, scatter, gather, a one-way
// exchange) its message latency. Measured on this CPU's threads
// (`pcgx calibrate`) the first is about 3x the second; NCCL's tuning model
// and the shipped machine files have one figure for both.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "pcgx/pcg/machine.h"
#include "pcgx/pcg/operator.h"

namespace pcgx::search {

enum class Collective : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
  kScatter,
  kGather,
};
std::string_view to_string(Collective c);

// The collective a layout change of two parallel operators over the same
// devices amounts to: Combine then Repartition an all-to-all, Combine then
// Replicate an all-gather, Reduce then Repartition a reduce-scatter, Reduce
// then Replicate an all-reduce; none for any other pair.
std::optional<Collective> layout_change(DataMove first, DataMove second);

// How a collective's members spread over the machine's link levels.
struct GroupShape {
  int64_t size = 1;
  std::vector<int64_t> groups;   // per level: G(l), the level-l groups touched
  std::vector<int64_t> fewest;   // per level: fewest members in one touched group of the level below
  std::vector<double> links;     // per level: C(l), links of one group of the level below it drives at once
  bool crossed(size_t level) const;
  size_t top() const;  // highest crossed level (size > 1)
};

// The members' devices must be distinct.
GroupShape group_shape(const Machine& m, std::span<const int64_t> devices);
// Devices first, first + step, ..., k of them.
GroupShape strided_group(const Machine& m, int64_t first, int64_t step, int64_t k);
// The shapes of disjoint groups whose collectives run at once, in their
// order: each as group_shape gives it, its C(l) lowered where groups that
// also cross level l have members in the same group of the level below
// (they share its ports(l) links in proportion to their members there).
std::vector<GroupShape> concurrent_shapes(const Machine& m, std::span<const std::vector<int64_t>> groups);

struct AllReduceTimes {
  double ring = 0, tree = 0;
  double best() const { return ring < tree ? ring : tree; }
};
AllReduceTimes allreduce_times(const Machine& m, const GroupShape& g, double bytes);

// Seconds for collective `c` over group `g` of `bytes` (see above).
double collective_time(const Machine& m, Collective c, const GroupShape& g, double bytes);
// Point-to-point transfers posted at once (see "exchange" above).
struct Transfer {
  int64_t from = 0, to = 0;
  double bytes = 0;
};
double exchange_time(const Machine& m, std::span<const Transfer> transfers);
// The same, the transfers added one by one instead of listed (a relayout
// at 3,072 devices is millions of pieces: listing them cost more than
// pricing them). Devices are below `devices`. One exchange at a time per
// thread (its tables are the thread's); time() clears it for more.
class Exchange {
 public:
  Exchange(const Machine& m, int64_t devices);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  void add(int64_t from, int64_t to, double bytes);
  double time();

 private:
  struct Scratch;
  void clear();
  const Machine& m_;
  size_t n_ = 0;
  Scratch* z_ = nullptr;
  size_t top_ = 0;
  bool any_ = false, both_ways_ = false;
};
// One message between two devices (0 when they are the same).
double send_time(const Machine& m, int64_t from, int64_t to, double bytes);
// The bus bandwidth B and the latency of one ring pass of `g`.
double bus_bandwidth(const Machine& m, const GroupShape& g);
// both_ways: a step where every member sends and receives at once (a ring's
// reduce-scatter and all-gather); else a chain's lone messages.
double ring_pass_latency(const Machine& m, const GroupShape& g, bool both_ways = true);

}  // namespace pcgx::search
