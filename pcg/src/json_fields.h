#pragma once
// Typed field access for the JSON readers: each failure is a FileError
// naming the file and the field path ("nodes[3].attrs.dim").
#include <nlohmann/json.hpp>
#include <string>

#include "pcgx/pcg/error.h"

namespace pcgx::json_fields {

using nlohmann::json;

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string without_prefix(const json::exception& e);

class Reader {
 public:
  // `prefix` is prepended to every field path (a graph inside a ruleset).
  explicit Reader(std::string source, std::string prefix = "")
      : source_(std::move(source)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    throw FileError(source_, prefix_.empty() ? field : field.empty() ? prefix_ : prefix_ + "." + field, reason);
  }
  json parse(const std::string& text) const;
  const json& field(const json& obj, const std::string& key, const std::string& path) const;
  const json* optional(const json& obj, const std::string& key) const;
  void expect_object(const json& v, const std::string& path) const;
  void only_keys(const json& obj, std::initializer_list<const char*> keys, const std::string& path) const;
  int64_t get_int(const json& v, const std::string& path) const;
  double get_number(const json& v, const std::string& path) const;
  std::string get_string(const json& v, const std::string& path) const;
  bool get_bool(const json& v, const std::string& path) const;
  void check_version(const json& root, int supported, const std::string& kind) const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::string prefix_;
};

inline std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}
inline std::string index(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

}  // namespace pcgx::json_fields
