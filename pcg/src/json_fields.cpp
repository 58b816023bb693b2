#include "json_fields.h"

namespace pcgx::json_fields {

namespace {

// Deeper documents are refused before parsing: nlohmann's dump() and
// some of its copies recurse once per level, and the loaders dump
// documents to hash them (70,000 levels overflowed the stack). No pcgx
// file comes near this.
constexpr int kMaxDepth = 256;

bool too_deep(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

json Reader::parse(const std::string& text) const {
  if (too_deep(text)) fail("", "malformed JSON: nested more than " + std::to_string(kMaxDepth) + " levels deep");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("", "malformed JSON: " + without_prefix(e));
  }
}

std::string without_prefix(const json::exception& e) {
  // nlohmann prefixes "[json.exception.parse_error.101] parse error at ...".
  const std::string what = e.what();
  const auto pos = what.find("] ");
  return pos == std::string::npos ? what : what.substr(pos + 2);
}

const json& Reader::field(const json& obj, const std::string& key, const std::string& path) const {
  auto it = obj.find(key);
  if (it == obj.end()) fail(join(path, key), "missing required field");
  return *it;
}

const json* Reader::optional(const json& obj, const std::string& key) const {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

void Reader::expect_object(const json& v, const std::string& path) const {
  if (!v.is_object()) fail(path, std::string("must be an object, got ") + v.type_name());
}

void Reader::only_keys(const json& obj, std::initializer_list<const char*> keys, const std::string& path) const {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const char* k : keys) known = known || it.key() == k;
    if (!known) {
      std::string list;
      for (const char* k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(join(path, it.key()), "unknown field (expected one of: " + list + ")");
    }
  }
}

int64_t Reader::get_int(const json& v, const std::string& path) const {
  if (!v.is_number_integer()) fail(path, std::string("must be an integer, got ") + v.type_name());
  return v.get<int64_t>();
}

double Reader::get_number(const json& v, const std::string& path) const {
  if (!v.is_number()) fail(path, std::string("must be a number, got ") + v.type_name());
  return v.get<double>();
}

std::string Reader::get_string(const json& v, const std::string& path) const {
  if (!v.is_string()) fail(path, std::string("must be a string, got ") + v.type_name());
  return v.get<std::string>();
}

bool Reader::get_bool(const json& v, const std::string& path) const {
  if (!v.is_boolean()) fail(path, std::string("must be a boolean, got ") + v.type_name());
  return v.get<bool>();
}

void Reader::check_version(const json& root, int supported, const std::string& kind) const {
  const int64_t v = get_int(field(root, "format_version", ""), "format_version");
  if (v != supported)
    fail("format_version", "unsupported version " + std::to_string(v) + " (this pcgx reads " +
                               std::to_string(supported) + ")");
  if (const json* k = optional(root, "kind")) {
    const std::string got = get_string(*k, "kind");
    if (got != kind) fail("kind", "expected \"" + kind + "\", got \"" + got + "\"");
  }
}

}  // namespace pcgx::json_fields
