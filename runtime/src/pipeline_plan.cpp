// A plan's pipeline schedule (see execution_plan.h, set_pipeline).
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_chunks.h"
#include "pcgx/runtime/execution_plan.h"

namespace pcgx::runtime {

void set_pipeline(ExecutionPlan& plan, const PipelineShape& p) {
  check(p);
  if (p.micro_batches != plan.micro_batches)
    throw Error("pipeline: " + std::to_string(p.micro_batches) + " micro-batches, where the graph's Pipeline degrees cut " +
                std::to_string(plan.micro_batches));
  if (p.stages == 1 && p.virtual_stages == 1 && p.schedule == PipelineSchedule::k1F1B) {
    plan.pipeline.reset(), plan.chunk.clear();
    return;
  }
  const Graph& g = *plan.graph;
  std::vector<std::vector<int64_t>> devices(g.size());
  for (const Node& n : g.nodes()) {
    const NodePlan& np = plan.nodes[static_cast<size_t>(n.id)];
    if (np.run == NodePlan::Run::kTasks) devices[static_cast<size_t>(n.id)].assign(np.task_device.begin(), np.task_device.end());
  }
  std::vector<int64_t> chunk = pipeline_chunks(g, devices, plan.devices, p);
  for (const RecomputeSegment& s : plan.segments)
    for (NodeId n : s.nodes)
      if (chunk[static_cast<size_t>(n)] != chunk[static_cast<size_t>(s.nodes.front())] ||
          chunk[static_cast<size_t>(s.last_reader)] != chunk[static_cast<size_t>(n)])
        throw Error(describe(g.node(n)) + ": recomputed with " + describe(g.node(s.nodes.front())) + " and read by " +
                    describe(g.node(s.last_reader)) + " across pipeline chunks (the runtime recomputes within a chunk)");
  plan.pipeline = p;
  plan.chunk = std::move(chunk);
}

}  // namespace pcgx::runtime
