#include "pcgx/pcg/zoo.h"

#include "builders.h"
#include "pcgx/pcg/error.h"

namespace pcgx {

namespace zoo {
ModelSpec named(bool tiny, std::string name, std::string description) {
  ModelSpec s;
  s.name = tiny ? name + "-tiny" : name;
  s.description = tiny ? description + " (tiny variant for tests)" : description;
  return s;
}
}  // namespace zoo

const std::vector<ModelSpec>& model_zoo() {
  static const std::vector<ModelSpec> specs = [] {
    std::vector<ModelSpec> v;
    for (bool tiny : {false, true}) {
      v.push_back(zoo::resnext50(tiny));
      v.push_back(zoo::inception_v3(tiny));
      v.push_back(zoo::bert_large(tiny));
      v.push_back(zoo::dlrm(tiny));
      v.push_back(zoo::xdl(tiny));
      v.push_back(zoo::candle_uno(tiny));
      v.push_back(zoo::mlp(tiny));
      v.push_back(zoo::gpt(tiny));
      v.push_back(zoo::vgg13(tiny));
      v.push_back(zoo::llama(tiny));
      v.push_back(zoo::mpt(tiny));
    }
    return v;
  }();
  return specs;
}

const ModelSpec* find_model(const std::string& name) {
  for (const auto& s : model_zoo())
    if (s.name == name) return &s;
  return nullptr;
}

Graph build_model(const std::string& name, const ModelParams& overrides) {
  const ModelSpec* spec = find_model(name);
  if (!spec) throw Error("unknown model '" + name + "' (`pcgx models` lists them)");
  ModelParams p = spec->defaults;
  for (const auto& [k, v] : overrides) {
    if (!p.count(k)) {
      std::string known;
      for (const auto& [pk, pv] : spec->defaults) known += (known.empty() ? "" : ", ") + pk;
      throw FieldError("ModelParams." + k, "model '" + name + "' has no parameter '" + k + "' (parameters: " + known + ")");
    }
    // A parameter whose default is 0 means "off" at 0 (bn_group).
    const int64_t least = spec->defaults.at(k) == 0 ? 0 : 1;
    if (v < least) throw FieldError("ModelParams." + k, std::to_string(v) + (least ? " must be positive" : " must not be negative"));
    p[k] = v;
  }
  Graph g = spec->build(p);
  g.set_name(name);
  return g;
}

}  // namespace pcgx
