#include "pcgx/pcg/attributes.h"

#include <algorithm>
#include <sstream>

#include "pcgx/pcg/error.h"

namespace pcgx {

std::string_view to_string(AttrType t) {
  switch (t) {
    case AttrType::kInt: return "integer";
    case AttrType::kFloat: return "number";
    case AttrType::kBool: return "boolean";
    case AttrType::kString: return "string";
    case AttrType::kIntList: return "list of integers";
  }
  return "?";
}

AttrType type_of(const AttrValue& v) { return static_cast<AttrType>(v.index()); }

std::string to_string(const AttrValue& v) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, IntList>) {
          os << '[';
          for (size_t i = 0; i < x.size(); ++i) os << (i ? "," : "") << x[i];
          os << ']';
        } else if constexpr (std::is_same_v<X, bool>) {
          os << (x ? "true" : "false");
        } else {
          os << x;
        }
      },
      v);
  return os.str();
}

const AttrValue& Attributes::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw Error("missing attribute '" + name + "'");
  return it->second;
}

template <class X>
static const X& get_as(const Attributes& a, const std::string& name) {
  const AttrValue& v = a.at(name);
  if (const X* x = std::get_if<X>(&v)) return *x;
  throw Error("attribute '" + name + "' has the wrong type");
}

int64_t Attributes::get_int(const std::string& n) const { return get_as<int64_t>(*this, n); }
double Attributes::get_float(const std::string& n) const { return get_as<double>(*this, n); }
bool Attributes::get_bool(const std::string& n) const { return get_as<bool>(*this, n); }
const std::string& Attributes::get_string(const std::string& n) const { return get_as<std::string>(*this, n); }
const IntList& Attributes::get_ints(const std::string& n) const { return get_as<IntList>(*this, n); }

const AttrSpec* find_spec(const std::vector<AttrSpec>& specs, const std::string& name) {
  for (const AttrSpec& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

Attributes normalize_attributes(const std::vector<AttrSpec>& specs, const Attributes& given,
                                const std::string& what) {
  Attributes out;
  for (const auto& [name, value] : given.values()) {
    const AttrSpec* it = find_spec(specs, name);
    if (!it) {
      std::string known;
      for (const auto& s : specs) known += (known.empty() ? "" : ", ") + s.name;
      throw Error(what + ": unknown attribute '" + name + "'" +
                  (known.empty() ? " (it takes none)" : " (known: " + known + ")"));
    }
    AttrValue v = value;
    // An integer is an acceptable number.
    if (it->type == AttrType::kFloat && type_of(v) == AttrType::kInt) v = static_cast<double>(std::get<int64_t>(v));
    if (type_of(v) != it->type)
      throw Error(what + ": attribute '" + name + "' must be a " + std::string(to_string(it->type)) + ", got " +
                  std::string(to_string(type_of(v))));
    if (!it->choices.empty()) {
      const auto& s = std::get<std::string>(v);
      if (std::find(it->choices.begin(), it->choices.end(), s) == it->choices.end()) {
        std::string c;
        for (const auto& x : it->choices) c += (c.empty() ? "" : "|") + x;
        throw Error(what + ": attribute '" + name + "' is '" + s + "', expected one of " + c);
      }
    }
    if (it->check)
      if (auto reason = it->check(v)) throw Error(what + ": attribute '" + name + "' " + *reason);
    out.set(name, std::move(v));
  }
  for (const auto& s : specs) {
    if (out.has(s.name)) continue;
    if (!s.default_value) throw Error(what + ": missing required attribute '" + s.name + "'");
    out.set(s.name, *s.default_value);
  }
  return out;
}

std::function<std::optional<std::string>(const AttrValue&)> positive_int() {
  return [](const AttrValue& v) -> std::optional<std::string> {
    if (std::get<int64_t>(v) < 1) return "must be positive, got " + to_string(v);
    return std::nullopt;
  };
}

std::function<std::optional<std::string>(const AttrValue&)> non_negative_int() {
  return [](const AttrValue& v) -> std::optional<std::string> {
    if (std::get<int64_t>(v) < 0) return "must not be negative, got " + to_string(v);
    return std::nullopt;
  };
}

std::function<std::optional<std::string>(const AttrValue&)> positive_int_list() {
  return [](const AttrValue& v) -> std::optional<std::string> {
    for (int64_t x : std::get<IntList>(v))
      if (x < 1) return "must hold positive integers, got " + to_string(v);
    return std::nullopt;
  };
}

}  // namespace pcgx
