#include "micro_batches.h"

#include <algorithm>

#include "pcgx/pcg/error.h"

namespace pcgx::runtime {

ParallelTensorShape micro_batch_shape(const ParallelTensorShape& s) {
  ParallelTensorShape m = s;
  for (ParallelDim& d : m.dims) d.size /= d.pipeline, d.pipeline = 1;
  return m;
}

void micro_batch_offset(const ParallelTensorShape& s, std::span<const int64_t> block_offset, int64_t k,
                        std::vector<int64_t>& offset) {
  offset.assign(block_offset.begin(), block_offset.end());
  for (size_t j = s.dims.size(); j-- > 0;) {  // the last pipelined dimension varies fastest
    const ParallelDim& d = s.dims[j];
    if (d.pipeline == 1) continue;
    offset[j] = (k % d.pipeline) * (d.size / d.pipeline) + block_offset[j] / d.pipeline;
    k /= d.pipeline;
  }
}

namespace {

bool pipelined(const ParallelTensorShape& s) { return s.slices() > 1; }

}  // namespace

void plan_micro_batches(ExecutionPlan& plan) {
  const Graph& g = *plan.graph;
  plan.phase.assign(g.size(), StepPhase::kMicro);
  plan.micro_batches = 1;
  for (const Node& n : g.nodes())
    for (const ParallelTensorShape& s : n.outputs) {
      if (!pipelined(s)) continue;
      if (plan.micro_batches == 1) plan.micro_batches = s.slices();
      else if (s.slices() != plan.micro_batches)
        throw Error(describe(n) + ": its output is processed in " + std::to_string(s.slices()) +
                    " micro-batches where the rest of the graph uses " + std::to_string(plan.micro_batches) +
                    " (the runtime runs one micro-batch count per step)");
    }
  if (plan.micro_batches == 1) return;
  // Micro-batch k is slice k of each tensor's one pipelined dimension
  // (its samples), and the passes start from the whole step's loss.
  for (const Node& n : g.nodes())
    for (const ParallelTensorShape& s : n.outputs)
      if (std::count_if(s.dims.begin(), s.dims.end(), [](const ParallelDim& d) { return d.pipeline > 1; }) > 1)
        throw Error(describe(n) + ": its output is cut into micro-batches along several dimensions (the runtime "
                    "cuts the samples' dimension alone)");
  if (pipelined(g.shape(g.outputs().at(0))))
    throw Error(describe(g.node(g.outputs()[0].node)) +
                ": the loss (graph output 0) is cut into micro-batches; gather it whole (a Batch) or reduce it");
  // Whether a node's outputs depend on a sum over the micro-batches.
  std::vector<char> summed(g.size(), 0);
  for (const Node& n : g.nodes()) {
    const auto id = static_cast<size_t>(n.id);
    const bool out = std::any_of(n.outputs.begin(), n.outputs.end(), [](const ParallelTensorShape& s) { return pipelined(s); });
    bool in = false, after = false;
    for (const TensorRef& t : n.inputs) {
      in = in || pipelined(g.shape(t));
      after = after || summed[static_cast<size_t>(t.node)];
    }
    const NodePlan& np = plan.nodes[id];
    if (out) {
      if (after)
        throw Error(describe(n) + ": it is processed in micro-batches but reads a sum over all of them (the "
                    "runtime runs micro-batches one at a time, so that sum does not exist yet)");
      plan.phase[id] = StepPhase::kMicro;
    } else if (in) {
      if (after)
        throw Error(describe(n) + ": it reads both micro-batches and a sum over all of them (the runtime runs "
                    "micro-batches one at a time)");
      // Summing its outputs over the passes is its one-batch output, and its
      // gradient does not read that output, for a loss alone.
      if (np.run == NodePlan::Run::kTasks && n.op->loss == LossKind::kNone)
        throw Error(describe(n) + ": it reduces the micro-batches' samples and is not a loss (the runtime sums "
                    "only a loss over the micro-batches)");
      plan.phase[id] = StepPhase::kAccumulate, summed[id] = 1;
    } else if (after) {
      if (np.run == NodePlan::Run::kTasks)
        throw Error(describe(n) + ": a compute operator after the sum over micro-batches (its gradient would "
                    "be needed before its forward pass, as the runtime runs micro-batches one at a time)");
      plan.phase[id] = StepPhase::kAfter, summed[id] = 1;
    } else {
      plan.phase[id] = StepPhase::kStep;
    }
    // Layout changes and moves of pipelined tensors run per micro-batch,
    // on the micro-batch's shapes.
    NodePlan& mp = plan.nodes[id];
    const bool touches = pipelined(n.outputs.at(0)) || (!n.inputs.empty() && pipelined(g.shape(n.inputs[0])));
    if (!touches) continue;
    if (n.op->data_move == DataMove::kPipeline || n.op->data_move == DataMove::kBatch) {
      if (np.run != NodePlan::Run::kMoves) continue;  // a sliced layout of an input: filled per micro-batch
      const ParallelTensorShape& s = n.op->data_move == DataMove::kPipeline ? n.outputs[0] : g.shape(n.inputs[0]);
      for (size_t j = 0; j < s.dims.size(); ++j)
        if (s.dims[j].pipeline > 1 && s.dims[j].degree > 1)
          throw Error(describe(n) + ": dimension " + std::to_string(j) + " is split (degree " +
                      std::to_string(s.dims[j].degree) + ") where it is " +
                      (n.op->data_move == DataMove::kPipeline ? "cut into" : "gathered from") +
                      " micro-batches; the runtime needs it whole there (split it after the Pipeline)");
      continue;
    }
    if (np.run == NodePlan::Run::kPieces) {
      const Node& second = g.node(np.to);
      const auto [sum, copy] = relayout_factors(n, second);
      mp.pieces = relayout_pieces(micro_batch_shape(g.shape(n.inputs[0])), micro_batch_shape(second.outputs[0]), sum, copy);
    } else if (np.run == NodePlan::Run::kMoves) {
      Node m = n;
      for (ParallelTensorShape& s : m.outputs) s = micro_batch_shape(s);
      std::vector<ParallelTensorShape> shapes;
      for (const TensorRef& t : n.inputs) shapes.push_back(micro_batch_shape(g.shape(t)));
      mp.moves = shard_moves(m, shapes);
    }
  }
}

}  // namespace pcgx::runtime
