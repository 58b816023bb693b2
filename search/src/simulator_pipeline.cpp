// A pipelined graph in the simulator: chunk bodies simulated task by task,
// then the pipeline schedule's steps (see simulator.h).
#include <algorithm>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_chunks.h"
#include "simulator_impl.h"

namespace pcgx::search {

int64_t Simulator::Impl::graph_micro_batches() const {
  int64_t m = 1;
  for (const Node& n : g.nodes())
    for (const ParallelTensorShape& s : n.outputs) m = std::max(m, s.slices());
  return m;
}

std::vector<int64_t> Simulator::Impl::node_chunks(const PipelineShape& p) const {
  std::vector<std::vector<int64_t>> devices(g.size());
  for (const Node& n : g.nodes())
    if (active(n.id) && !problem.is_tail[static_cast<size_t>(n.id)] && task_node(n)) devices[static_cast<size_t>(n.id)] = place->task_devices(n.id);
  try {
    return pipeline_chunks(g, devices, D, p);
  } catch (const Error& e) {
    throw Error(std::string("simulate: ") + e.what());
  }
}

bool Simulator::Impl::build_pipelined(Timeline& tl, std::vector<SimTaskInfo>& info) {
  pipe.reset();
  gather_chunks.clear();
  aligned_gathers = false;
  const int64_t M = graph_micro_batches();
  if (M <= 1) {
    if (asked && asked->micro_batches > 1)
      throw Error("simulate: the pipeline runs " + std::to_string(asked->micro_batches) +
                  " micro-batches but the graph has none (no Pipeline degrees)");
    return false;
  }
  const PipelineShape shape = asked ? *asked : PipelineShape{1, M, 1, PipelineSchedule::k1F1B};
  if (syncs_every_micro_batch(highest_zero(cost.recipe())) && shape.chunks() > 1)
    throw Error(std::string("simulate: ZeRO stage ") + name(highest_zero(cost.recipe())) +
                " with pipeline stages is not modelled: a pipelined plan shards at most the optimizer state (stage 1); stages 2 and 3 "
                "accumulate over micro-batches on one stage");
  if (param_gathers_in_structure() && !shape.interlaced.empty())
    throw Error("simulate: ZeRO's weights gathered beside the forward pass (overlap_param_gather) are not modelled with interlaced chunks "
                "(simulate with --overlap-param-gather off)");
  if (shape.micro_batches != M)
    throw Error("simulate: the pipeline runs " + std::to_string(shape.micro_batches) + " micro-batches but the graph's Pipeline degrees cut " +
                std::to_string(M));
  const std::vector<ScheduledStep> order = run_order(shape, stage_programs(shape));
  check_positions(order.size() + 2);
  Pipelined p;
  p.shape = shape;
  p.chunk = node_chunks(shape);
  gather_chunks = p.chunk;
  aligned_gathers = shape.schedule == PipelineSchedule::kInterleaved;
  // Some layers recomputed: as many of each chunk as its plan counted.
  // (Operators: never one another chunk reads.)
  if (const TrainingRecipe& r = cost.recipe(); plans_per_chunk(r.recompute, r.recompute_layers, shape))
    problem.recompute = plan_recompute(g, problem.layouts, r, p.chunk);
  const int64_t C = shape.chunks();

  // One micro-batch through the whole graph, task by task.
  Timeline one(tl.resources());
  std::vector<SimTaskInfo> one_info;
  build_structure(one, one_info);
  for (const Node& n : g.nodes()) cost_node(n.id, one);
  std::vector<int64_t> slices(g.size(), 1);
  for (const Node& n : g.nodes()) {
    int64_t& s = slices[static_cast<size_t>(n.id)];
    s = node_slices(g, n);
    if (const NodeId t = problem.fused_tail[static_cast<size_t>(n.id)]; t >= 0) s = std::max(s, node_slices(g, g.node(t)));
  }
  // Bodies: (chunk, backward, once per micro-batch) -> its tasks, ascending.
  auto key = [](int64_t c, bool backward, bool micro) { return static_cast<size_t>((c * 2 + backward) * 2 + micro); };
  std::vector<std::vector<TaskId>> members(static_cast<size_t>(C * 4));
  std::vector<size_t> body_of(one.size());
  // Whether a task of the one-micro-batch graph is a replica-axis Split's
  // or Concat's (it only deals out copies: no device of its own, below).
  auto deals_copies = [&](TaskId t) {
    const Node& n = g.node(one_info[static_cast<size_t>(t)].node);
    return n.op->op_class == OpClass::kCompute && n.op->is_shard_level(n.attrs);
  };
  std::vector<std::vector<TaskId>> first_gathers(static_cast<size_t>(C));
  // Chunks whose first forward reads a gathered bucket (a stage's chain
  // runs on through its chunks: a gather may be issued in the chunk before).
  std::vector<char> reads_gathers(static_cast<size_t>(C), 0);
  for (size_t i = 0; i < one.size(); ++i) {
    const auto t = static_cast<TaskId>(i);
    const auto n = static_cast<size_t>(one_info[i].node);
    const int64_t sl = slices[n];
    // (A ZeRO 3 gather moves the whole weight in every micro-batch.)
    if (sl > 1 && one_info[i].kind != SimKind::kShardGather && one_info[i].kind != SimKind::kGather) {
      const TimedTask& x = one.task(t);
      one.set_cost(t, x.duration / static_cast<double>(sl), std::vector<ResourceId>(x.resources));
    }
    // ZeRO's weights gathered beside the forward pass: with the first
    // micro-batch's forward through the chunk issuing them only.
    if (one_info[i].kind == SimKind::kGather) {
      body_of[i] = key(p.chunk[n], false, true);
      first_gathers[static_cast<size_t>(p.chunk[n])].push_back(t);
      continue;
    }
    body_of[i] = key(p.chunk[n], (one.task(t).order >> 62) == 1, sl > 1);
    members[body_of[i]].push_back(t);
    for (TaskId q : one.task(t).preds)
      if (one_info[static_cast<size_t>(q)].kind == SimKind::kGather) reads_gathers[static_cast<size_t>(p.chunk[n])] = 1;
  }
  p.bodies.assign(members.size(), Body{});
  std::vector<std::vector<ResourceId>> devices(static_cast<size_t>(C));
  std::vector<TaskId> local(one.size(), -1);
  std::vector<TaskId> preds;
  for (size_t b = 0; b < members.size(); ++b) {
    Timeline sub(one.resources());
    sub.reserve(members[b].size());
    auto& dev = devices[b / 4];
    for (TaskId t : members[b]) {
      const TimedTask& x = one.task(t);
      preds.clear();
      for (TaskId q : x.preds)  // (not the first micro-batch's weight gathers: not in a body)
        if (body_of[static_cast<size_t>(q)] == b && local[static_cast<size_t>(q)] >= 0) preds.push_back(local[static_cast<size_t>(q)]);
      local[static_cast<size_t>(t)] = sub.add(x.order, preds, x.duration, x.resources);
      // (A chunk's devices are those its tasks compute on: a shard-level
      // operator's copies, such as the slots a replica-axis Split deals
      // out that nothing of the chunk reads, do not add theirs.)
      if (!deals_copies(t))
        for (ResourceId r : x.resources)
          if (r < D && x.duration > 0) dev.push_back(r);
    }
    sub.simulate_full();
    Body& body = p.bodies[b];
    body.duration = sub.makespan();
    for (size_t i = 0; i < sub.size(); ++i)
      if (one_info[static_cast<size_t>(members[b][i])].communication()) body.communication_total += sub.task(static_cast<TaskId>(i)).duration;
    for (TaskId q : sub.critical_path()) {
      const double d = sub.task(q).duration;
      if (one_info[static_cast<size_t>(members[b][static_cast<size_t>(q)])].communication()) body.communication += d;
      else body.compute += d;
    }
  }
  for (auto& dev : devices) {
    std::sort(dev.begin(), dev.end());
    dev.erase(std::unique(dev.begin(), dev.end()), dev.end());
  }

  // The schedule: a task per stage program step, holding the chunk's devices.
  auto step = [&](uint64_t at, std::vector<TaskId> waits, int64_t c, bool backward, bool micro, int64_t m) {
    const size_t b = key(c, backward, micro);
    info.push_back({backward ? SimKind::kBackward : SimKind::kForward, -1, m, -1, c, m});
    p.body_of.push_back(static_cast<int32_t>(b));
    const double d = p.bodies[b].duration;
    return tl.add(at, std::move(waits), d, d > 0 ? devices[static_cast<size_t>(c)] : std::vector<ResourceId>{});
  };
  // A micro-batch's backward through chunk c, task by task (in the
  // one-micro-batch graph's order), after `waits`, into expansion `x`;
  // returns a task that ends with it.
  const bool every = syncs_every_micro_batch(highest_zero(cost.recipe())), gathers_each = every && gathers_any();
  p.expanded.resize(every ? static_cast<size_t>(M) : 1);
  for (size_t k = 0; k < p.expanded.size(); ++k) {
    Pipelined::Expanded& x = p.expanded[k];
    x.micro_batch = every ? static_cast<int64_t>(k) : M - 1;
    x.task.assign(one.size(), -1), x.last.assign(g.size(), 0), x.end.assign(static_cast<size_t>(C), -1), x.position.assign(static_cast<size_t>(C), 0);
  }
  // The first micro-batch's weight gathers as expanded (a later chunk's
  // readers wait for one issued in an earlier chunk of their stage).
  std::vector<TaskId> gather_task(one.size(), -1);
  // Aligned (the interleaved schedule): per chunk, when its stage issues
  // its gathers (-1: as the step starts, its first two chunks').
  std::vector<TaskId> issued(static_cast<size_t>(C), -1);
  // (Forward too under ZeRO 3, whose every micro-batch gathers the weights
  // again on the devices' gather channels.)
  auto expand = [&](uint64_t at, const std::vector<TaskId>& waits, int64_t c, Pipelined::Expanded& x, bool backward = true,
                    bool with_gathers = false) {
    const size_t k = key(c, backward, true);
    std::vector<TaskId> body = members[k];
    if (with_gathers) body.insert(body.end(), first_gathers[static_cast<size_t>(c)].begin(), first_gathers[static_cast<size_t>(c)].end());
    if (((body.size() + 1) << kSlotBits) >= kStepEnd - 1) throw Error("simulate: chunk " + std::to_string(c) + " has too many tasks to simulate");
    std::stable_sort(body.begin(), body.end(), [&](TaskId a, TaskId b) { return one.task(a).order < one.task(b).order; });
    std::vector<TaskId> all;
    for (size_t i = 0; i < body.size(); ++i) {
      const TimedTask& t = one.task(body[i]);
      std::vector<TaskId> w;
      for (TaskId r : t.preds)
        if (const TaskId e = x.task[static_cast<size_t>(r)]; e >= 0 && body_of[static_cast<size_t>(r)] == k) w.push_back(e);
        else if (const TaskId gt = gather_task[static_cast<size_t>(r)]; gt >= 0 && !backward && x.micro_batch == 0) w.push_back(gt);
      // (A chain's first weight gather is issued as the step begins, on
      // its stage's devices, whatever the chunk waits for; aligned, a
      // chunk's as its stage issues them.)
      if (one_info[static_cast<size_t>(body[i])].kind == SimKind::kGather) {
        if (const TaskId when = issued[static_cast<size_t>(c)]; when >= 0) w.push_back(when);
      } else if (w.empty()) {
        w = waits;
      }
      SimTaskInfo what = one_info[static_cast<size_t>(body[i])];
      what.chunk = c, what.micro_batch = x.micro_batch;
      info.push_back(what);
      p.body_of.push_back(-1);
      const uint64_t sub = static_cast<uint64_t>(i + 1) << kSlotBits;
      // A replica-axis Split or Concat (no arithmetic) holds none of the
      // devices here, as it adds none to its chunk's (above): the zero
      // gradients of the copies a first-copy Split leaves on the stage
      // before would otherwise queue that stage's next step behind this
      // chunk's whole backward (one order per device).
      const TaskId id = tl.add(order_of(0, at, sub), std::move(w), t.duration, deals_copies(body[i]) ? std::vector<ResourceId>{} : t.resources);
      x.task[static_cast<size_t>(body[i])] = id;
      // (A gather is waited for by its readers, not by the chunk's end: it
      // may be the first of the stage's next chunk.)
      if (what.kind == SimKind::kGather) {
        gather_task[static_cast<size_t>(body[i])] = id;
        continue;
      }
      x.last[static_cast<size_t>(one_info[static_cast<size_t>(body[i])].node)] = sub;
      all.push_back(id);
    }
    if (all.empty()) all = waits;
    info.push_back({backward ? SimKind::kBackward : SimKind::kForward, -1, x.micro_batch, -1, c, x.micro_batch});
    p.body_of.push_back(-1);
    x.position[static_cast<size_t>(c)] = at;
    return x.end[static_cast<size_t>(c)] = tl.add(order_of(0, at, kStepEnd - 1), std::move(all), 0.0, {});
  };
  {
    // Room for what the schedule adds (a task per step; the bodies it
    // expands task by task, at most every micro-batch's; build_tail's
    // buckets and updates), reserved at once: at 512 devices these are
    // millions of tasks, and growing the arrays step by step moved them
    // again and again.
    size_t expanded = 0;
    for (int64_t c = 0; c < C; ++c)
      expanded += (every ? static_cast<size_t>(M) : 1) * (members[key(c, true, true)].size() + 1) +
                  (gathers_each ? static_cast<size_t>(M) : 1) * (members[key(c, false, true)].size() + first_gathers[static_cast<size_t>(c)].size() + 1);
    // (No more than a timeline holds: past it, add() refuses the plan.)
    const size_t room = std::min(kMaxTimelineTasks, tl.size() + expanded + static_cast<size_t>(2 * C * M + 2 * C) + 4 * static_cast<size_t>(D) + 1024);
    tl.reserve(room);
    info.reserve(room);
  }
  for (int64_t c = 0; c < C; ++c) step(order_of(0, 0, static_cast<uint64_t>(c)), {}, c, false, false, -1);
  std::vector<TaskId> F(static_cast<size_t>(C * M), -1), B(static_cast<size_t>(C * M), -1);
  auto at = [&](int64_t c, int64_t m) { return static_cast<size_t>(c * M + m); };
  p.last_backward.assign(static_cast<size_t>(C), -1);
  p.last_backward_position.assign(static_cast<size_t>(C), 0);
  uint64_t q = 1;
  const int64_t S = shape.stages, v = shape.virtual_stages;
  std::vector<int64_t> forwards(static_cast<size_t>(S), 0);  // per stage: forward steps so far
  std::vector<TaskId> on_stage(static_cast<size_t>(S), -1);  // per stage: its last step
  for (const ScheduledStep& s : order) {
    const PipelineStep& x = s.step;
    const int64_t c = x.chunk, m = x.micro_batch;
    std::vector<TaskId> waits;
    if (!x.backward) {
      if (c > 0) waits.push_back(F[at(c - 1, m)]);
      // Aligned: chunk k >= 2 of the stage issued at its forward step
      // S (k - 1) - stage, as that step could start (param_gathers.h).
      if (aligned_gathers && s.stage >= 0) {
        const int64_t j = forwards[static_cast<size_t>(s.stage)]++;
        for (int64_t k = 2; k < v; ++k)
          if (j == S * (k - 1) - s.stage) {
            std::vector<TaskId> when = waits;
            if (const TaskId before = on_stage[static_cast<size_t>(s.stage)]; before >= 0) when.push_back(before);
            info.push_back({SimKind::kGatherIssue, -1, -1, -1, k * S + s.stage, -1});
            p.body_of.push_back(-1);
            issued[static_cast<size_t>(k * S + s.stage)] = tl.add(order_of(0, q, kStepEnd - 2), std::move(when), 0.0, {});
          }
      }
      const bool first_gathering = m == 0 && (!first_gathers[static_cast<size_t>(c)].empty() || reads_gathers[static_cast<size_t>(c)]);
      if (gathers_each || first_gathering) {
        Pipelined::Expanded f;
        f.micro_batch = m, f.task.assign(one.size(), -1), f.last.assign(g.size(), 0), f.end.assign(static_cast<size_t>(C), -1),
        f.position.assign(static_cast<size_t>(C), 0);
        F[at(c, m)] = expand(q, waits, c, f, false, first_gathering);
      } else {
        F[at(c, m)] = step(order_of(0, q, 0), std::move(waits), c, false, true, m);
      }
    } else {
      waits.push_back(F[at(c, m)]);
      if (c + 1 < C) waits.push_back(B[at(c + 1, m)]);
      if (m < M - 1 && !every) {
        B[at(c, m)] = step(order_of(0, q, 0), std::move(waits), c, true, true, m);
      } else if (m < M - 1) {
        B[at(c, m)] = expand(q, waits, c, p.expanded[static_cast<size_t>(m)]);
      } else {  // task by task, then the chunk's once-per-step backward
        B[at(c, m)] = expand(q, waits, c, p.expanded.back());
        p.last_backward[static_cast<size_t>(c)] = step(order_of(0, q, kStepEnd), {B[at(c, m)]}, c, true, false, -1);
        p.last_backward_position[static_cast<size_t>(c)] = q;
      }
    }
    if (s.stage >= 0) on_stage[static_cast<size_t>(s.stage)] = x.backward ? B[at(c, m)] : F[at(c, m)];
    ++q;
  }
  p.end_position = q;
  pipe = std::move(p);
  tail_start = static_cast<TaskId>(tl.size());
  return true;
}

}  // namespace pcgx::search
