#include "pcgx/search/rank_adapt.h"


#include "pcgx/pcg/error.h"

namespace pcgx::search {
namespace {


// Dimension d of a rank-3 tensor in the adapted rule; throws when it is the
// passive dimension being removed.
int64_t remap(int64_t d, int to) {
  if (to == 2) {
    if (d == 1) throw Error("names the dimension being removed");
    return d == 2 ? 1 : d;
  }
  return d >= 1 ? d + 1 : d;
}

Graph adapt_graph(const Graph& g, int to) {
  Graph out(g.name());
  for (const Node& n : g.nodes()) {
    Attributes a = n.attrs;
    std::vector<TensorRef> ins = n.inputs;  // ids are preserved: nodes are copied in order
    if (n.op->op_class == OpClass::kSource) {
      const auto& s = n.outputs[0];
      if (s.rank() == 3) {
        IntList shape = s.logical_shape(), degrees;
        for (const auto& d : s.dims) degrees.push_back(d.degree);
        if (to == 2) {
          if (degrees[1] != 1) throw Error("splits the dimension being removed");
          shape.erase(shape.begin() + 1);
          degrees.erase(degrees.begin() + 1);
        } else {
          shape.insert(shape.begin() + 1, 2);
          degrees.insert(degrees.begin() + 1, 1);
        }
        a.set("shape", shape);
        a.set("degrees", degrees);
      }
    } else {
      if (!n.op->any_rank) throw Error(n.op->name + " is not adapted across ranks");
      const int rank = g.shape(n.inputs[0]).rank();
      if (rank == 3) {
        for (const AttrSpec& spec : n.op->attrs) {
          if (spec.role != AttrRole::kDim && spec.role != AttrRole::kDimOrReplica) continue;
          int64_t d = a.get_int(spec.name);
          if (spec.role == AttrRole::kDim && d < 0) d += rank;  // counted from the end
          if (d >= 0) a.set(spec.name, remap(d, to));
        }
      }
    }
    out.add(*n.op, a, ins, n.name);
  }
  for (const TensorRef& t : g.outputs()) out.add_output(t);
  return out;
}

}  // namespace

std::optional<Rule> adapt_rank(const Rule& rule, int to) {
  if (to != 2 && to != 4) return std::nullopt;
  bool any = false;
  for (const Graph* g : {&rule.source, &rule.target})
    for (const Node& n : g->nodes())
      for (const auto& s : n.outputs) any = any || s.rank() == 3;
  if (!any) return std::nullopt;
  try {
    Rule r = rule;
    r.id = rule.id + "@" + std::to_string(to) + "d";
    r.source = adapt_graph(rule.source, to);
    r.target = adapt_graph(rule.target, to);
    return r;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace pcgx::search
