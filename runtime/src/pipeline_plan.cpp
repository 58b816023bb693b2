// A plan's pipeline schedule (see execution_plan.h, set_pipeline).
#include <algorithm>
#include <set>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_chunks.h"
#include "pcgx/runtime/execution_plan.h"

namespace pcgx::runtime {

namespace {

// The devices the stages split: those the strategy uses, or `devices`
// (more may run idle).
int64_t stage_devices(const ExecutionPlan& plan, int64_t devices) {
  int64_t used = 0;
  for (const NodePlan& np : plan.nodes)
    if (np.run == NodePlan::Run::kTasks)
      for (int d : np.task_device) used = std::max<int64_t>(used, d + 1);
  if (used == 0) throw Error("pipeline: no operator of the graph runs a task");
  if (devices > 0) {
    if (devices < used) throw Error("pipeline: " + std::to_string(devices) + " devices for stages whose tasks use " + std::to_string(used));
    used = devices;
  }
  return used;
}

}  // namespace

std::vector<int64_t> plan_chunks(const ExecutionPlan& plan, const PipelineShape& p, int64_t devices) {
  const Graph& g = *plan.graph;
  std::vector<std::vector<int64_t>> tasks(g.size());
  for (const Node& n : g.nodes()) {
    const NodePlan& np = plan.nodes[static_cast<size_t>(n.id)];
    if (np.run == NodePlan::Run::kTasks) tasks[static_cast<size_t>(n.id)].assign(np.task_device.begin(), np.task_device.end());
  }
  return pipeline_chunks(g, tasks, stage_devices(plan, devices), p);
}

void set_pipeline(ExecutionPlan& plan, const PipelineShape& p, int64_t devices) {
  check(p);
  if (p.micro_batches != plan.micro_batches)
    throw Error("pipeline: " + std::to_string(p.micro_batches) + " micro-batches, where the graph's Pipeline degrees cut " +
                std::to_string(plan.micro_batches));
  // One stage under 1f1b, or one micro-batch, is what the plan runs
  // without a schedule.
  if (!p.in_flight()) {
    plan.pipeline.reset(), plan.chunk.clear();
    return;
  }
  const Graph& g = *plan.graph;
  const int64_t used = stage_devices(plan, devices);
  std::vector<int64_t> chunk = plan_chunks(plan, p, devices);
  const int64_t per = used / p.stages;
  auto stage_of = [&](int device) { return device / per; };
  for (const RecomputeSegment& s : plan.segments)
    for (NodeId n : s.nodes) {
      if (chunk[static_cast<size_t>(n)] != chunk[static_cast<size_t>(s.nodes.front())] ||
          chunk[static_cast<size_t>(s.last_reader)] != chunk[static_cast<size_t>(n)])
        throw Error(describe(g.node(n)) + ": recomputed with " + describe(g.node(s.nodes.front())) + " and read by " +
                    describe(g.node(s.last_reader)) + " across pipeline chunks (the runtime recomputes within a chunk)");
      // A re-run runs on its stage alone: what it moves must stay there
      // (in an interlaced chunk every stage re-runs it, in the joint step).
      if (p.is_interlaced(chunk[static_cast<size_t>(n)])) continue;
      const NodePlan& np = plan.nodes[static_cast<size_t>(n)];
      if (np.run == NodePlan::Run::kTasks) continue;  // its received inputs are kept
      // The devices its data moves between (a shard no task reads may
      // live anywhere: not counted).
      std::set<int64_t> stages;
      const Node& node = g.node(n);
      auto at = [&](int device) {
        if (device < used) stages.insert(stage_of(device));
      };
      for (const Move& m : np.moves) {
        at(plan.owner(node.inputs[static_cast<size_t>(m.input)], m.in_shard));
        at(np.owner[static_cast<size_t>(m.output)][static_cast<size_t>(m.out_shard)]);
      }
      for (const Piece& pc : np.pieces) {
        at(plan.owner(node.inputs[0], pc.in_shard));
        at(plan.owner({np.to, 0}, pc.out_shard));
      }
      for (const auto& group : np.groups)
        for (const AllReduceMember& m : group) at(m.device);
      if (stages.size() > 1)
        throw Error(describe(node) + ": recomputed, and it moves data between pipeline stages (the runtime re-runs a segment on "
                                     "its own stage; keep its output)");
    }
  // A micro-batch's tensors go from one chunk to the next only.
  for (const Node& n : g.nodes())
    for (const TensorRef& in : n.inputs) {
      if (g.shape(in).slices() <= 1) continue;
      const int64_t from = chunk[static_cast<size_t>(in.node)], to = chunk[static_cast<size_t>(n.id)];
      if (to != from && to != from + 1)
        throw Error(describe(n) + ": in pipeline chunk " + std::to_string(to) + ", it reads " + describe(g.node(in.node)) + " of chunk " +
                    std::to_string(from) + " (a chunk reads its own micro-batch tensors and the previous chunk's)");
    }
  // A chunk and the interlaced chunk beside it on one stage: the gradient
  // the later one's backward leaves is kept for the earlier one's
  // (device_executor.h), so no other micro-batch's backward between.
  check_paired_backwards(p, stage_programs(p));
  plan.pipeline = p;
  plan.chunk = std::move(chunk);
  plan.stage_devices = per;
}

}  // namespace pcgx::runtime
