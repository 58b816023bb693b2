// Efficiency tables, measured profiles, machines by name (see cost_model.h).
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json_value.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/resources.h"
#include "pcgx/search/cost_model.h"

namespace pcgx::search {
namespace {

using nlohmann::json;

double number(const json& v, const std::string& source, const std::string& field, bool positive) {
  if (!v.is_number()) throw FileError(source, field, "expected a number");
  const double x = v.get<double>();
  if (x < 0 || (positive && x <= 0)) throw FileError(source, field, positive ? "must be positive" : "must not be negative");
  return x;
}

json parse(const std::string& text, const std::string& source, const std::string& kind) {
  const json j = parse_json_document(text, source);
  if (!j.is_object()) throw FileError(source, "", "expected a JSON object");
  if (!j.contains("kind") || j["kind"] != kind) throw FileError(source, "kind", "expected \"" + kind + "\"");
  if (!j.contains("format_version") || j["format_version"] != 1) throw FileError(source, "format_version", "expected 1");
  return j;
}

OpEfficiency read_efficiency(const json& v, const std::string& source, const std::string& field, OpEfficiency e) {
  if (!v.is_object()) throw FileError(source, field, "expected an object");
  for (const auto& [key, x] : v.items()) {
    if (key == "compute") e.compute = number(x, source, field + ".compute", true);
    else if (key == "memory") e.memory = number(x, source, field + ".memory", true);
    else if (key == "backward") e.backward = number(x, source, field + ".backward", false);
    else if (key == "view") {
      if (!x.is_boolean()) throw FileError(source, field + ".view", "expected true or false");
      e.view = x.get<bool>();
    } else {
      throw FileError(source, field + "." + key, "unknown field (compute, memory, backward, view)");
    }
  }
  return e;
}

}  // namespace

const OpEfficiency& Efficiency::of(const std::string& op) const {
  auto it = ops.find(op);
  return it == ops.end() ? fallback : it->second;
}

Efficiency efficiency_from_json(const std::string& text, const std::string& source) {
  const json j = parse(text, source, "pcgx.efficiency");
  Efficiency e;
  if (j.contains("launch")) e.launch = number(j["launch"], source, "launch", false);
  if (j.contains("default")) e.fallback = read_efficiency(j["default"], source, "default", e.fallback);
  if (j.contains("ops")) {
    if (!j["ops"].is_object()) throw FileError(source, "ops", "expected an object");
    for (const auto& [name, v] : j["ops"].items())
      e.ops[name] = read_efficiency(v, source, "ops." + name, e.fallback);
  }
  return e;
}

Efficiency load_efficiency(const std::string& path) { return efficiency_from_json(read_text_file(path), path); }

std::string data_dir() { return shipped_dir(Shipped::kData); }

std::vector<std::string> machine_names() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/machines", ec))
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

Machine find_machine(const std::string& name_or_path) {
  std::error_code ec;
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json")) return load_machine(name_or_path);
  const std::string path = data_dir() + "/machines/" + name_or_path + ".json";
  if (std::filesystem::exists(path, ec)) return load_machine(path);
  std::string known;
  for (const auto& n : machine_names()) known += (known.empty() ? "" : ", ") + n;
  throw FieldError("Machine.name", "unknown machine '" + name_or_path + "' (known: " + known + "; or a machine JSON file)");
}

Efficiency default_efficiency() { return load_efficiency(data_dir() + "/cost/efficiency.json"); }

}  // namespace pcgx::search
