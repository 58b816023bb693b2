#include "pcgx/search/source_layout.h"

namespace pcgx::search {

SourceLayouts source_layouts(const Graph& g) {
  SourceLayouts s;
  s.of.assign(g.size(), Layout::kNone);
  for (const Node& n : g.nodes()) {
    Layout& l = s.of[static_cast<size_t>(n.id)];
    if (n.op->op_class == OpClass::kSource) {
      if (n.op->is_weight) l = Layout::kWeight;
      else if (!n.name.starts_with(kPieceInputPrefix)) l = Layout::kInput;
      continue;
    }
    const bool parallel = n.op->is_shard_level(n.attrs);
    if (!parallel && !n.op->weight_layout) continue;
    if (n.inputs.empty()) continue;
    bool weights = true, inputs = parallel;
    for (const TensorRef& t : n.inputs) {
      weights = weights && s.of[static_cast<size_t>(t.node)] == Layout::kWeight;
      inputs = inputs && s.of[static_cast<size_t>(t.node)] == Layout::kInput;
    }
    l = weights ? Layout::kWeight : inputs ? Layout::kInput : Layout::kNone;
  }
  return s;
}

}  // namespace pcgx::search
