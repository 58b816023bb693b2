#include "pcgx/search/gradient_sync.h"

#include <algorithm>
#include <map>

namespace pcgx::search {

namespace {

// The levels a collective over `group` crosses (LinkBusy::levels).
uint32_t crossed_levels(const Machine& m, const GroupShape& group) {
  uint32_t out = 0;
  for (size_t l = 0; l < m.links.size() && l < 32; ++l)
    if (group.crossed(l)) out |= uint32_t{1} << l;
  return out;
}

// When a bucket of `seconds` on `levels`, issued at `start`, is done: it
// runs in the gaps the backward's messages on those levels leave.
double run_beside(const std::vector<LinkBusy>& busy, uint32_t levels, double start, double seconds) {
  double now = start, left = seconds;
  auto it = std::upper_bound(busy.begin(), busy.end(), start, [](double s, const LinkBusy& b) { return s < b.end; });
  for (; it != busy.end() && left > 0; ++it) {
    if (!(it->levels & levels)) continue;
    if (it->start - now >= left) break;
    if (it->start > now) left -= it->start - now;
    now = std::max(now, it->end);
  }
  return now + left;
}

}  // namespace

SyncTimeline replay_buckets(const CostModel& cost, std::vector<ReadyGradient> gradients, double backward, double bucket_bytes,
                            const std::vector<LinkBusy>& busy) {
  std::stable_sort(gradients.begin(), gradients.end(), [](const ReadyGradient& a, const ReadyGradient& b) { return a.ready < b.ready; });
  struct Open {
    double bytes = 0, ready = 0;
    GroupShape group;
  };
  // Buckets in the order they close: (ready, group, bytes).
  std::vector<Open> closed;
  std::map<uint64_t, Open> open;
  for (const ReadyGradient& g : gradients) {
    Open& b = open[g.sync.key];
    if (b.bytes == 0) b.group = g.sync.group;
    b.bytes += g.sync.bytes, b.ready = g.ready;
    if (b.bytes >= bucket_bytes) closed.push_back(b), b = Open{};
  }
  for (auto& [key, b] : open)
    if (b.bytes > 0) closed.push_back(b);
  std::stable_sort(closed.begin(), closed.end(), [](const Open& a, const Open& b) { return a.ready < b.ready; });
  SyncTimeline t;
  // A device that does its own communication starts once its backward
  // pass is done (machine.h): everything is exposed.
  double free = cost.machine().device.overlaps_communication ? 0 : backward;
  for (const Open& b : closed) {
    const double time = cost.bucket_time(b.group, b.bytes);
    free = cost.machine().device.overlaps_communication ? run_beside(busy, crossed_levels(cost.machine(), b.group), std::max(free, b.ready), time)
                                                         : free + time;
    t.total += time;
    t.gather += cost.weight_gather_time(b.group, b.bytes);
    ++t.buckets;
  }
  t.exposed = cost.machine().device.overlaps_communication ? std::min(t.total, std::max(0.0, free - backward)) : t.total;
  return t;
}

SyncTimeline replay_sharded(const CostModel& cost, const std::vector<ShardedStep>& ops, double forward, double backward) {
  SyncTimeline t;
  double sum_f = 0, sum_b = 0, gathers = 0, buckets = 0;
  for (const ShardedStep& op : ops) {
    sum_f += op.forward, sum_b += op.backward;
    gathers += 2 * op.gather;
    for (const SyncGroup& s : op.grads) buckets += cost.bucket_time(s.group, s.bytes), ++t.buckets;
  }
  t.total = gathers + buckets;
  if (!cost.machine().device.overlaps_communication) {  // the devices run every gather and bucket themselves
    t.exposed = t.total;
    return t;
  }
  const double fs = sum_f > 0 ? forward / sum_f : 0.0, bs = sum_b > 0 ? backward / sum_b : 0.0;
  // The step as one sequence: the operators forward, then backward. The
  // first two gathers are issued at its start; once the j-th gathering
  // visit is done (and, backward, its gradients are on the channel), the
  // (j+2)-th is issued, so the backward's first gathers follow the
  // forward's last operators.
  struct Visit {
    const ShardedStep* op;
    bool backward;
  };
  std::vector<Visit> visits;
  for (const ShardedStep& op : ops) visits.push_back({&op, false});
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) visits.push_back({&*it, true});
  std::vector<size_t> gathering;
  for (size_t i = 0; i < visits.size(); ++i)
    if (visits[i].op->gathers) gathering.push_back(i);
  std::vector<double> arrived(visits.size(), 0.0);
  double channel = 0, compute = 0;
  auto issue = [&](size_t j, double at) {
    if (j >= gathering.size()) return;
    channel = std::max(channel, at) + visits[gathering[j]].op->gather;
    arrived[gathering[j]] = channel;
  };
  issue(0, 0.0), issue(1, 0.0);
  size_t j = 0;
  for (size_t i = 0; i < visits.size(); ++i) {
    const ShardedStep& op = *visits[i].op;
    if (op.gathers) compute = std::max(compute, arrived[i]);
    compute += visits[i].backward ? op.backward * bs : op.forward * fs;
    if (visits[i].backward)
      for (const SyncGroup& s : op.grads) channel = std::max(channel, compute) + cost.bucket_time(s.group, s.bytes);
    if (op.gathers) issue(j++ + 2, compute);
  }
  t.exposed = std::max(0.0, std::max(compute, channel) - forward - backward);
  t.exposed = std::min(t.exposed, t.total);
  return t;
}

}  // namespace pcgx::search
