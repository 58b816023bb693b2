// Where a graph's dropouts run fused with their sums (see dropout_add_kernels.h).
#include "pcgx/pcg/dropout_add_kernels.h"

namespace pcgx {

size_t DropoutAddKernels::count() const {
  size_t n = 0;
  for (size_t i = 0; i < partner.size(); ++i)
    if (partner[i] >= 0 && partner[i] > static_cast<NodeId>(i)) ++n;  // (each pair once: the dropout comes first)
  return n;
}

namespace {

// A compute operator evaluated per task, of one output.
bool per_task(const Node& n, DropoutAddPart part) {
  return n.op->dropout_add == part && n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs) && n.outputs.size() == 1;
}

}  // namespace

DropoutAddKernels find_dropout_add_kernels(const Graph& g, const SourceLayouts& layouts) {
  DropoutAddKernels out;
  std::vector<std::vector<NodeId>> readers(g.size());
  for (const Node& n : g.nodes())
    for (const TensorRef& t : n.inputs) readers[static_cast<size_t>(t.node)].push_back(n.id);
  std::vector<char> is_output(g.size(), 0);
  for (const TensorRef& t : g.outputs()) is_output[static_cast<size_t>(t.node)] = 1;
  for (const Node& d : g.nodes()) {
    if (!per_task(d, DropoutAddPart::kDropout) || is_output[static_cast<size_t>(d.id)]) continue;
    const std::vector<NodeId>& by = readers[static_cast<size_t>(d.id)];
    // (Read once, by one operator: a sum of the dropout with itself reads it twice.)
    if (by.size() != 1) continue;
    const Node& s = g.node(by.front());
    if (!per_task(s, DropoutAddPart::kSum) || s.inputs.size() != 2) continue;
    const TensorRef& residual = s.inputs[0].node == d.id ? s.inputs[1] : s.inputs[0];
    if (residual.node == d.id || layouts.weight(residual) || (!out.partner.empty() && out.partner[static_cast<size_t>(s.id)] >= 0)) continue;
    const ParallelTensorShape& mine = d.outputs[0];
    if (g.shape(residual).slice_shape() != mine.slice_shape() || s.outputs[0].slice_shape() != mine.slice_shape() ||
        g.shape(d.inputs[0]).slice_shape() != mine.slice_shape())
      continue;
    out.partner.resize(g.size(), -1);
    out.partner[static_cast<size_t>(d.id)] = s.id;
    out.partner[static_cast<size_t>(s.id)] = d.id;
  }
  return out;
}

}  // namespace pcgx
