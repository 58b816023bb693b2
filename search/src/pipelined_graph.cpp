// A graph cut into micro-batches (pipeline.h's pipelined).
#include <map>

#include "pcgx/pcg/error.h"
#include "pcgx/search/pipeline.h"

namespace pcgx::search {

Graph pipelined(const Graph& g, int64_t m, bool last, std::vector<NodeId>* image) {
  Graph out(g.name());
  std::map<TensorRef, TensorRef> map;
  if (image) image->assign(g.size(), -1);
  for (const Node& n : g.nodes()) {
    std::vector<TensorRef> ins;
    for (const TensorRef& i : n.inputs) ins.push_back(map.at(i));
    const NodeId id = out.add(*n.op, n.attrs, ins, n.name);
    if (image) (*image)[static_cast<size_t>(n.id)] = id;
    for (int32_t o = 0; o < static_cast<int32_t>(n.outputs.size()); ++o) map[{n.id, o}] = {id, o};
    if (n.op->op_class == OpClass::kSource && !n.op->is_weight && n.outputs[0].rank() > 0) {
      try {
        map[{n.id, 0}] = {out.add("Pipeline", {{"dim", int64_t{0}}, {"degree", m}}, {{id, 0}}), 0};
      } catch (const Error& e) {
        throw Error("input '" + n.name + "' cannot be cut into " + std::to_string(m) + " micro-batches: " + e.what());
      }
    }
  }
  for (const TensorRef& o : g.outputs()) {
    TensorRef t = map.at(o);
    if (last)
      for (int64_t d = 0; d < out.shape(t).rank(); ++d)
        if (const int64_t p = out.shape(t).dims[static_cast<size_t>(d)].pipeline; p > 1)
          t = {out.add("Batch", {{"dim", d}, {"degree", p}}, {t}), 0};
    out.add_output(t);
  }
  return out;
}

}  // namespace pcgx::search
