// set_recompute (execution_plan.h): the recomputation plan the cost model
// reads, checked for what the executor can re-run, with each segment's
// last reader.
#include <algorithm>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/saved_tensors.h"
#include "pcgx/runtime/execution_plan.h"

namespace pcgx::runtime {

void set_recompute(ExecutionPlan& plan, Recompute policy, int32_t layers, std::span<const std::string> operators, AttentionKernel attention) {
  const Graph& g = *plan.graph;
  // Under a pipeline schedule the count is per chunk, as each chunk's plan counts it.
  const RecomputePlan rp = plan_recompute(g, plan.layouts, policy, layers, plan.chunk, operators, attention);
  plan.recompute = policy;
  plan.recompute_layers = layers;
  plan.segments.assign(static_cast<size_t>(rp.segments), {});
  auto segment = [&](NodeId n) { return rp.segment[static_cast<size_t>(n)]; };
  auto refuse = [&](const Node& n, const std::string& why) {
    throw Error(describe(n) + ": the runtime cannot recompute it (recompute " + describe_recompute(policy, layers) + "): " + why);
  };
  for (const Node& n : g.nodes()) {
    const int32_t s = segment(n.id);
    if (s < 0) continue;
    const StepPhase phase = plan.phase.empty() ? StepPhase::kMicro : plan.phase[static_cast<size_t>(n.id)];
    if (phase != StepPhase::kMicro)
      refuse(n, phase == StepPhase::kAccumulate ? "it sums the micro-batches" : "it runs once per step, not per micro-batch");
    for (const TensorRef& t : n.inputs)
      if (segment(t.node) >= 0 && segment(t.node) != s)
        refuse(n, "it reads " + describe(g.node(t.node)) + ", which another segment recomputes");
    RecomputeSegment& seg = plan.segments[static_cast<size_t>(s)];
    seg.nodes.push_back(n.id);
    seg.last_reader = std::max(seg.last_reader, n.id);
  }
  // A layout change run as one step (its first node writes its last's
  // output) is re-run whole or not at all.
  for (const Node& n : g.nodes()) {
    const NodePlan& np = plan.nodes[static_cast<size_t>(n.id)];
    if ((np.run == NodePlan::Run::kPieces || np.run == NodePlan::Run::kAllReduce) && segment(np.to) != segment(n.id))
      refuse(g.node(segment(n.id) >= 0 ? n.id : np.to), "the layout change " + describe(n) + " writes " + describe(g.node(np.to)) +
                                                         ", and only one of them is recomputed (or they are in different segments)");
  }
  for (const TensorRef& t : g.outputs())
    if (segment(t.node) >= 0) refuse(g.node(t.node), "it is an output of the graph");
  for (const Node& n : g.nodes())
    for (const TensorRef& t : n.inputs)
      if (const int32_t s = segment(t.node); s >= 0) {
        RecomputeSegment& seg = plan.segments[static_cast<size_t>(s)];
        seg.last_reader = std::max(seg.last_reader, n.id);
      }
  // A reader's backward runs in the pass of its forward: the segment's.
  for (const RecomputeSegment& seg : plan.segments) {
    const StepPhase phase = plan.phase.empty() ? StepPhase::kMicro : plan.phase[static_cast<size_t>(seg.last_reader)];
    if (phase != StepPhase::kMicro && phase != StepPhase::kAccumulate)
      refuse(g.node(seg.last_reader), "it reads a recomputed tensor after the micro-batches");
  }
  // What no backward pass reads: freed after its last forward reader, as
  // the memory model counts (a node whose outputs are freed is freed whole;
  // output_lives gives all of a node's outputs one life). Values written
  // once per step or summed over the micro-batches stay: they outlive the
  // micro-batch pass that frees.
  const OutputLives lives = output_lives(g, plan.layouts, rp);
  auto micro = [&](NodeId n) { return plan.phase.empty() || plan.phase[static_cast<size_t>(n)] == StepPhase::kMicro; };
  plan.freed.clear();
  for (const Node& n : g.nodes()) {
    if (n.outputs.empty()) continue;
    const OutputLife life = lives.at({n.id, 0});
    if (life != OutputLife::kFreed && life != OutputLife::kRecomputedPassing) continue;
    const NodeId last = lives.last_reader[static_cast<size_t>(n.id)];
    if (micro(n.id) && micro(last)) plan.freed.push_back({n.id, last});
    if (life == OutputLife::kRecomputedPassing)
      plan.segments[static_cast<size_t>(segment(n.id))].passing.emplace_back(n.id, lives.rerun_last_reader[static_cast<size_t>(n.id)]);
  }
}

}  // namespace pcgx::runtime
