// Which forward values a step keeps for backward (see saved_tensors.h).
#include "pcgx/pcg/saved_tensors.h"

#include <algorithm>

namespace pcgx {

OutputLives output_lives(const Graph& g, const SourceLayouts& layouts, const RecomputePlan& rp) {
  OutputLives lives;
  lives.of.resize(g.size());
  lives.last_reader.resize(g.size());
  lives.rerun_last_reader.resize(g.size());
  auto segment = [&](NodeId n) { return rp.segment[static_cast<size_t>(n)]; };
  // Per output: a reverse rule reads it (or, for one not recomputed, a
  // re-run does: a recomputed reader of another segment's output is
  // refused by the runtime, so that case is never reached).
  std::vector<std::vector<char>> read(g.size());
  for (const Node& n : g.nodes()) {
    const auto k = static_cast<size_t>(n.id);
    lives.last_reader[k] = lives.rerun_last_reader[k] = n.id;
    const BackwardReads r = backward_reads(*n.op, n.attrs);
    read[k].resize(n.outputs.size());
    for (size_t o = 0; o < n.outputs.size(); ++o) read[k][o] = r.output(o);
  }
  for (const TensorRef& t : g.outputs()) read[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)] = 1;
  for (const Node& n : g.nodes()) {
    const BackwardReads r = backward_reads(*n.op, n.attrs);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const TensorRef t = n.inputs[i];
      const auto k = static_cast<size_t>(t.node);
      lives.last_reader[k] = std::max(lives.last_reader[k], n.id);
      const bool rerun = segment(n.id) >= 0;
      if (rerun && segment(t.node) == segment(n.id)) lives.rerun_last_reader[k] = std::max(lives.rerun_last_reader[k], n.id);
      // A re-run reads its inputs again, unless it re-creates them too.
      if (r.input(i) || (rerun && segment(t.node) != segment(n.id))) read[k][static_cast<size_t>(t.output)] = 1;
    }
  }
  // One life per node (the runtime frees a node's outputs together): kept
  // or held through the re-run's backward when any of them is read.
  for (const Node& n : g.nodes()) {
    const auto k = static_cast<size_t>(n.id);
    const bool source = n.op->op_class == OpClass::kSource || layouts.is_layout(g, n.id);
    const bool any = std::find(read[k].begin(), read[k].end(), 1) != read[k].end();
    const OutputLife life = segment(n.id) >= 0 ? (any ? OutputLife::kRecomputed : OutputLife::kRecomputedPassing)
                                               : (source || any ? OutputLife::kKept : OutputLife::kFreed);
    lives.of[k].assign(n.outputs.size(), life);
  }
  return lives;
}

}  // namespace pcgx
