#pragma once
// Editing a strategy file's JSON text (search tests of what it records):
// the file as written before a field existed, one with a wrong value, and
// the one-line error reading it gives.
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/search/strategy_json.h"

namespace pcgx::search {

// `text` without its `"field": value,` (value as written, quotes included).
inline std::string without_field(std::string text, const std::string& field, const std::string& value) {
  const std::string entry = "\"" + field + "\": " + value + ",";
  const size_t at = text.find(entry);
  if (at != std::string::npos) text.erase(at, entry.size());
  return text;
}
// `text` with `"field": from` written as `"field": to`.
inline std::string with_field(std::string text, const std::string& field, const std::string& from, const std::string& to) {
  const std::string entry = "\"" + field + "\": " + from;
  const size_t at = text.find(entry);
  if (at != std::string::npos) text.replace(at, entry.size(), "\"" + field + "\": " + to);
  return text;
}
// What reading `text` as "s.json" throws; empty when it reads.
inline std::string strategy_error(const std::string& text) {
  try {
    strategy_from_json(text, "s.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace pcgx::search
