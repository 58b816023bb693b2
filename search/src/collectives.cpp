// Collective times (see collectives.h).
#include "pcgx/search/collectives.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "pcgx/pcg/error.h"

namespace pcgx::search {
namespace {

int64_t group_of(const LinkLevel& l, int64_t device) { return l.span == 0 ? 0 : device / l.span; }

double log2_ceil(int64_t k) { return k <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(k))); }

int64_t below(const GroupShape& g, size_t level) { return level == 0 ? g.size : g.groups[level - 1]; }

// Links one group of the level below uses at once.
double parallel_links(const GroupShape& g, size_t level) { return g.links[level]; }

// The latency of one step at a level: a collective step (every member
// sends and receives at once) or a lone message (chains, trees, roots).
double step_latency(const LinkLevel& l, bool both_ways) { return both_ways ? l.collective_latency() : l.latency; }

// The slowest crossed level for traffic that leaves each group of the
// level below: `leaving(l)` bytes through `links(l)` links at once, plus
// one latency of the top level (every transfer is posted at once).
template <class Leaving, class Links>
double crossing_time(const Machine& m, const GroupShape& g, bool both_ways, Leaving leaving, Links links) {
  double worst = 0;
  for (size_t l = 0; l < m.links.size(); ++l)
    if (g.crossed(l)) worst = std::max(worst, leaving(l) / (m.links[l].bandwidth * links(l)));
  return step_latency(m.links[g.top()], both_ways) + worst;
}

// Members in one group of the level below l (1: a device), and in one
// group of level l itself (the whole group at the top).
double members_below(const GroupShape& g, size_t l) { return l == 0 ? 1.0 : static_cast<double>(g.fewest[l]); }
double members_at(const GroupShape& g, size_t l) {
  return l == g.top() ? static_cast<double>(g.size) : static_cast<double>(g.fewest[l + 1]);
}

// Each member sends n/k to every other; a transfer uses the links of the
// level where its two ends first meet (inside a node NVLink, between nodes
// the adapters), so what a group of the level below sends through level l
// goes to the members of its level-l group outside it.
double all_to_all_time(const Machine& m, const GroupShape& g, double n) {
  const double k = static_cast<double>(g.size);
  return crossing_time(
      m, g, true, [&](size_t l) { return members_below(g, l) * n * (members_at(g, l) - members_below(g, l)) / k; },
      [&](size_t l) { return parallel_links(g, l); });
}

// One root sends n/k to every other member (or receives it), over its own
// link at each level.
double rooted_time(const Machine& m, const GroupShape& g, double n) {
  const double k = static_cast<double>(g.size);
  return crossing_time(
      m, g, false, [&](size_t l) { return n * (members_at(g, l) - members_below(g, l)) / k; }, [](size_t) { return 1.0; });
}

}  // namespace

std::optional<Collective> layout_change(DataMove first, DataMove second) {
  if (first == DataMove::kCombine && second == DataMove::kRepartition) return Collective::kAllToAll;
  if (first == DataMove::kCombine && second == DataMove::kReplicate) return Collective::kAllGather;
  if (first == DataMove::kReduce && second == DataMove::kRepartition) return Collective::kReduceScatter;
  if (first == DataMove::kReduce && second == DataMove::kReplicate) return Collective::kAllReduce;
  return std::nullopt;
}

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all-reduce";
    case Collective::kReduceScatter: return "reduce-scatter";
    case Collective::kAllGather: return "all-gather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllToAll: return "all-to-all";
    case Collective::kScatter: return "scatter";
    case Collective::kGather: return "gather";
  }
  return "?";
}

bool GroupShape::crossed(size_t level) const { return size > 1 && (level == 0 ? size : groups[level - 1]) > groups[level]; }

size_t GroupShape::top() const {
  for (size_t l = groups.size(); l-- > 0;)
    if (crossed(l)) return l;
  return 0;
}

GroupShape group_shape(const Machine& m, std::span<const int64_t> devices) {
  GroupShape g;
  g.size = static_cast<int64_t>(devices.size());
  const size_t levels = m.links.size();
  g.groups.assign(levels, 1);
  g.fewest.assign(levels, 1);
  g.links.assign(levels, 1.0);
  if (levels > 0) g.links[0] = static_cast<double>(m.links[0].ports);
  if (g.size <= 1) return g;
  // Sorted keys per level make the counts one pass each. A level's group
  // (device / span) never decreases with the device, so the members sorted
  // once give every level's keys sorted (the members mostly come sorted:
  // a sync group's 3,072 were sorted again at each level).
  std::vector<int64_t> ids(devices.begin(), devices.end());
  if (!std::is_sorted(ids.begin(), ids.end())) std::sort(ids.begin(), ids.end());
  std::vector<int64_t> lower(ids);  // group of the level below, per member
  std::vector<std::pair<int64_t, int64_t>> keys;  // (group here, group below)
  keys.reserve(ids.size());
  for (size_t l = 0; l < levels; ++l) {
    keys.clear();
    for (size_t i = 0; i < ids.size(); ++i) keys.emplace_back(group_of(m.links[l], ids[i]), lower[i]);
    int64_t here = 0, fewest = std::numeric_limits<int64_t>::max(), run = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i == 0 || keys[i].first != keys[i - 1].first) ++here;
      ++run;
      if (i + 1 == keys.size() || keys[i + 1].second != keys[i].second || keys[i + 1].first != keys[i].first)
        fewest = std::min(fewest, run), run = 0;
    }
    g.groups[l] = here;
    g.fewest[l] = l == 0 ? 1 : fewest;
    if (l > 0) g.links[l] = static_cast<double>(std::min(m.links[l].ports, fewest));
    for (size_t i = 0; i < ids.size(); ++i) lower[i] = group_of(m.links[l], ids[i]);
  }
  g.groups[levels - 1] = 1;
  return g;
}

GroupShape strided_group(const Machine& m, int64_t first, int64_t step, int64_t k) {
  std::vector<int64_t> d(static_cast<size_t>(std::max<int64_t>(k, 0)));
  for (int64_t i = 0; i < k; ++i) d[static_cast<size_t>(i)] = first + i * step;
  return group_shape(m, d);
}

std::vector<GroupShape> concurrent_shapes(const Machine& m, std::span<const std::vector<int64_t>> groups) {
  std::vector<GroupShape> shapes;
  shapes.reserve(groups.size());
  for (const auto& d : groups) {
    if (d.size() >= 2) {
      shapes.push_back(group_shape(m, d));
      continue;
    }
    GroupShape lone;  // no collective (collective_time: 0)
    lone.size = static_cast<int64_t>(d.size());
    shapes.push_back(std::move(lone));
  }
  if (shapes.size() < 2) return shapes;
  // Per level, the distinct devices of the crossing groups in each group
  // of the level below (a device in several groups, co-shard's blocks,
  // drives its adapter once), then each crossing group's share of the
  // links of every one it touches. Indexed by device and by group below
  // (both below the device count); per thread, and zero between calls:
  // a layout change is priced for every candidate of the search.
  struct Scratch {
    std::vector<int64_t> all, mine;
    std::vector<char> seen;
    std::vector<size_t> touched, marked, own;
  };
  thread_local Scratch z;
  auto grow = [](auto& v, size_t i) {
    if (i >= v.size()) v.resize(std::max(i + 1, 2 * v.size()));
  };
  for (size_t l = 1; l < m.links.size(); ++l) {
    const LinkLevel& lower = m.links[l - 1];
    size_t crossing = 0;
    for (size_t i = 0; i < groups.size(); ++i)
      if (shapes[i].crossed(l)) {
        ++crossing;
        for (int64_t d : groups[i]) {
          const auto dev = static_cast<size_t>(d), below = static_cast<size_t>(group_of(lower, d));
          grow(z.seen, dev), grow(z.all, below), grow(z.mine, below);
          if (z.seen[dev]) continue;
          z.seen[dev] = 1, z.marked.push_back(dev);
          if (z.all[below]++ == 0) z.touched.push_back(below);
        }
      }
    const double ports = static_cast<double>(m.links[l].ports);
    for (size_t i = 0; i < groups.size() && crossing >= 2; ++i) {
      if (!shapes[i].crossed(l)) continue;
      z.own.clear();
      for (int64_t d : groups[i]) {
        const auto below = static_cast<size_t>(group_of(lower, d));
        if (z.mine[below]++ == 0) z.own.push_back(below);
      }
      double& links = shapes[i].links[l];
      for (size_t below : z.own) {
        const double c = static_cast<double>(z.mine[below]);
        links = std::min(links, std::min(c, ports * c / static_cast<double>(z.all[below])));
        z.mine[below] = 0;
      }
    }
    for (size_t d : z.marked) z.seen[d] = 0;
    for (size_t b : z.touched) z.all[b] = 0;
    z.marked.clear(), z.touched.clear();
  }
  return shapes;
}

double bus_bandwidth(const Machine& m, const GroupShape& g) {
  double b = std::numeric_limits<double>::infinity();
  for (size_t l = 0; l < m.links.size(); ++l)
    if (g.crossed(l)) b = std::min(b, m.links[l].bandwidth * parallel_links(g, l));
  return b;
}

double ring_pass_latency(const Machine& m, const GroupShape& g, bool both_ways) {
  double a = 0;
  for (size_t l = 0; l < m.links.size(); ++l) a += static_cast<double>(below(g, l) - g.groups[l]) * step_latency(m.links[l], both_ways);
  return a;
}

AllReduceTimes allreduce_times(const Machine& m, const GroupShape& g, double bytes) {
  if (g.size <= 1) return {};
  const double k = static_cast<double>(g.size);
  const double b = bus_bandwidth(m, g);
  AllReduceTimes t;
  t.ring = 2 * ring_pass_latency(m, g, true) + 2 * (k - 1) / k * bytes / b;
  const size_t top = g.top();
  double lat = log2_ceil(below(g, top)) * m.links[top].latency;  // a tree's messages go one way at a time
  for (size_t l = 0; l < top; ++l) lat += static_cast<double>(below(g, l) - g.groups[l]) / static_cast<double>(g.groups[l]) * m.links[l].latency;
  t.tree = 2 * lat + 2 * bytes / b;
  // Two members: a tree would be the same exchange as the ring, each
  // sending its half once each way (the runtime runs the ring).
  if (g.size == 2) t.tree = t.ring;
  return t;
}

double collective_time(const Machine& m, Collective c, const GroupShape& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0.0;
  const double k = static_cast<double>(g.size);
  switch (c) {
    case Collective::kAllReduce: return allreduce_times(m, g, bytes).best();
    case Collective::kReduceScatter:
    case Collective::kAllGather: return ring_pass_latency(m, g, true) + (k - 1) / k * bytes / bus_bandwidth(m, g);
    case Collective::kBroadcast:
    case Collective::kReduce: return ring_pass_latency(m, g, false) + bytes / bus_bandwidth(m, g);
    case Collective::kAllToAll: return all_to_all_time(m, g, bytes);
    case Collective::kScatter:
    case Collective::kGather: return rooted_time(m, g, bytes);
  }
  throw Error("collective_time: unknown collective");
}

// Per level: bytes out of and into each group of the level below, and how
// many of its devices send or receive them. Groups and devices are indices
// below the device count, so flat arrays hold them (a layout change at 192
// devices is 12,288 transfers, costed for every candidate of the search).
// The arrays are per thread and all zero between exchanges: one touches and
// clears only the entries its transfers name (at 3,072 devices clearing
// whole arrays, or allocating them, cost more than the transfers
// themselves).
struct Exchange::Scratch {
  std::vector<double> out_bytes, in_bytes;
  std::vector<int64_t> out_devices, in_devices;
  std::vector<char> sends, receives, role;  // [level][device]; per device: 1 sends, 2 receives
  std::vector<size_t> out_used, in_used, flagged, roled;  // the entries set, to clear
  bool busy = false;
};

Exchange::Exchange(const Machine& m, int64_t devices) : m_(m), n_(static_cast<size_t>(std::max<int64_t>(devices, 0))) {
  thread_local Scratch scratch;
  if (scratch.busy) throw Error("exchange: another exchange is being priced on this thread");
  z_ = &scratch;
  z_->busy = true;
  const size_t levels = m_.links.size();
  if (z_->out_bytes.size() < levels * n_) {
    z_->out_bytes.resize(levels * n_, 0.0), z_->in_bytes.resize(levels * n_, 0.0);
    z_->out_devices.resize(levels * n_, 0), z_->in_devices.resize(levels * n_, 0);
    z_->sends.resize(levels * n_, 0), z_->receives.resize(levels * n_, 0);
  }
  if (z_->role.size() < n_) z_->role.resize(n_, 0);
}

Exchange::~Exchange() {
  clear();
  z_->busy = false;
}

void Exchange::add(int64_t from_device, int64_t to_device, double bytes) {
  if (from_device == to_device || bytes <= 0) return;
  if (from_device < 0 || to_device < 0 || static_cast<size_t>(std::max(from_device, to_device)) >= n_)
    throw Error("exchange: device " + std::to_string(std::max(from_device, to_device)) + " past the " + std::to_string(n_) + " given");
  Scratch& z = *z_;
  const size_t levels = m_.links.size(), N = n_;
  size_t l = 0;
  while (l + 1 < levels && group_of(m_.links[l], from_device) != group_of(m_.links[l], to_device)) ++l;
  const size_t from = l * N + static_cast<size_t>(l == 0 ? from_device : group_of(m_.links[l - 1], from_device));
  const size_t to = l * N + static_cast<size_t>(l == 0 ? to_device : group_of(m_.links[l - 1], to_device));
  if (z.out_bytes[from] == 0) z.out_used.push_back(from);
  if (z.in_bytes[to] == 0) z.in_used.push_back(to);
  z.out_bytes[from] += bytes, z.in_bytes[to] += bytes;
  const size_t sender = l * N + static_cast<size_t>(from_device), receiver = l * N + static_cast<size_t>(to_device);
  if (!z.sends[sender]) z.sends[sender] = 1, ++z.out_devices[from], z.flagged.push_back(sender);
  if (!z.receives[receiver]) z.receives[receiver] = 1, ++z.in_devices[to], z.flagged.push_back(receiver);
  for (const auto& [d, bit] : {std::pair{static_cast<size_t>(from_device), 1}, std::pair{static_cast<size_t>(to_device), 2}}) {
    if (!z.role[d]) z.roled.push_back(d);
    z.role[d] = static_cast<char>(z.role[d] | bit);
    both_ways_ = both_ways_ || z.role[d] == 3;
  }
  top_ = std::max(top_, l), any_ = true;
}

double Exchange::time() {
  Scratch& z = *z_;
  const size_t N = n_;
  // A device that sends and receives makes it a collective step; else
  // every message goes one way, each a lone message.
  double worst = 0;
  auto time = [&](size_t at, double bytes, int64_t devices) {
    const size_t l = at / N;
    const LinkLevel& link = m_.links[l];
    const int64_t links = l == 0 ? link.ports : std::min<int64_t>(link.ports, devices);
    return bytes / (link.bandwidth * static_cast<double>(std::max<int64_t>(links, 1)));
  };
  for (size_t at : z.out_used) worst = std::max(worst, time(at, z.out_bytes[at], z.out_devices[at]));
  for (size_t at : z.in_used) worst = std::max(worst, time(at, z.in_bytes[at], z.in_devices[at]));
  const double seconds = any_ ? step_latency(m_.links[top_], both_ways_) + worst : 0.0;
  clear();
  return seconds;
}

void Exchange::clear() {
  Scratch& z = *z_;
  for (size_t at : z.out_used) z.out_bytes[at] = 0, z.out_devices[at] = 0;
  for (size_t at : z.in_used) z.in_bytes[at] = 0, z.in_devices[at] = 0;
  for (size_t at : z.flagged) z.sends[at] = 0, z.receives[at] = 0;
  for (size_t d : z.roled) z.role[d] = 0;
  z.out_used.clear(), z.in_used.clear(), z.flagged.clear(), z.roled.clear();
  top_ = 0, any_ = false, both_ways_ = false;
}

double exchange_time(const Machine& m, std::span<const Transfer> transfers) {
  int64_t n = 0;
  for (const Transfer& t : transfers) n = std::max({n, t.from + 1, t.to + 1});
  if (n == 0) return 0.0;
  Exchange x(m, n);
  for (const Transfer& t : transfers) x.add(t.from, t.to, t.bytes);
  return x.time();
}

double send_time(const Machine& m, int64_t from, int64_t to, double bytes) {
  if (from == to) return 0.0;
  const LinkLevel& l = m.link_between(from, to);
  return l.latency + bytes / l.bandwidth;
}

}  // namespace pcgx::search
