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

// Parses a whole JSON document read from `source`. Any failure (bad
// syntax, a number out of range such as 1e400) is a FileError naming
// `source`, with nlohmann's "[json.exception...]" prefix removed. Every
// loader parses through it.
nlohmann::json parse_json_document(const std::string& text, const std::string& source);
// nlohmann's message without that prefix (for a value of the wrong type).
std::string json_message(const nlohmann::json::exception& e);

}  // namespace pcgx
