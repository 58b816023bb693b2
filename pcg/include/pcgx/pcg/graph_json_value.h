#pragma once
// Graph JSON as nlohmann::json values, for formats that embed graphs (rule
// databases). Most code wants graph_json.h instead.
#include <nlohmann/json.hpp>
#include <string>

#include "pcgx/pcg/graph.h"

namespace pcgx {

nlohmann::json graph_to_value(const Graph& g);
// Errors name `source` and the field path below `prefix` ("rules[3].source").
Graph graph_from_value(const nlohmann::json& value, const std::string& source, const std::string& prefix);

}  // namespace pcgx
