// The simulator's task graph of one iteration, node by node, without costs
// (simulator_impl.h: Simulator::Impl::build_structure).
#include <algorithm>
#include <set>

#include "pcgx/pcg/error.h"
#include "simulator_impl.h"

namespace pcgx::search {

void Simulator::Impl::build_structure(Timeline& tl, std::vector<SimTaskInfo>& info) {
  const auto N = static_cast<uint64_t>(g.size());
  check_positions(N + 1);
  units.assign(g.size(), Unit{});
  plan_param_gathers();
  const size_t first_task = tl.size();
  size_t least = 0;
  {
    // What the loops below add (per task node: each task's transfers in
    // and out and its two passes, and a gather each way), and room for the
    // tail (buckets and updates, build_tail): reserved at once. At least
    // each task's transfers and passes are added (`least`): a plan past
    // the timeline's limit with those alone is refused here.
    size_t count = 0;
    for (const Node& n : g.nodes()) {
      if (!active(n.id) || problem.is_tail[static_cast<size_t>(n.id)]) continue;
      if (!task_node(n)) {
        count += 2, least += 2;
        continue;
      }
      const auto tasks = static_cast<size_t>(place->tasks(n.id).tasks);
      count += tasks * (2 * n.inputs.size() + 3) + 2;
      least += tasks * (2 * n.inputs.size() + 2);
    }
    tl.refuse_past_limit(least);
    count += count / 16 + 4 * static_cast<size_t>(D) + 1024;
    tl.reserve(count);
    info.reserve(count);
  }
  auto add = [&](uint64_t order, std::vector<TaskId> preds, SimTaskInfo what) {
    info.push_back(what);
    return tl.add(order, std::move(preds), 0.0, {});
  };
  std::vector<TaskId> preds;
  // ZeRO 3's gathers (simulator.h): per gathering visit so far, its
  // compute tasks and the order a gather it issues takes.
  struct Visit {
    TaskId first = 0;
    int64_t tasks = 0;
    uint64_t issues_at = 0;
  };
  std::vector<Visit> visits;
  // Which products split their backward (overlap_grad_input): those a
  // collective runs beside (Problem::products_beside), their weight
  // products at the collective's backward position, in the group's order.
  weight_product_at.assign(g.size(), {-1, 0});
  for (const Node& n : g.nodes()) {
    if (!active(n.id) || n.op->op_class != OpClass::kParallel) continue;
    const std::vector<NodeId> beside = problem.products_beside(n.id);
    uint64_t offset = 0;
    for (NodeId r : beside) {
      weight_product_at[static_cast<size_t>(r)] = {last_of(n.id), offset};
      offset += static_cast<uint64_t>(place->tasks(r).tasks);
    }
    if (offset >= kRegion / 2) throw Error("simulate: " + describe(n) + "'s readers have too many tasks to simulate (" + std::to_string(offset) + ")");
  }
  uint64_t first_gathering = 0;
  for (const Node& n : g.nodes())
    if (active(n.id) && !problem.is_tail[static_cast<size_t>(n.id)] && gathers(n)) {
      first_gathering = static_cast<uint64_t>(n.id);
      break;
    }
  auto add_gather = [&](NodeId id, bool backward) {
    const size_t e = visits.size();
    std::vector<TaskId> waits;
    uint64_t order = order_of(0, first_gathering, kRegion - 2 + e);
    if (e >= 2) {
      const Visit& v = visits[e - 2];
      for (int64_t t = 0; t < v.tasks; ++t) waits.push_back(v.first + static_cast<TaskId>(t));
      order = v.issues_at;
    }
    return add(order, std::move(waits), {SimKind::kShardGather, id, backward ? 1 : 0, -1});
  };
  for (const Node& n : g.nodes()) {
    if (!active(n.id) || problem.is_tail[static_cast<size_t>(n.id)]) continue;
    Unit& u = units[static_cast<size_t>(n.id)];
    const auto id = static_cast<uint64_t>(n.id);
    if (task_node(n)) {
      const TaskTable& tt = place->tasks(n.id);
      u.shape = Unit::kTasks, u.tasks = tt.tasks, u.inputs = static_cast<int64_t>(n.inputs.size());
      if (u.tasks * std::max<int64_t>(u.inputs, 1) >= static_cast<int64_t>(kRegion))
        throw Error("simulate: " + describe(n) + " has too many tasks to simulate (" + std::to_string(u.tasks) + ")");
      u.fwd_transfer = static_cast<TaskId>(tl.size());
      for (int64_t t = 0; t < u.tasks; ++t)
        for (int64_t i = 0; i < u.inputs; ++i) {
          const TaskId p = producer(n.inputs[static_cast<size_t>(i)], tt.input_shard[static_cast<size_t>(t)][static_cast<size_t>(i)]);
          add(order_of(0, id, static_cast<uint64_t>(t * u.inputs + i)), p >= 0 ? std::vector<TaskId>{p} : std::vector<TaskId>{},
              {SimKind::kTransfer, n.id, t, -1});
        }
      if (gathers(n)) u.fwd_gather = add_gather(n.id, false);
      // ZeRO's weights gathered beside the forward pass
      // (plan_param_gathers): those issued as this node starts, after the
      // one before them and what this node waits for.
      uint64_t issued = 0;
      for (size_t k = 0; k < param_gathers.size(); ++k) {
        if (param_gathers[k].issuer != n.id) continue;
        const uint64_t sub = kRegion / 2 + issued++;  // after its transfers, before its compute
        if (static_cast<uint64_t>(u.tasks * u.inputs) >= kRegion / 2 || sub >= kRegion - 2)
          throw Error("simulate: " + describe(n) + " issues too many weight gathers to simulate (" + std::to_string(issued) + ")");
        preds.clear();
        if (const int32_t b = param_gathers[k].before; b >= 0) {
          preds.push_back(param_gathers[static_cast<size_t>(b)].task);
          if (!aligned_gathers)
            for (int64_t i = 0; i < u.tasks * u.inputs; ++i) preds.push_back(u.fwd_transfer + static_cast<TaskId>(i));
        }
        param_gathers[k].task = add(order_of(0, id, sub), preds, {SimKind::kGather, n.id, static_cast<int64_t>(k), -1});
        tl.set_cost(param_gathers[k].task, param_gathers[k].seconds, param_gathers[k].resources);
      }
      u.fwd_compute = static_cast<TaskId>(tl.size());
      for (int64_t t = 0; t < u.tasks; ++t) {
        preds.clear();
        for (int64_t i = 0; i < u.inputs; ++i) preds.push_back(u.fwd_transfer + static_cast<TaskId>(t * u.inputs + i));
        if (u.fwd_gather >= 0) preds.push_back(u.fwd_gather);
        for (const int32_t b : param_buckets_of[static_cast<size_t>(n.id)]) preds.push_back(param_gathers[static_cast<size_t>(b)].task);
        add(order_of(0, id, kRegion + static_cast<uint64_t>(t)), preds, {SimKind::kForward, n.id, t, -1});
      }
      if (u.fwd_gather >= 0) visits.push_back({u.fwd_compute, u.tasks, order_of(0, id, 3 * kRegion)});
    } else {
      u.shape = Unit::kSingle;
      preds.clear();
      for (const TensorRef& in : n.inputs) {
        const int64_t shards = g.shape(in).num_shards();
        for (int64_t s = 0; s < shards; ++s)
          if (TaskId p = producer(in, s); p >= 0) preds.push_back(p);
      }
      const bool collective = n.op->op_class == OpClass::kParallel;
      u.fwd = add(order_of(0, id, 0), preds, {collective ? SimKind::kCollective : SimKind::kForward, n.id, 0, -1});
    }
  }
  index_shard_readers();
  // Backward, readers first.
  for (size_t k = g.size(); k-- > 0;) {
    const Node& n = g.node(static_cast<NodeId>(k));
    if (!active(n.id) || problem.is_tail[k]) continue;
    Unit& u = units[k];
    if (u.shape == Unit::kTasks) {
      const uint64_t pos = N - 1 - k;
      const TaskTable& tt = place->tasks(n.id);
      if (u.fwd_gather >= 0) u.bwd_gather = add_gather(n.id, true);
      u.bwd_compute = static_cast<TaskId>(tl.size());
      for (int64_t t = 0; t < u.tasks; ++t) {
        preds.assign(1, u.fwd_compute + static_cast<TaskId>(t));
        for (size_t o = 0; o < n.outputs.size(); ++o)
          gradient_sources({n.id, static_cast<int32_t>(o)}, tt.output_shard[static_cast<size_t>(t)][o], preds);
        if (u.bwd_gather >= 0) preds.push_back(u.bwd_gather);
        add(order_of(1, pos, static_cast<uint64_t>(t)), preds, {SimKind::kBackward, n.id, t, -1});
      }
      // (A product a collective runs beside has its weight product added
      // with that collective, below: bwd_weight.)
      // after its buckets (build_tail: 2 kRegion + b)
      if (u.bwd_gather >= 0) visits.push_back({u.bwd_compute, u.tasks, order_of(1, pos, 3 * kRegion)});
      u.bwd_transfer = static_cast<TaskId>(tl.size());
      for (int64_t t = 0; t < u.tasks; ++t)
        for (int64_t i = 0; i < u.inputs; ++i)
          add(order_of(1, pos, kRegion + static_cast<uint64_t>(t * u.inputs + i)), {u.bwd_compute + static_cast<TaskId>(t)},
              {SimKind::kGradientTransfer, n.id, t, -1});
    } else {
      const NodeId last = last_of(n.id);
      preds.assign(1, u.fwd);
      for (size_t o = 0; o < g.node(last).outputs.size(); ++o) gradient_sources({last, static_cast<int32_t>(o)}, -1, preds);
      const bool collective = n.op->op_class == OpClass::kParallel;
      const uint64_t at = N - 1 - static_cast<uint64_t>(last);
      // With products beside it (overlap_grad_input): its re-run before
      // their weight products (which read what it re-creates), beside their
      // input-gradient products where none of them re-runs its forward
      // (Problem::rerun_beside_input_products: it waits for what they
      // wait for), else after them; then its backward beside their weight
      // products, each after its own input gradient.
      const std::vector<NodeId> beside = collective ? problem.products_beside(n.id) : std::vector<NodeId>{};
      uint64_t sub = 0;
      if (!beside.empty() && problem.recompute.recomputed[k]) {
        std::vector<TaskId> rerun_preds = preds;
        if (problem.rerun_beside_input_products(n.id)) {
          rerun_preds.assign(1, u.fwd);
          for (NodeId r : beside)
            for (size_t o = 0; o < g.node(r).outputs.size(); ++o) gradient_sources({r, static_cast<int32_t>(o)}, -1, rerun_preds);
        }
        u.bwd_rerun = add(order_of(1, at, sub++), std::move(rerun_preds), {SimKind::kCollective, n.id, 2, -1});
        preds.push_back(u.bwd_rerun);
      }
      u.bwd = add(order_of(1, at, sub), preds, {collective ? SimKind::kCollective : SimKind::kBackward, n.id, collective ? 1 : 0, -1});
      for (NodeId r : beside) {
        Unit& w = units[static_cast<size_t>(r)];
        const uint64_t offset = weight_product_at[static_cast<size_t>(r)].second;
        w.bwd_weight = static_cast<TaskId>(tl.size());
        for (int64_t t = 0; t < w.tasks; ++t) {
          preds.assign(1, w.bwd_compute + static_cast<TaskId>(t));
          if (u.bwd_rerun >= 0) preds.push_back(u.bwd_rerun);
          add(order_of(1, at, kRegion / 2 + offset + static_cast<uint64_t>(t)), preds, {SimKind::kWeightGradient, r, t, -1});
        }
      }
    }
  }
  tail_start = static_cast<TaskId>(tl.size());
  // (The refusal above must never turn away a plan that fits.)
  if (tl.size() - first_task < least) throw Error("simulate: internal error: fewer tasks built than the count that refuses a plan");
}

}  // namespace pcgx::search
