#pragma once
// The model zoo: builders with size parameters, exposed by name. Each model
// has its published size by default and a "-tiny" variant for tests.
// `pcgx models` lists them; `pcgx info NAME --set key=value` overrides a
// size parameter.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx {

using ModelParams = std::map<std::string, int64_t>;

struct ModelSpec {
  std::string name;
  std::string description;
  std::string source;            // where the configuration comes from
  ModelParams defaults;          // size parameters and their published values
  std::map<std::string, std::string> param_docs;
  std::function<Graph(const ModelParams&)> build;
};

const std::vector<ModelSpec>& model_zoo();
// nullptr when no model has that name.
const ModelSpec* find_model(const std::string& name);

// Builds `name` with `overrides` applied ("batch" -> 8); throws pcgx::Error
// for an unknown model or parameter.
Graph build_model(const std::string& name, const ModelParams& overrides = {});

}  // namespace pcgx
