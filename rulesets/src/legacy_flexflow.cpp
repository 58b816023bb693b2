#include "pcgx/rulesets/legacy_flexflow.h"

#include <map>
#include <nlohmann/json.hpp>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json_value.h"

namespace pcgx {

using nlohmann::json;

namespace {

constexpr int kFirstWeight = 4;  // legacy inputs -4, -5, ... are weights

int map_dim(int64_t legacy, int rank, LegacyDims dims) {
  if (legacy < 0 || legacy >= rank)
    throw Error("dimension " + std::to_string(legacy) + " out of range for a rank-" + std::to_string(rank) + " tensor");
  return dims == LegacyDims::kReversed ? rank - 1 - static_cast<int>(legacy) : static_cast<int>(legacy);
}

// An operator or tensor number of a legacy file: 32-bit, never wrapped
// (2^32 would read as operator 0).
int legacy_id(const json& t, const char* key) {
  const json& v = t.at(key);
  if (!v.is_number_integer()) throw Error(std::string(key) + " must be an integer");
  const int64_t i = v.get<int64_t>();
  if (i < INT32_MIN || i > INT32_MAX) throw Error(std::string(key) + " " + std::to_string(i) + " is not a 32-bit integer");
  return static_cast<int>(i);
}

int64_t param(const json& op, const char* key) {
  for (const auto& p : op.at("para"))
    if (p.at("key") == key) return p.at("value").get<int64_t>();
  throw Error(op.at("type").get<std::string>() + " lacks parameter " + key);
}

// The FlexFlow operator types pcgx reads and writes, and how each carries
// its parameters. The format names operators, so this table is the one
// place that pairs the two vocabularies; import and export both read it.
enum class LegacyParams : uint8_t { kNone, kDimDegree, kReplicaDegree, kActivation, kConcat, kSplit };
struct LegacyOp {
  const char* type;
  const char* op;
  LegacyParams params;
};
constexpr LegacyOp kLegacyOps[] = {
    {"OP_PARTITION", "Repartition", LegacyParams::kDimDegree}, {"OP_COMBINE", "Combine", LegacyParams::kDimDegree},
    {"OP_REPLICATE", "Replicate", LegacyParams::kReplicaDegree}, {"OP_REDUCE", "Reduce", LegacyParams::kReplicaDegree},
    {"OP_LINEAR", "Linear", LegacyParams::kActivation},          {"OP_RELU", "Relu", LegacyParams::kNone},
    {"OP_EW_ADD", "EwAdd", LegacyParams::kNone},                 {"OP_EW_MUL", "EwMul", LegacyParams::kNone},
    {"OP_CONCAT", "Concat", LegacyParams::kConcat},              {"OP_SPLIT", "Split", LegacyParams::kSplit},
};
const LegacyOp* legacy_by_type(const std::string& type) {
  for (const LegacyOp& l : kLegacyOps)
    if (type == l.type) return &l;
  return nullptr;
}
const LegacyOp* legacy_by_op(const std::string& op) {
  for (const LegacyOp& l : kLegacyOps)
    if (op == l.op) return &l;
  return nullptr;
}

// Parallel state of each legacy input, inferred from the parallel operators
// applied to it directly: Reduce(k) needs replica degree k, Combine(d, k)
// degree k on d. Legacy inputs carry no state, pcgx inputs must.
struct InputState {
  int64_t replica = 1;
  std::map<int, int64_t> degree;  // legacy dimension -> degree
};

void infer_input_states(const json& ops, std::map<int, InputState>& states) {
  for (const json& op : ops) {
    const std::string type = op.at("type").get<std::string>();
    const json& in = op.at("input");
    if (in.empty() || legacy_id(in[0], "opId") >= 0) continue;
    InputState& s = states[legacy_id(in[0], "opId")];
    if (type == "OP_REDUCE") s.replica = std::max(s.replica, param(op, "PM_PARALLEL_DEGREE"));
    if (type == "OP_COMBINE") {
      int64_t& d = s.degree[static_cast<int>(param(op, "PM_PARALLEL_DIM"))];
      d = std::max(d, param(op, "PM_PARALLEL_DEGREE"));
    }
  }
}

// Builds one side of a legacy rule; `outputs` are the (opId, tsId) to expose.
Graph build_side(const json& ops, const std::vector<std::pair<int, int>>& outputs, LegacyDims dims, int64_t size,
                 const std::map<int, InputState>& states) {
  Graph g;
  std::map<int, NodeId> inputs;
  std::vector<NodeId> node_of_op;
  auto input = [&](int id) -> TensorRef {
    auto it = inputs.find(id);
    if (it == inputs.end()) {
      const bool weight = -id >= kFirstWeight;
      const int rank = weight ? 2 : 3;
      IntList shape(static_cast<size_t>(rank), size), degrees(static_cast<size_t>(rank), 1);
      int64_t replica = 1;
      if (auto st = states.find(id); st != states.end()) {
        replica = st->second.replica;
        for (const auto& [d, k] : st->second.degree) degrees[static_cast<size_t>(map_dim(d, rank, dims))] = k;
      }
      it = inputs.emplace(id, g.add(weight ? "Weight" : "Input", {{"shape", shape}, {"degrees", degrees}, {"replica", replica}},
                                    {}, "in" + std::to_string(-id)))
               .first;
    }
    return {it->second, 0};
  };
  auto tensor = [&](const json& t) -> TensorRef {
    const int op = legacy_id(t, "opId"), ts = legacy_id(t, "tsId");
    if (op < 0) return input(op);
    if (op >= static_cast<int>(node_of_op.size())) throw Error("refers to operator " + std::to_string(op) + " before it exists");
    return {node_of_op[static_cast<size_t>(op)], ts};
  };
  for (const json& op : ops) {
    const std::string type = op.at("type").get<std::string>();
    std::vector<TensorRef> ins;
    for (const json& t : op.at("input")) ins.push_back(tensor(t));
    const int rank = ins.empty() ? 0 : g.shape(ins[0]).rank();
    const LegacyOp* l = legacy_by_type(type);
    if (!l) throw Error("operator " + type + " has no pcgx equivalent");
    Attributes a;
    switch (l->params) {
      case LegacyParams::kNone: break;
      case LegacyParams::kDimDegree:
        a = {{"dim", static_cast<int64_t>(map_dim(param(op, "PM_PARALLEL_DIM"), rank, dims))}, {"degree", param(op, "PM_PARALLEL_DEGREE")}};
        break;
      case LegacyParams::kReplicaDegree: a = {{"degree", param(op, "PM_PARALLEL_DEGREE")}}; break;
      case LegacyParams::kActivation: {
        const int64_t acti = param(op, "PM_ACTI");
        if (acti != 0 && acti != 2) throw Error("activation code " + std::to_string(acti) + " has no pcgx equivalent");
        a = {{"activation", std::string(acti == 2 ? "relu" : "none")}};
        break;
      }
      case LegacyParams::kConcat: a = {{"axis", static_cast<int64_t>(map_dim(param(op, "PM_AXIS"), rank, dims))}}; break;
      case LegacyParams::kSplit: {
        const int axis = map_dim(param(op, "PM_AXIS"), rank, dims);
        const int64_t parts = param(op, "PM_NUM_OUTPUTS");
        const int64_t extent = g.shape(ins.at(0)).dims[static_cast<size_t>(axis)].size;
        if (parts < 1 || extent % parts != 0) throw Error("cannot split size " + std::to_string(extent) + " into " + std::to_string(parts));
        a = {{"axis", static_cast<int64_t>(axis)}, {"sizes", IntList(static_cast<size_t>(parts), extent / parts)}};
        break;
      }
    }
    node_of_op.push_back(g.add(l->op, a, ins));
  }
  for (const auto& [op, ts] : outputs) {
    if (op < 0) {
      g.add_output(input(op));
    } else {
      if (op >= static_cast<int>(node_of_op.size())) throw Error("mapped output names a missing operator");
      g.add_output({node_of_op[static_cast<size_t>(op)], ts});
    }
  }
  return g;
}

}  // namespace

LegacyImport import_flexflow(const std::string& text, const std::string& source, LegacyDims dims, int64_t size) {
  const json root = parse_json_document(text, source);
  if (!root.is_object() || !root.contains("rule") || !root["rule"].is_array())
    throw FileError(source, "rule", "expected a RuleCollection with a \"rule\" array");
  LegacyImport out;
  out.rules.kind = kCandidatesKind;
  out.rules.name = "flexflow-import";
  out.rules.opset = "flexflow";
  for (const LegacyOp& l : kLegacyOps) out.rules.operators.emplace_back(l.op);
  out.rules.generator_json = json{{"imported_from", source},
                                  {"dims", dims == LegacyDims::kReversed ? "reversed" : "forward"},
                                  {"size", size}}
                                 .dump();
  const json& rules = root["rule"];
  for (size_t i = 0; i < rules.size(); ++i) {
    const json& r = rules[i];
    LegacyRule lr;
    try {
      lr.name = r.value("name", "rule" + std::to_string(i));
      std::vector<std::pair<int, int>> src_out, dst_out;
      for (const json& m : r.at("mappedOutput")) {
        src_out.emplace_back(legacy_id(m, "srcOpId"), legacy_id(m, "srcTsId"));
        dst_out.emplace_back(legacy_id(m, "dstOpId"), legacy_id(m, "dstTsId"));
      }
      Rule rule;
      rule.id = lr.name;
      std::map<int, InputState> states;
      infer_input_states(r.at("srcOp"), states);
      infer_input_states(r.at("dstOp"), states);
      try {
        rule.source = build_side(r.at("srcOp"), src_out, dims, size, states);
      } catch (const Error& e) {
        throw Error(std::string("source: ") + e.what());
      }
      try {
        rule.target = build_side(r.at("dstOp"), dst_out, dims, size, states);
      } catch (const Error& e) {
        throw Error(std::string("target: ") + e.what());
      }
      for (size_t k = 0; k < src_out.size(); ++k) rule.output_map.emplace_back(static_cast<int>(k), static_cast<int>(k));
      lr.expressible = true;
      lr.index = static_cast<int>(out.rules.rules.size());
      out.rules.rules.push_back(std::move(rule));
    } catch (const Error& e) {
      lr.reason = e.what();
    } catch (const json::exception& e) {
      throw FileError(source, "rule[" + std::to_string(i) + "]", std::string("malformed rule: ") + e.what());
    }
    out.legacy.push_back(std::move(lr));
  }
  return out;
}

std::string export_flexflow(const Ruleset& r, LegacyDims dims, std::vector<std::string>& skipped) {
  json rules = json::array();
  for (const Rule& rule : r.rules) {
    try {
      std::map<std::string, int> input_ids;
      auto side = [&](const Graph& g, std::vector<std::pair<int, int>>& outs, const std::vector<TensorRef>& mapped) {
        json ops = json::array();
        std::map<NodeId, int> op_of;
        auto ref = [&](TensorRef t) -> json {
          const Node& n = g.node(t.node);
          if (n.op->op_class == OpClass::kSource) {
            if (!n.outputs[0].is_unpartitioned()) throw Error("input " + n.name + " is partitioned; legacy inputs cannot be");
            auto it = input_ids.find(n.name);
            if (it == input_ids.end()) {
              // Keep legacy ids ("in4" is -4); number other inputs after them.
              int id = 0;
              if (n.name.size() > 2 && n.name.rfind("in", 0) == 0 &&
                  n.name.find_first_not_of("0123456789", 2) == std::string::npos)
                id = -std::stoi(n.name.substr(2));
              auto taken = [&](int v) {
                for (const auto& [other, used] : input_ids)
                  if (used == v) return true;
                return false;
              };
              if (id != 0 && (taken(id) || (-id >= kFirstWeight) != n.op->is_weight)) id = 0;
              // Legacy convention: activations are -1..-3, weights -4 and below.
              for (int v = n.op->is_weight ? -kFirstWeight : -1; id == 0; --v) {
                if (!n.op->is_weight && -v >= kFirstWeight) throw Error("more than 3 activation inputs");
                if (!taken(v)) id = v;
              }
              it = input_ids.emplace(n.name, id).first;
            }
            return {{"_t", "Tensor"}, {"opId", it->second}, {"tsId", 0}};
          }
          return {{"_t", "Tensor"}, {"opId", op_of.at(t.node)}, {"tsId", t.output}};
        };
        for (const Node& n : g.nodes()) {
          if (n.op->op_class == OpClass::kSource) continue;
          const int rank = g.shape(n.inputs.at(0)).rank();
          auto legacy_dim = [&](int64_t d) { return dims == LegacyDims::kReversed ? rank - 1 - d : d; };
          json op{{"_t", "Operator"}, {"input", json::array()}, {"para", json::array()}};
          auto para = [&](const char* k, int64_t v) { op["para"].push_back({{"_t", "Parameter"}, {"key", k}, {"value", v}}); };
          const LegacyOp* l = legacy_by_op(n.op->name);
          // FlexFlow has no replica-axis Concat or Split.
          if (!l || n.op->is_shard_level(n.attrs))
            throw Error(n.op->name + (l ? " on the replica axis" : "") + " has no legacy equivalent");
          op["type"] = l->type;
          switch (l->params) {
            case LegacyParams::kNone: break;
            case LegacyParams::kDimDegree:
              para("PM_PARALLEL_DIM", legacy_dim(n.attrs.get_int("dim")));
              para("PM_PARALLEL_DEGREE", n.attrs.get_int("degree"));
              break;
            case LegacyParams::kReplicaDegree:
              para("PM_PARALLEL_DIM", rank);  // the replica dimension follows the data dimensions
              para("PM_PARALLEL_DEGREE", n.attrs.get_int("degree"));
              break;
            case LegacyParams::kActivation: {
              const std::string& act = n.attrs.get_string("activation");
              if ((act != "none" && act != "relu") || n.attrs.get_bool("use_bias"))
                throw Error(n.op->name + " with activation " + act + (n.attrs.get_bool("use_bias") ? " and a bias" : ""));
              para("PM_ACTI", act == "relu" ? 2 : 0);
              break;
            }
            case LegacyParams::kConcat:
              para("PM_AXIS", legacy_dim(n.attrs.get_int("axis")));
              para("PM_NUMDIM", rank);
              para("PM_NUM_INPUTS", static_cast<int64_t>(n.inputs.size()));
              break;
            case LegacyParams::kSplit: {
              const IntList& sizes = n.attrs.get_ints("sizes");
              for (int64_t s : sizes)
                if (s != sizes[0]) throw Error(n.op->name + " into unequal pieces");
              para("PM_AXIS", legacy_dim(n.attrs.get_int("axis")));
              para("PM_NUM_OUTPUTS", static_cast<int64_t>(sizes.size()));
              break;
            }
          }
          for (const TensorRef& t : n.inputs) op["input"].push_back(ref(t));
          op_of[n.id] = static_cast<int>(ops.size());
          ops.push_back(std::move(op));
        }
        for (const TensorRef& t : mapped) {
          const json j = ref(t);
          outs.emplace_back(j["opId"].get<int>(), j["tsId"].get<int>());
        }
        return ops;
      };
      std::vector<TensorRef> src_mapped, dst_mapped;
      for (const auto& [i, j] : rule.output_map) {
        src_mapped.push_back(rule.source.outputs()[static_cast<size_t>(i)]);
        dst_mapped.push_back(rule.target.outputs()[static_cast<size_t>(j)]);
      }
      std::vector<std::pair<int, int>> so, dout;
      json src = side(rule.source, so, src_mapped);
      json dst = side(rule.target, dout, dst_mapped);
      json mapped = json::array();
      for (size_t k = 0; k < so.size(); ++k)
        mapped.push_back({{"_t", "MapOutput"}, {"srcOpId", so[k].first}, {"srcTsId", so[k].second},
                          {"dstOpId", dout[k].first}, {"dstTsId", dout[k].second}});
      rules.push_back({{"_t", "Rule"}, {"name", rule.id}, {"srcOp", src}, {"dstOp", dst}, {"mappedOutput", mapped}});
    } catch (const Error& e) {
      skipped.push_back(rule.id + ": " + e.what());
    }
  }
  return json{{"_t", "RuleCollection"}, {"rule", rules}}.dump(1) + "\n";
}

}  // namespace pcgx
