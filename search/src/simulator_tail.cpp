// The simulator's gradient buckets, optimizer updates and ZeRO's weight
// gathers after the update (simulator_impl.h: Simulator::Impl::build_tail).
#include <algorithm>
#include <map>
#include <set>

#include "pcgx/pcg/error.h"
#include "pcgx/search/gradient_sync.h"
#include "simulator_impl.h"

namespace pcgx::search {

void Simulator::Impl::build_tail(Timeline& tl, std::vector<SimTaskInfo>& info) {
  const Machine& m = cost.machine();
  const auto N = static_cast<uint64_t>(g.size());
  struct Open {
    double bytes = 0;
    SyncGroup sync;
    std::vector<NodeId> nodes;
  };
  std::map<uint64_t, Open> open;
  buckets = 0;
  std::vector<std::vector<TaskId>> of_device(static_cast<size_t>(D));
  std::vector<Open> closed;  // for ZeRO's weight gathers after the update
  auto channel = [&](const Open& b, bool with_devices) {
    std::set<ResourceId> res;
    sync_resources(b.sync, with_devices, b.nodes.front(), res);
    return std::vector<ResourceId>(res.begin(), res.end());
  };
  // A bucket beside the backward pass (the device overlaps communication,
  // as DDP's and Megatron-LM's separate communication streams do, and the
  // recipe reduces beside it: gradient_sync.h's buckets_beside_backward;
  // ZeRO 3's reduce-scatters always where the machine can): its sync
  // channels, and its links in the background, so that the passes' own
  // collectives and transfers on them go first and the bucket takes the
  // link time they leave (timeline.h). Under ZeRO 3 the gathers before
  // use, on their own channels, go first too. Otherwise the devices run
  // it after their backward pass, holding them.
  const bool sharded = gathers_any();
  const bool beside = sharded ? m.device.overlaps_communication : buckets_beside_backward(cost);
  auto add_bucket = [&](uint64_t order, std::vector<TaskId> preds, const Open& b) {
    const double seconds = cost.bucket_time(b.sync.group, b.bytes);
    if (!beside) return tl.add(order, std::move(preds), seconds, channel(b, true));
    std::set<ResourceId> res, ports;
    sync_resources(b.sync, false, b.nodes.front(), res, &ports);
    return tl.add(order, std::move(preds), seconds, {res.begin(), res.end()}, {ports.begin(), ports.end()});
  };
  std::map<uint64_t, uint64_t> slots_taken;  // per expanded task's order: buckets placed after it
  // Closes bucket b of expansion x (without micro-batches: nullptr),
  // after node `closer`'s backward (-1: after every node's).
  const Pipelined::Expanded* x = nullptr;
  auto close = [&](Open& b, uint64_t position, NodeId closer) {
    std::vector<TaskId> preds;
    // A device that does its own communication, or reduces after its
    // backward pass, runs the bucket itself then (program order: the end
    // of phase 1).
    const bool inline_sync = !beside;
    // (After the weight products of its members, some run later than
    // their own position: overlap_grad_input.)
    for (NodeId n : b.nodes)
      if (const NodeId at = weight_product_at[static_cast<size_t>(n)].first; at >= 0) position = std::max(position, N - 1 - static_cast<uint64_t>(at));
    uint64_t order = order_of(1, inline_sync ? N : position, 2 * kRegion + static_cast<uint64_t>(buckets));
    if (pipe) {  // in that micro-batch's backward of the chunks it gathers from
      const bool last = x->micro_batch == pipe->shape.micro_batches - 1;
      uint64_t at = 0;
      for (NodeId n : b.nodes) {
        const auto c = static_cast<size_t>(pipe->chunk[static_cast<size_t>(n)]);
        const Unit& u = units[static_cast<size_t>(n)];
        for (int64_t t = 0; t < u.tasks; ++t) {
          const TaskId e = x->task[static_cast<size_t>(u.gradients_done(t))];
          // (A once-per-step task's gradient: after the chunk's
          // once-per-step backward, or an earlier micro-batch's end.)
          preds.push_back(e >= 0 ? e : last ? pipe->last_backward[c] : x->end[c]);
        }
        at = std::max(at, x->position[c]);
      }
      std::sort(preds.begin(), preds.end());
      preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
      order = inline_sync ? order_of(0, pipe->end_position, kRegion + static_cast<uint64_t>(buckets))
                          : order_of(0, at, kStepEnd + 1 + static_cast<uint64_t>(buckets));
      // Issued right after the task that closes it, as without
      // micro-batches (where none of its gradients comes from a
      // once-per-step task, which runs after the whole backward); at
      // ZeRO 3 so between the gathers on the sync channel, as there.
      if ((beside || sharded) && closer >= 0) {
        const auto c = static_cast<size_t>(pipe->chunk[static_cast<size_t>(closer)]);
        const uint64_t after = x->last[static_cast<size_t>(closer)];
        if (after > 0 && x->position[c] == at) {
          uint64_t& taken = slots_taken[order_of(0, at, after)];
          const uint64_t slot = order_of(0, at, after + 1 + taken);
          const bool follows = std::all_of(preds.begin(), preds.end(), [&](TaskId p) { return tl.task(p).order < slot; });
          if (follows && taken + 1 < (uint64_t{1} << kSlotBits)) order = slot, ++taken;
        }
      }
    } else {
      for (NodeId n : b.nodes) {
        const Unit& u = units[static_cast<size_t>(n)];
        for (int64_t t = 0; t < u.tasks; ++t) preds.push_back(u.gradients_done(t));
      }
    }
    info.push_back({SimKind::kSync, -1, buckets, -1});
    const TaskId t = add_bucket(order, std::move(preds), b);
    for (int64_t d : b.sync.devices) of_device[static_cast<size_t>(d)].push_back(t);
    ++buckets;
    // ZeRO's weights are gathered once, after the update: the last
    // micro-batch's buckets.
    if (!pipe || x == &pipe->expanded.back()) closed.push_back(std::move(b));
    b = Open{};
  };
  // The buckets of each expansion (without micro-batches, of the one
  // backward pass), in the order the backward pass fills them.
  std::vector<std::vector<SyncGroup>> groups(g.size());
  for (size_t k = 0; k < g.size(); ++k)
    if (units[k].shape == Unit::kTasks) groups[k] = problem.sync_groups(*place, static_cast<NodeId>(k), 0);
  const size_t passes = pipe ? pipe->expanded.size() : 1;
  for (size_t e = 0; e < passes; ++e) {
    if (pipe) x = &pipe->expanded[e];
    for (size_t k = g.size(); k-- > 0;) {
      const Node& n = g.node(static_cast<NodeId>(k));
      for (const SyncGroup& s : groups[k]) {
        if (pipe && x != &pipe->expanded.back() && s.rounds <= 1) continue;  // synchronized once: with the last micro-batch
        Open& b = open[s.key];
        if (b.bytes == 0) b.sync = s, b.bytes = b.sync.bytes;
        else b.bytes += s.bytes;
        b.nodes.push_back(n.id);
        if (b.bytes >= cost.sync_bucket_bytes(b.sync)) close(b, N - 1 - k, n.id);
      }
    }
    for (auto& [key, b] : open)
      if (b.bytes > 0) close(b, N, -1);
    open.clear();
  }
  std::vector<double> update(static_cast<size_t>(D), 0.0);
  for (size_t k = g.size(); k-- > 0;) {
    const Node& n = g.node(static_cast<NodeId>(k));
    if (units[k].shape != Unit::kTasks) continue;
    // The optimizer update of the weights this node reads, on each device
    // running it (what each holds where its tasks co-shard).
    const double seconds = problem.update_seconds(*place, n.id, 0);
    if (seconds <= 0) continue;
    std::vector<int64_t> devs = place->task_devices(n.id);
    const size_t tasks = devs.size();
    std::sort(devs.begin(), devs.end());
    devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
    for (int64_t d : devs) update[static_cast<size_t>(d)] += devs.size() == tasks ? seconds : problem.update_seconds_on(*place, n.id, d);
  }
  std::vector<TaskId> updated(static_cast<size_t>(D), -1);
  for (int64_t d = 0; d < D; ++d) {
    if (update[static_cast<size_t>(d)] <= 0) continue;
    info.push_back({SimKind::kUpdate, -1, d, d});
    updated[static_cast<size_t>(d)] = tl.add(order_of(2, 0, static_cast<uint64_t>(d)), of_device[static_cast<size_t>(d)],
                                             update[static_cast<size_t>(d)], {static_cast<ResourceId>(d)});
  }
  // ZeRO 1, 2 (3: a weight kept whole): each bucket's updated weights
  // all-gathered once its members have updated; by the devices themselves where they do their
  // own communication, as the buckets are. (Under overlap_param_gather:
  // beside the forward pass, in the structure.)
  for (size_t k = 0; k < closed.size() && param_gathers.empty(); ++k) {
    const double seconds = cost.weight_gather_time(closed[k].sync, closed[k].bytes);
    if (seconds <= 0) continue;
    std::vector<TaskId> preds;
    for (int64_t d : closed[k].sync.devices)
      if (updated[static_cast<size_t>(d)] >= 0) preds.push_back(updated[static_cast<size_t>(d)]);
    info.push_back({SimKind::kGather, -1, static_cast<int64_t>(k), -1});
    tl.add(order_of(2, 1, static_cast<uint64_t>(k)), std::move(preds), seconds, channel(closed[k], !m.device.overlaps_communication));
  }
  if (const double overhead = cost.step_overhead(*place); overhead > 0)
    for (int64_t d = 0; d < D; ++d) {
      info.push_back({SimKind::kOverhead, -1, d, d});
      tl.add(order_of(3, 0, static_cast<uint64_t>(d)), {}, overhead, {static_cast<ResourceId>(d)});
    }
}

bool Simulator::Impl::param_gathers_in_structure() const { return gathers_beside_forward(cost) && !gathers_any(); }

void Simulator::Impl::plan_param_gathers() {
  param_gathers.clear();
  param_buckets_of.assign(g.size(), {});
  if (!param_gathers_in_structure()) return;
  // The buckets build_tail closes (of the last micro-batch's backward):
  // gradients in backward order, per sync group, closed at the group's
  // bucket size, the rest at the end.
  struct Open {
    double bytes = 0;
    SyncGroup sync;
    std::vector<NodeId> nodes;
  };
  std::vector<Open> closed;
  std::map<std::pair<int64_t, uint64_t>, Open> open;  // by (chunk, group)
  for (size_t k = g.size(); k-- > 0;) {
    if (!active(static_cast<NodeId>(k)) || problem.is_tail[k] || !task_node(g.node(static_cast<NodeId>(k)))) continue;
    const int64_t chunk = k < gather_chunks.size() ? gather_chunks[k] : 0;
    for (const SyncGroup& s : problem.sync_groups(*place, static_cast<NodeId>(k), 0)) {
      Open& b = open[{chunk, s.key}];
      if (b.bytes == 0) b.sync = s, b.bytes = s.bytes;
      else b.bytes += s.bytes;
      b.nodes.push_back(static_cast<NodeId>(k));
      if (b.bytes >= cost.sync_bucket_bytes(b.sync)) closed.push_back(std::move(b)), b = Open{};
    }
  }
  for (auto& [key, b] : open)
    if (b.bytes > 0) closed.push_back(std::move(b));
  for (Open& b : closed) {
    const double seconds = cost.weight_gather_time(b.sync, b.bytes);
    if (seconds <= 0) continue;
    std::set<ResourceId> res, ports;
    sync_resources(b.sync, false, b.nodes.front(), res, &ports);
    param_gathers.push_back({seconds, {res.begin(), res.end()}, *std::min_element(b.nodes.begin(), b.nodes.end()), -1, -1, b.sync.devices});
    for (NodeId n : b.nodes) param_buckets_of[static_cast<size_t>(n)].push_back(static_cast<int32_t>(param_gathers.size() - 1));
  }
  // In the order the forward pass first reads them.
  std::vector<size_t> order(param_gathers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return param_gathers[a].first < param_gathers[b].first; });
  std::vector<ParamGather> sorted;
  std::vector<int32_t> rank(order.size());
  for (size_t i = 0; i < order.size(); ++i) sorted.push_back(std::move(param_gathers[order[i]])), rank[order[i]] = static_cast<int32_t>(i);
  param_gathers = std::move(sorted);
  for (auto& of : param_buckets_of)
    for (int32_t& b : of) b = rank[static_cast<size_t>(b)];
  std::map<std::vector<int64_t>, int32_t> last;  // per chain: its latest gather
  for (size_t k = 0; k < param_gathers.size(); ++k) {
    ParamGather& x = param_gathers[k];
    auto [it, fresh] = last.try_emplace(x.devices, static_cast<int32_t>(k));
    x.before = fresh ? -1 : it->second;
    x.issuer = fresh || aligned_gathers ? x.first : param_gathers[static_cast<size_t>(it->second)].first;
    it->second = static_cast<int32_t>(k);
  }
}

}  // namespace pcgx::search
