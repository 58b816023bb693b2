#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/graph_json_value.h"

#include <map>

#include "json_fields.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"

namespace pcgx {

using json_fields::index;
using json_fields::join;
using json_fields::json;
using json_fields::Reader;

namespace {

json attr_to_json(const AttrValue& v) {
  return std::visit([](const auto& x) { return json(x); }, v);
}

AttrValue attr_from_json(const Reader& r, const AttrSpec& spec, const json& v, const std::string& path) {
  switch (spec.type) {
    case AttrType::kInt: return r.get_int(v, path);
    case AttrType::kFloat: return r.get_number(v, path);
    case AttrType::kBool: return r.get_bool(v, path);
    case AttrType::kString: return r.get_string(v, path);
    case AttrType::kIntList: {
      if (!v.is_array()) r.fail(path, std::string("must be a list of integers, got ") + v.type_name());
      IntList list;
      for (size_t i = 0; i < v.size(); ++i) list.push_back(r.get_int(v[i], index(path, i)));
      return list;
    }
  }
  r.fail(path, "unsupported attribute type");
}

// Node ids and output indices are 32-bit: a larger number is an error, not
// an id that wraps onto another node.
int32_t get_index(const Reader& r, const json& v, const std::string& path) {
  const int64_t i = r.get_int(v, path);
  if (i < 0 || i > INT32_MAX) r.fail(path, "must be a non-negative 32-bit integer, got " + std::to_string(i));
  return static_cast<int32_t>(i);
}

TensorRef ref_from_json(const Reader& r, const json& v, const std::string& path) {
  if (v.is_number_integer()) return {static_cast<NodeId>(get_index(r, v, path)), 0};
  if (!v.is_array() || v.size() != 2) r.fail(path, "must be a node id or a [node id, output] pair");
  return {static_cast<NodeId>(get_index(r, v[0], index(path, 0))), get_index(r, v[1], index(path, 1))};
}

}  // namespace

std::string graph_to_json(const Graph& g, int indent) { return graph_to_value(g).dump(indent) + "\n"; }

Graph graph_from_json(const std::string& text, const std::string& source) {
  const Reader r(source);
  return graph_from_value(r.parse(text), source, "");
}

json graph_to_value(const Graph& g) {
  json root;
  root["format_version"] = kGraphFormatVersion;
  root["kind"] = "pcgx.graph";
  root["name"] = g.name();
  json nodes = json::array();
  for (const Node& n : g.nodes()) {
    json j;
    j["id"] = n.id;
    j["op"] = n.op->name;
    if (!n.name.empty()) j["name"] = n.name;
    json attrs = json::object();
    for (const auto& [k, v] : n.attrs.values()) attrs[k] = attr_to_json(v);
    j["attrs"] = attrs;
    json ins = json::array();
    for (const TensorRef& t : n.inputs) ins.push_back(json::array({t.node, t.output}));
    j["inputs"] = ins;
    nodes.push_back(std::move(j));
  }
  root["nodes"] = std::move(nodes);
  json outs = json::array();
  for (const TensorRef& t : g.outputs()) outs.push_back(json::array({t.node, t.output}));
  root["outputs"] = outs;
  return root;
}

json parse_json_document(const std::string& text, const std::string& source) { return json_fields::Reader(source).parse(text); }
std::string json_message(const json::exception& e) { return json_fields::without_prefix(e); }

Graph graph_from_value(const json& root, const std::string& source, const std::string& prefix) {
  const Reader r(source, prefix);
  r.expect_object(root, "");
  r.only_keys(root, {"format_version", "kind", "name", "description", "nodes", "outputs"}, "");
  r.check_version(root, kGraphFormatVersion, "pcgx.graph");
  Graph g;
  if (const json* name = r.optional(root, "name")) g.set_name(r.get_string(*name, "name"));

  const json& nodes = r.field(root, "nodes", "");
  if (!nodes.is_array()) r.fail("nodes", std::string("must be an array, got ") + nodes.type_name());

  // First pass: read every node's fields and check them against its operator.
  struct Pending {
    NodeId file_id;
    const OpDef* op;
    std::string name;
    Attributes attrs;
    std::vector<TensorRef> inputs;  // file ids
  };
  std::vector<Pending> pending;
  std::map<NodeId, size_t> by_id;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string path = index("nodes", i);
    const json& n = nodes[i];
    r.expect_object(n, path);
    r.only_keys(n, {"id", "op", "name", "attrs", "inputs"}, path);
    Pending p;
    const NodeId id = get_index(r, r.field(n, "id", path), join(path, "id"));
    p.file_id = id;
    if (!by_id.emplace(p.file_id, i).second) r.fail(join(path, "id"), "duplicate node id " + std::to_string(id));
    const std::string op = r.get_string(r.field(n, "op", path), join(path, "op"));
    p.op = OpRegistry::global().find(op);
    if (!p.op) r.fail(join(path, "op"), "unknown operator '" + op + "'");
    if (const json* name = r.optional(n, "name")) p.name = r.get_string(*name, join(path, "name"));
    if (const json* attrs = r.optional(n, "attrs")) {
      r.expect_object(*attrs, join(path, "attrs"));
      for (auto it = attrs->begin(); it != attrs->end(); ++it) {
        const std::string apath = join(join(path, "attrs"), it.key());
        const AttrSpec* spec = nullptr;
        for (const auto& s : p.op->attrs)
          if (s.name == it.key()) spec = &s;
        if (!spec) r.fail(apath, "unknown attribute of " + op);
        p.attrs.set(it.key(), attr_from_json(r, *spec, it.value(), apath));
      }
    }
    if (const json* ins = r.optional(n, "inputs")) {
      if (!ins->is_array()) r.fail(join(path, "inputs"), "must be an array");
      for (size_t j = 0; j < ins->size(); ++j) p.inputs.push_back(ref_from_json(r, (*ins)[j], index(join(path, "inputs"), j)));
    }
    pending.push_back(std::move(p));
  }

  // Topological order (file order among ready nodes), reporting cycles.
  std::vector<int> state(pending.size(), 0);  // 0 new, 1 on stack, 2 done
  std::vector<size_t> order;
  std::vector<size_t> stack;
  for (size_t root_i = 0; root_i < pending.size(); ++root_i) {
    if (state[root_i]) continue;
    std::vector<std::pair<size_t, size_t>> work{{root_i, 0}};
    state[root_i] = 1;
    while (!work.empty()) {
      auto& [i, next] = work.back();
      if (next < pending[i].inputs.size()) {
        const TensorRef t = pending[i].inputs[next++];
        auto it = by_id.find(t.node);
        if (it == by_id.end())
          r.fail(index(join(index("nodes", i), "inputs"), next - 1), "refers to unknown node " + std::to_string(t.node));
        const size_t j = it->second;
        if (state[j] == 1) {
          std::string cycle;
          bool in = false;
          for (const auto& w : work) {
            in = in || w.first == j;
            if (in) cycle += (cycle.empty() ? "" : " -> ") + std::to_string(pending[w.first].file_id);
          }
          r.fail("nodes", "cycle through nodes " + cycle + " -> " + std::to_string(pending[j].file_id));
        }
        if (state[j] == 0) {
          state[j] = 1;
          work.push_back({j, 0});
        }
      } else {
        state[i] = 2;
        order.push_back(i);
        work.pop_back();
      }
    }
  }

  std::map<NodeId, NodeId> new_id;
  for (size_t i : order) {
    Pending& p = pending[i];
    for (size_t j = 0; j < p.inputs.size(); ++j) p.inputs[j].node = new_id.at(p.inputs[j].node);
    try {
      new_id[p.file_id] = g.add(*p.op, p.attrs, p.inputs, p.name);
    } catch (const FileError&) {
      throw;
    } catch (const Error& e) {
      r.fail(index("nodes", i), e.what());
    }
  }
  if (const json* outs = r.optional(root, "outputs")) {
    if (!outs->is_array()) r.fail("outputs", "must be an array");
    for (size_t j = 0; j < outs->size(); ++j) {
      TensorRef t = ref_from_json(r, (*outs)[j], index("outputs", j));
      auto it = new_id.find(t.node);
      if (it == new_id.end()) r.fail(index("outputs", j), "refers to unknown node " + std::to_string(t.node));
      t.node = it->second;
      if (t.output < 0 || t.output >= static_cast<int>(g.node(t.node).outputs.size()))
        r.fail(index("outputs", j), "node " + std::to_string(it->first) + " has no output " + std::to_string(t.output));
      g.add_output(t);
    }
  }
  return g;
}

Graph load_graph(const std::string& path) { return graph_from_json(read_text_file(path), path); }

void save_graph(const Graph& g, const std::string& path) { write_text_file_atomic(path, graph_to_json(g)); }

}  // namespace pcgx
