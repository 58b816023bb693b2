#include "pcgx/generator/opset.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/pcg/resources.h"

namespace pcgx::gen {
namespace {

std::vector<OpChoice> parse_list(const std::string& list, const std::string& what) {
  std::vector<OpChoice> out;
  size_t i = 0;
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
  };
  while (i < list.size()) {
    size_t end = i;
    int depth = 0;
    while (end < list.size() && (list[end] != ',' || depth > 0)) {
      depth += list[end] == '(' ? 1 : list[end] == ')' ? -1 : 0;
      ++end;
    }
    const std::string item = trim(list.substr(i, end - i));
    i = end + 1;
    if (item.empty()) continue;
    OpChoice c;
    const auto paren = item.find('(');
    c.op = trim(item.substr(0, paren));
    const OpDef* def = OpRegistry::global().find(c.op);
    if (!def) throw Error(what + ": unknown operator '" + c.op + "' (`pcgx ops` lists them)");
    if (def->op_class == OpClass::kSource) throw Error(what + ": " + c.op + " is a graph source, not an operator to enumerate");
    if (paren != std::string::npos) {
      if (item.back() != ')') throw Error(what + ": '" + item + "': expected Op(attr=v|v,...)");
      std::string body = item.substr(paren + 1, item.size() - paren - 2);
      size_t j = 0;
      while (j <= body.size()) {
        size_t stop = body.find(',', j);
        if (stop == std::string::npos) stop = body.size();
        const std::string kv = trim(body.substr(j, stop - j));
        j = stop + 1;
        if (kv.empty()) continue;
        const auto eq = kv.find('=');
        if (eq == std::string::npos) throw Error(what + ": '" + kv + "' in " + c.op + ": expected attr=value|value");
        const std::string name = trim(kv.substr(0, eq));
        auto spec = std::find_if(def->attrs.begin(), def->attrs.end(), [&](const AttrSpec& s) { return s.name == name; });
        if (spec == def->attrs.end()) throw Error(what + ": " + c.op + " has no attribute '" + name + "'");
        std::string values = kv.substr(eq + 1);
        size_t k = 0;
        while (k <= values.size()) {
          size_t b = values.find('|', k);
          if (b == std::string::npos) b = values.size();
          const std::string v = trim(values.substr(k, b - k));
          k = b + 1;
          try {
            switch (spec->type) {
              case AttrType::kInt: c.values[name].push_back(static_cast<int64_t>(std::stoll(v))); break;
              case AttrType::kFloat: c.values[name].push_back(std::stod(v)); break;
              case AttrType::kBool:
                if (v != "true" && v != "false") throw std::invalid_argument(v);
                c.values[name].push_back(v == "true");
                break;
              case AttrType::kString: c.values[name].push_back(v); break;
              case AttrType::kIntList: throw std::invalid_argument(v);
            }
          } catch (const std::exception&) {
            throw Error(what + ": " + c.op + "." + name + ": '" + v + "' is not a valid " +
                        std::string(to_string(spec->type)));
          }
          // Validate against the spec (choices, checks).
          Attributes probe;
          probe.set(name, c.values[name].back());
          try {
            normalize_attributes({*spec}, probe, c.op);
          } catch (const Error& e) {
            throw Error(what + ": " + e.what());
          }
        }
      }
    }
    out.push_back(std::move(c));
  }
  if (out.empty()) throw Error(what + ": no operators given");
  return out;
}

}  // namespace

std::string to_string(const OpChoice& c) {
  std::string s = c.op;
  if (c.values.empty()) return s;
  s += "(";
  bool first = true;
  for (const auto& [k, vs] : c.values) {
    s += (first ? "" : ",") + k + "=";
    first = false;
    for (size_t i = 0; i < vs.size(); ++i) s += (i ? "|" : "") + pcgx::to_string(vs[i]);
  }
  return s + ")";
}

namespace {

// What an opset's operators need from the input pool (OpDef::pool_inputs).
void derive_pools(Opset& s) {
  for (const auto& c : s.ops) {
    const OpDef* def = OpRegistry::global().find(c.op);
    if (!def) continue;  // parsing names the unknown operator
    for (const PoolInput p : def->pool_inputs) {
      s.index_inputs = s.index_inputs || p == PoolInput::kIndices;
      s.conv_kernels = s.conv_kernels || p == PoolInput::kConvKernels;
    }
    const auto vectors = std::count(def->pool_inputs.begin(), def->pool_inputs.end(), PoolInput::kVectorWeights);
    s.vector_weights = std::max(s.vector_weights, static_cast<int>(vectors));
  }
}

}  // namespace

std::string opsets_dir() { return shipped_dir(Shipped::kOpsets); }

Opset load_opset(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object() || j.value("format", "") != "pcgx.opset") throw Error(path + ": format: not \"pcgx.opset\"");
  Opset s;
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty()) throw Error(path + ": name: missing");
  s.name = j["name"].get<std::string>();
  s.description = j.value("description", "");
  if (j.contains("ndims")) {
    if (!j["ndims"].is_number_integer() || j["ndims"].get<int>() < 1) throw Error(path + ": ndims: not a positive integer");
    s.default_ndims = j["ndims"].get<int>();
  }
  if (!j.contains("ops") || !j["ops"].is_array()) throw Error(path + ": ops: missing (a list of operators, e.g. [\"Relu\", \"Pool2D(kernel_h=2,kernel_w=2)\"])");
  std::string list;
  for (const auto& op : j["ops"]) {
    if (!op.is_string()) throw Error(path + ": ops: not a list of strings");
    list += (list.empty() ? "" : ",") + op.get<std::string>();
  }
  s.ops = parse_list(list, path + ": ops");
  derive_pools(s);
  return s;
}

const std::vector<Opset>& named_opsets() {
  static const std::vector<Opset> sets = [] {
    std::vector<Opset> v;
    // The shipped opsets, then each plugin's (pcg/plugin.h); a name is
    // taken once, by the first directory that has it.
    for (const std::string& dir : search_path(Shipped::kOpsets)) {
      std::vector<std::filesystem::path> files;
      std::error_code ec;
      for (const auto& f : std::filesystem::directory_iterator(dir, ec))
        if (f.path().extension() == ".json") files.push_back(f.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        Opset s = load_opset(f.string());
        if (s.name != f.stem().string()) throw Error(f.string() + ": name: '" + s.name + "', not the file's");
        if (std::none_of(v.begin(), v.end(), [&](const Opset& o) { return o.name == s.name; })) v.push_back(std::move(s));
      }
    }
    return v;
  }();
  return sets;
}

const Opset* find_opset_or_null(const std::string& name) {
  for (const auto& s : named_opsets())
    if (s.name == name) return &s;
  return nullptr;
}

const Opset& find_opset(const std::string& name) {
  if (const Opset* s = find_opset_or_null(name)) return *s;
  std::string known;
  for (const auto& s : named_opsets()) known += (known.empty() ? "" : ", ") + s.name;
  throw FieldError("Opset.name", "unknown operator set '" + name + "' (known: " + known + "; or give an opset file)");
}

Opset resolve_opset(const std::string& name_or_file) {
  if (name_or_file.find('/') != std::string::npos || name_or_file.ends_with(".json")) return load_opset(name_or_file);
  return find_opset(name_or_file);
}

Opset parse_ops(const std::string& list) {
  Opset s;
  s.name = "custom";
  s.description = "operators given as a list";
  s.ops = parse_list(list, "Opset.ops");
  derive_pools(s);
  return s;
}

std::vector<std::string> Opset::operators() const {
  std::vector<std::string> out;
  for (const OpChoice& c : ops)
    if (std::find(out.begin(), out.end(), c.op) == out.end()) out.push_back(c.op);
  return out;
}

}  // namespace pcgx::gen
