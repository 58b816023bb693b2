#include "pcgx/runner/model_source.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pcgx/importer/onnx_import.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/resources.h"

namespace pcgx::runner {

LoadedModel load_model(const std::string& source, const ModelParams& sizes) {
  if (source.size() > 5 && source.ends_with(".onnx") && std::filesystem::exists(source)) {
    importer::ImportOptions o;
    for (const auto& [k, v] : sizes) {
      if (k != "batch") throw FieldError("ModelParams." + k, "an ONNX model takes only batch (its symbolic batch dimension)");
      o.batch = v;
    }
    importer::ImportedModel m = importer::import_onnx(source, o);
    return {std::move(m.graph), std::move(m.weights)};
  }
  if (find_model(source)) return {build_model(source, sizes), {}};
  if (!std::filesystem::exists(source))
    throw Error(source + ": neither a zoo model (`pcgx models` lists them) nor an existing file");
  if (!sizes.empty()) throw FieldError("ModelParams", "sizes apply to zoo models only, not to the file " + source);
  return {load_graph(source), {}};
}

ModelParams with_batch_per_device(const std::string& source, ModelParams sizes, int64_t devices) {
  if (const ModelSpec* spec = find_model(source); spec && spec->defaults.count("batch") && !sizes.count("batch"))
    sizes["batch"] = spec->defaults.at("batch") * devices;
  return sizes;
}

bool is_strategy_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return false;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.value("kind", "") == "pcgx.strategy";
}

std::string default_ruleset_path() { return shipped_dir(Shipped::kRulesets) + "/unity-v1.json"; }

std::vector<std::string> default_rulesets() {
  const std::string dir = shipped_dir(Shipped::kRulesets);
  std::vector<std::string> out{default_ruleset_path()};
  std::ifstream in(dir + "/MANIFEST.json");
  const auto m = nlohmann::json::parse(in, nullptr, false);
  if (m.is_discarded() || !m.is_object() || !m.contains("rulesets") || !m["rulesets"].is_object())
    throw Error(dir + "/MANIFEST.json: not a ruleset manifest (field rulesets)");
  std::vector<std::string> others;
  for (const auto& [name, entry] : m["rulesets"].items()) {
    const std::string file = entry.is_object() ? entry.value("file", std::string{}) : std::string{};
    if (file.empty()) throw Error(dir + "/MANIFEST.json: rulesets." + name + ".file: missing");
    if (dir + "/" + file != out[0]) others.push_back(dir + "/" + file);
  }
  std::sort(others.begin(), others.end());
  out.insert(out.end(), others.begin(), others.end());
  return out;
}

}  // namespace pcgx::runner
