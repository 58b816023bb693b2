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

namespace {

// A bucket of gradients of one group (the first gradient's).
struct Bucket {
  double bytes = 0, ready = 0;  // ready: its last gradient's
  double needed = 0;            // the earliest ReadyGradient::needed of its gradients
  SyncGroup sync;
  int32_t micro_batch = 0;
};

// Gradients into buckets in the order given: per group, a bucket closes at
// `bucket_bytes`; a micro-batch's open buckets close before the next one's
// first gradient, and whatever is open at the end closes then (in group
// order). In the order they close.
std::vector<Bucket> fill_buckets(const std::vector<const ReadyGradient*>& order, double bucket_bytes) {
  std::vector<Bucket> closed;
  std::map<uint64_t, Bucket> open;
  int32_t last = 0;
  auto flush = [&] {
    for (auto& [key, b] : open)
      if (b.bytes > 0) closed.push_back(b);
    open.clear();
  };
  for (const ReadyGradient* g : order) {
    if (g->micro_batch != last) flush();
    last = std::max(last, g->micro_batch);
    Bucket& b = open[g->sync.key];
    if (b.bytes == 0) b.sync = g->sync, b.micro_batch = g->micro_batch, b.needed = g->needed;
    b.needed = std::min(b.needed, g->needed);
    b.bytes += g->sync.bytes, b.ready = g->ready;
    if (b.bytes >= bucket_bytes) closed.push_back(b), b = Bucket{};
  }
  flush();
  return closed;
}

// The buckets whose weights are gathered beside the forward pass: the last
// micro-batch's gradients in the order the operators come in the backward
// pass (their forward order reversed: `needed` descending), not the order
// they are ready in (a weight product run beside a collective,
// overlap_grad_input, would otherwise share a bucket with a later
// layer's); as the simulator forms them (simulator_tail.cpp,
// plan_param_gathers).
std::vector<ParamGather> param_gather_buckets(const CostModel& cost, const std::vector<ReadyGradient>& gradients, int32_t last,
                                              double bucket_bytes) {
  std::vector<const ReadyGradient*> order;
  for (const ReadyGradient& g : gradients)
    if (g.micro_batch == last) order.push_back(&g);
  std::stable_sort(order.begin(), order.end(), [](const ReadyGradient* a, const ReadyGradient* b) { return a->needed > b->needed; });
  std::vector<ParamGather> out;
  for (const Bucket& b : fill_buckets(order, bucket_bytes)) out.push_back({cost.weight_gather_time(b.sync, b.bytes), b.needed, b.sync.devices});
  return out;
}

}  // namespace

SyncTimeline replay_buckets(const CostModel& cost, std::vector<ReadyGradient> gradients, double backward, double bucket_bytes,
                            const std::vector<LinkBusy>& busy) {
  std::stable_sort(gradients.begin(), gradients.end(), [](const ReadyGradient& a, const ReadyGradient& b) { return a.ready < b.ready; });
  // Buckets in the order they close, then by when they are ready.
  std::vector<const ReadyGradient*> order;
  int32_t last = 0;
  for (const ReadyGradient& g : gradients) order.push_back(&g), last = std::max(last, g.micro_batch);
  std::vector<Bucket> closed = fill_buckets(order, bucket_bytes);
  std::stable_sort(closed.begin(), closed.end(), [](const Bucket& a, const Bucket& b) { return a.ready < b.ready; });
  SyncTimeline t;
  // A device that does its own communication (machine.h), or reduces
  // after its backward pass (the recipe's overlap_grad_reduce), starts
  // once that pass is done: everything is exposed.
  const bool beside = buckets_beside_backward(cost);
  double free = beside ? 0 : backward;
  double after_update = 0;  // the gathers after the update
  for (const Bucket& b : closed) {
    const double time = cost.bucket_time(b.sync.group, b.bytes);
    free = beside ? run_beside(busy, crossed_levels(cost.machine(), b.sync.group), std::max(free, b.ready), time) : free + time;
    t.total += time;
    if (b.micro_batch == last) after_update += cost.weight_gather_time(b.sync, b.bytes);
    ++t.buckets;
  }
  if (gathers_beside_forward(cost)) {
    t.param_gathers = param_gather_buckets(cost, gradients, last, bucket_bytes);
    t.gather = replay_param_gathers(t.param_gathers);
  } else {
    t.gather = after_update;
  }
  t.exposed = beside ? std::min(t.total, std::max(0.0, free - backward)) : t.total;
  return t;
}

SyncTimeline replay_sharded(const CostModel& cost, const std::vector<ShardedStep>& ops, double forward, double backward, int64_t micro) {
  SyncTimeline t;
  // The buckets, in the order the backward pass closes them: per operator
  // (reverse model order), its weights gathered for use alone, the others
  // filling buckets per group (closed at CostModel::sync_bucket_bytes);
  // what is left closes after the last. A micro-batch before the last
  // synchronizes only the gradients every micro-batch makes (rounds > 1).
  struct Bucket {
    SyncGroup sync;
    double bytes = 0;
  };
  struct Buckets {
    std::vector<std::vector<Bucket>> closes;
    std::vector<Bucket> last;
  };
  auto buckets_of = [&](bool every) {
    Buckets out;
    out.closes.resize(ops.size());
    std::map<uint64_t, Bucket> open;
    for (size_t i = ops.size(); i-- > 0;)
      for (const SyncGroup& s : ops[i].grads) {
        if (every && s.rounds <= 1) continue;
        Bucket& b = open[s.key];
        if (b.bytes == 0) b.sync = s;
        b.bytes += s.bytes;
        if (b.bytes >= cost.sync_bucket_bytes(s)) out.closes[i].push_back(std::move(b)), b = Bucket{};
      }
    for (auto& [key, b] : open)
      if (b.bytes > 0) out.last.push_back(std::move(b));
    return out;
  };
  const Buckets final_buckets = buckets_of(false), every_buckets = micro > 1 ? buckets_of(true) : Buckets{};
  double sum_f = 0, sum_b = 0, gathers = 0, buckets = 0;
  auto count = [&](const Bucket& b, bool last) {
    buckets += cost.bucket_time(b.sync.group, b.bytes), ++t.buckets;
    if (last) t.gather += cost.weight_gather_time(b.sync, b.bytes);  // weights kept whole (below the persistence threshold)
  };
  for (int64_t m = 0; m < micro; ++m) {
    const bool last = m + 1 == micro;
    const Buckets& set = last ? final_buckets : every_buckets;
    for (size_t i = 0; i < ops.size(); ++i)
      for (const Bucket& b : set.closes[i]) count(b, last);
    for (const Bucket& b : set.last) count(b, last);
  }
  for (const ShardedStep& op : ops) sum_f += op.forward, sum_b += op.backward, gathers += 2 * static_cast<double>(op.rounds) * op.gather;
  t.total = gathers + buckets;
  if (!cost.machine().device.overlaps_communication) {  // the devices run every gather and bucket themselves
    t.exposed = t.total;
    return t;
  }
  const double fs = sum_f > 0 ? forward / sum_f : 0.0, bs = sum_b > 0 ? backward / sum_b : 0.0;
  // The step as one sequence: per micro-batch (one stage runs each one's
  // forward then its backward), the operators forward, then backward; an
  // operator that runs once per step (rounds 1) with the last. First the
  // compute and the gather channel, which the buckets never delay: the
  // first two gathers are issued at its start; once the j-th gathering
  // visit is done, the (j+2)-th is issued, so the backward's first gathers
  // follow the forward's last operators.
  struct Visit {
    const ShardedStep* op;
    bool backward;
    int64_t micro_batch;
  };
  std::vector<Visit> visits;
  for (int64_t m = 0; m < micro; ++m) {
    for (const ShardedStep& op : ops)
      if (op.rounds > 1 || m + 1 == micro) visits.push_back({&op, false, m});
    for (auto it = ops.rbegin(); it != ops.rend(); ++it)
      if (it->rounds > 1 || m + 1 == micro) visits.push_back({&*it, true, m});
    visits.push_back({nullptr, true, m});  // the micro-batch's end: what is left of its buckets
  }
  // The gathering visits, per micro-batch: none is prefetched across a
  // micro-batch's end (the next one's first two are issued as it starts),
  // so at most two operators' weights are held at once there too.
  std::vector<std::vector<size_t>> gathering(static_cast<size_t>(micro));
  for (size_t i = 0; i < visits.size(); ++i)
    if (visits[i].op && visits[i].op->gathers) gathering[static_cast<size_t>(visits[i].micro_batch)].push_back(i);
  std::vector<double> arrived(visits.size(), 0.0);
  const ShardedStep* first = ops.empty() ? nullptr : &ops.front();
  std::vector<LinkBusy> busy;  // the gathers and the operators' messages, which the buckets yield to
  struct Issued {
    double ready;
    const Bucket* bucket;
  };
  std::vector<Issued> issued;  // the buckets, in the order they are issued
  double gather_channel = 0, compute = 0;
  // Per link level, when the last gather issued so far that crosses it
  // ends: an operator's messages issued after it on that level wait for it
  // (a link runs what is issued to it in order, as the simulator's ports do).
  std::vector<double> gathered_by(32, 0.0);
  const std::vector<size_t>* now = &gathering[0];
  auto issue = [&](size_t j, double at) {
    if (j >= now->size()) return;
    const ShardedStep& op = *visits[(*now)[j]].op;
    const double start = std::max(gather_channel, at);
    gather_channel = start + op.gather;
    arrived[(*now)[j]] = gather_channel;
    uint32_t levels = 0;
    for (const SyncGroup& s : op.grads)
      if (s.gathered_for_use) levels |= crossed_levels(cost.machine(), s.group);
    if (levels && op.gather > 0) {
      busy.push_back({start, gather_channel, levels});
      for (size_t l = 0; l < gathered_by.size(); ++l)
        if (levels & (uint32_t{1} << l)) gathered_by[l] = gather_channel;
    }
  };
  issue(0, 0.0), issue(1, 0.0);
  size_t j = 0;
  for (size_t i = 0; i < visits.size(); ++i) {
    const Buckets& set = visits[i].micro_batch + 1 == micro ? final_buckets : every_buckets;
    if (!visits[i].op) {
      for (const Bucket& b : set.last) issued.push_back({compute, &b});
      if (const auto next = static_cast<size_t>(visits[i].micro_batch) + 1; next < gathering.size())
        now = &gathering[next], j = 0, issue(0, compute), issue(1, compute);
      continue;
    }
    const ShardedStep& op = *visits[i].op;
    const double share = 1.0 / static_cast<double>(op.rounds), scale = visits[i].backward ? bs : fs;
    if (op.gathers) compute = std::max(compute, arrived[i]);
    const double runs = (visits[i].backward ? op.backward : op.forward) * scale * share;
    const double m = std::min(runs, (visits[i].backward ? op.messages_backward : op.messages_forward) * scale * share);
    if (m > 0 && op.levels) {  // its messages, at the end of the visit, after the gathers issued before them
      double after = 0;
      for (size_t l = 0; l < gathered_by.size(); ++l)
        if (op.levels & (uint32_t{1} << l)) after = std::max(after, gathered_by[l]);
      compute = std::max(compute + runs - m, after) + m;
      busy.push_back({compute - m, compute, op.levels});
    } else {
      compute += runs;
    }
    if (visits[i].backward)
      for (const Bucket& b : set.closes[static_cast<size_t>(&op - first)]) issued.push_back({compute, &b});
    if (op.gathers) issue(j++ + 2, compute);
  }
  // Then the buckets on the sync channel, each in the link time that what
  // went first leaves on the levels its group crosses.
  std::stable_sort(busy.begin(), busy.end(), [](const LinkBusy& a, const LinkBusy& b) { return a.start < b.start; });
  std::map<uint32_t, std::vector<LinkBusy>> blocking;  // per levels crossed: the busy intervals, merged
  auto blocking_of = [&](uint32_t levels) -> const std::vector<LinkBusy>& {
    auto [it, added] = blocking.try_emplace(levels);
    if (added)
      for (const LinkBusy& b : busy) {
        if (!(b.levels & levels)) continue;
        if (!it->second.empty() && b.start <= it->second.back().end) it->second.back().end = std::max(it->second.back().end, b.end);
        else it->second.push_back({b.start, b.end, levels});
      }
    return it->second;
  };
  double channel = 0;
  for (const Issued& x : issued) {
    const uint32_t levels = crossed_levels(cost.machine(), x.bucket->sync.group);
    channel = run_beside(blocking_of(levels), levels, std::max(channel, x.ready), cost.bucket_time(x.bucket->sync.group, x.bucket->bytes));
  }
  channel = std::max(channel, gather_channel);
  t.exposed = std::max(0.0, std::max(compute, channel) - forward - backward);
  t.exposed = std::min(t.exposed, t.total);
  return t;
}

}  // namespace pcgx::search
