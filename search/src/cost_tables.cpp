// Efficiency tables, measured profiles, machines by name (see cost_model.h).
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
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
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw FileError(source, "", std::string("malformed JSON: ") + e.what());
  }
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

std::string profile_key(const std::string& op, std::span<const std::vector<int64_t>> input_shapes) {
  std::string k = op;
  for (const auto& s : input_shapes) {
    k += '|';
    for (size_t i = 0; i < s.size(); ++i) k += (i ? "x" : "") + std::to_string(s[i]);
  }
  return k;
}

Profile profile_from_json(const std::string& text, const std::string& source) {
  const json j = parse(text, source, "pcgx.profile");
  Profile p;
  if (j.contains("device") && j["device"].is_string()) p.device = j["device"].get<std::string>();
  if (!j.contains("entries") || !j["entries"].is_array()) throw FileError(source, "entries", "expected an array");
  for (size_t i = 0; i < j["entries"].size(); ++i) {
    const json& e = j["entries"][i];
    const std::string f = "entries[" + std::to_string(i) + "]";
    if (!e.is_object() || !e.contains("op") || !e["op"].is_string()) throw FileError(source, f + ".op", "expected an operator name");
    if (!e.contains("inputs") || !e["inputs"].is_array()) throw FileError(source, f + ".inputs", "expected a list of shapes");
    std::vector<std::vector<int64_t>> shapes;
    for (const json& s : e["inputs"]) {
      if (!s.is_array()) throw FileError(source, f + ".inputs", "expected a list of shapes");
      std::vector<int64_t> shape;
      for (const json& x : s) {
        if (!x.is_number_integer() || x.get<int64_t>() <= 0) throw FileError(source, f + ".inputs", "sizes must be positive integers");
        shape.push_back(x.get<int64_t>());
      }
      shapes.push_back(std::move(shape));
    }
    if (!e.contains("forward")) throw FileError(source, f + ".forward", "missing");
    if (!e.contains("backward")) throw FileError(source, f + ".backward", "missing");
    p.times[profile_key(e["op"].get<std::string>(), shapes)] = {number(e["forward"], source, f + ".forward", false),
                                                                number(e["backward"], source, f + ".backward", false)};
  }
  if (j.contains("update")) {
    const json& u = j["update"];
    if (!u.is_object() || !u.contains("bytes_per_second")) throw FileError(source, "update.bytes_per_second", "missing");
    p.update_bytes_per_second = number(u["bytes_per_second"], source, "update.bytes_per_second", true);
  }
  return p;
}

Profile load_profile(const std::string& path) { return profile_from_json(read_text_file(path), path); }

std::string data_dir() {
  if (const char* d = std::getenv("PCGX_DATA_DIR"); d && *d) return d;
  return PCGX_DEFAULT_DATA_DIR;
}

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
  throw Error("--machine: unknown machine '" + name_or_path + "' (known: " + known + "; or a machine JSON file)");
}

Efficiency default_efficiency() { return load_efficiency(data_dir() + "/cost/efficiency.json"); }

}  // namespace pcgx::search
