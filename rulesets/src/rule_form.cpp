#include "pcgx/rulesets/rule_form.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "pcgx/pcg/graph_json.h"

namespace pcgx {
namespace {

std::string attr_text(const Node& n) {
  std::string s;
  auto add = [&](const std::string& x) { s += (s.empty() ? "" : ",") + x; };
  for (const auto& [k, v] : n.attrs.values()) {
    if (k == "activation" && std::get<std::string>(v) == "none") continue;
    if (k == "use_bias" && !std::get<bool>(v)) continue;
    if (n.op->attr_role(k) == AttrRole::kExtentParts) continue;  // matched in proportion, not by value
    add(k == "dim" ? "d" + to_string(v) : k == "axis" ? (std::get<int64_t>(v) < 0 ? "replica" : "axis" + to_string(v))
                                                     : to_string(v));
  }
  return s.empty() ? "" : "[" + s + "]";
}

std::string tensor_text(const Graph& g, TensorRef t) {
  const Node& n = g.node(t.node);
  if (n.op->op_class == OpClass::kSource) return n.name.empty() ? "in" + std::to_string(n.id) : n.name;
  std::string s = n.op->name + attr_text(n) + "(";
  for (size_t i = 0; i < n.inputs.size(); ++i) s += (i ? ", " : "") + tensor_text(g, n.inputs[i]);
  s += ")";
  if (t.output) s += "." + std::to_string(t.output);
  return s;
}

// Parallel state of a source, without sizes.
std::string state(const Node& n) {
  const auto& s = n.outputs[0];
  std::string out = std::string(n.op->is_weight ? "W" : "I") + (s.dtype == DataType::kInt64 ? "i" : "f");
  for (const auto& d : s.dims) out += "/" + std::to_string(d.degree);
  return out + "r" + std::to_string(s.replica);
}

// The smallest serialization of g over the topological orders of its
// operators (all of them up to 7 operators, else the stored order), with
// sources named by `name_of`.
std::string graph_form(const Graph& g, const std::vector<TensorRef>& outputs, std::map<NodeId, std::string>& names,
                       bool rename) {
  std::vector<NodeId> ops;
  for (const Node& n : g.nodes())
    if (n.op->op_class != OpClass::kSource) ops.push_back(n.id);
  std::string best;
  std::map<NodeId, std::string> best_names;
  std::vector<size_t> order(ops.size());
  std::iota(order.begin(), order.end(), 0);
  const bool exhaustive = ops.size() <= 7;
  do {
    std::map<NodeId, int> pos;
    for (size_t i = 0; i < order.size(); ++i) pos[ops[order[i]]] = static_cast<int>(i);
    bool topo = true;
    for (size_t i = 0; i < order.size() && topo; ++i)
      for (const TensorRef& t : g.node(ops[order[i]]).inputs)
        if (pos.count(t.node) && pos[t.node] > static_cast<int>(i)) topo = false;
    if (!topo) continue;
    std::map<NodeId, std::string> local = names;
    auto ref = [&](TensorRef t) {
      const Node& n = g.node(t.node);
      if (n.op->op_class == OpClass::kSource) {
        auto it = local.find(n.id);
        if (it == local.end()) {
          const std::string v = rename ? "$" + std::to_string(local.size()) + ":" + state(n) : n.name + ":" + state(n);
          it = local.emplace(n.id, v).first;
        }
        return it->second;
      }
      return "#" + std::to_string(pos[t.node]) + "." + std::to_string(t.output);
    };
    std::string s;
    for (size_t idx : order) {
      const Node& n = g.node(ops[idx]);
      s += n.op->name + attr_text(n) + "(";
      for (size_t i = 0; i < n.inputs.size(); ++i) s += (i ? "," : "") + ref(n.inputs[i]);
      s += ");";
    }
    s += "->";
    for (const TensorRef& t : outputs) s += ref(t) + ";";
    if (best.empty() || s < best) {
      best = s;
      best_names = local;
    }
  } while (exhaustive && std::next_permutation(order.begin(), order.end()));
  names = best_names;
  return best;
}

}  // namespace

std::string graph_text(const Graph& g) {
  std::string s;
  for (const TensorRef& t : g.outputs()) s += (s.empty() ? "" : " ; ") + tensor_text(g, t);
  return s;
}

std::string rule_text(const Rule& r) { return graph_text(r.source) + "  =>  " + graph_text(r.target); }

std::string rule_content(const Rule& r) {
  std::string out = graph_to_json(r.source, -1) + "\n=>\n" + graph_to_json(r.target, -1) + "\n";
  for (const auto& [a, b] : r.output_map) out += std::to_string(a) + ":" + std::to_string(b) + " ";
  return out;
}

std::string rule_key(const Rule& r, bool rename_inputs) {
  // Outputs are listed in output-map order; inputs named on the first side
  // carry over to the second, so the key records which inputs they share.
  std::vector<TensorRef> src_out, dst_out;
  for (const auto& [i, j] : r.output_map) {
    src_out.push_back(r.source.outputs()[static_cast<size_t>(i)]);
    dst_out.push_back(r.target.outputs()[static_cast<size_t>(j)]);
  }
  auto key = [&](const Graph& a, const std::vector<TensorRef>& ao, const Graph& b, const std::vector<TensorRef>& bo) {
    std::map<NodeId, std::string> names;
    const std::string ka = graph_form(a, ao, names, rename_inputs);
    std::map<std::string, std::string> by_name;
    for (const auto& [id, v] : names) by_name[a.node(id).name] = v;
    std::map<NodeId, std::string> names_b;
    for (const Node& n : b.nodes())
      if (n.op->op_class == OpClass::kSource && by_name.count(n.name)) names_b[n.id] = by_name[n.name];
    return ka + "=>" + graph_form(b, bo, names_b, rename_inputs);
  };
  return std::min(key(r.source, src_out, r.target, dst_out), key(r.target, dst_out, r.source, src_out));
}

}  // namespace pcgx
