#pragma once
// Typed operator attributes. Each operator declares its attributes as
// AttrSpecs (type, default, validation); a node's Attributes are normalized
// against them once, so evaluation code can read them without checks.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace pcgx {

using IntList = std::vector<int64_t>;
using AttrValue = std::variant<int64_t, double, bool, std::string, IntList>;

enum class AttrType : uint8_t { kInt, kFloat, kBool, kString, kIntList };
std::string_view to_string(AttrType t);
AttrType type_of(const AttrValue& v);
std::string to_string(const AttrValue& v);

// How the rule generator enumerates an attribute. Part of the operator's
// registry entry, so a new operator joins an opset without generator changes.
enum class GenDomain : uint8_t {
  kDefault,        // only the default value (an opset may list values)
  kChoices,        // every value in `choices` (strings) or both booleans
  kDim,            // 0 .. rank-1 of input 0
  kDimOrReplica,   // kDim and -1, the replica axis
  kDegree,         // the generator's parallel degrees
  kHalves,         // two equal pieces of the extent named by attribute "axis"
  kPermutation,    // every permutation of input 0's dimensions
  kScalar,         // small exact constants
  kRegroup,        // input 0's shape with a factor 2 moved between two neighbouring dimensions
};

// What an attribute's value means relative to the tensors the operator
// reads, for code that carries a node from one shape, rank or degree to
// another (rule matching and application, rank adaptation, rescaling,
// the SMT encoding) without knowing the operator.
enum class AttrRole : uint8_t {
  kPlain,          // the same value at every shape
  kDim,            // a dimension of input 0; a negative value counts from the end
  kDimOrReplica,   // a dimension of input 0; negative: the replica axis
  kDegree,         // a parallel degree: a rule's value stands for any degree
  kExtentParts,    // parts of the extent along the operator's "axis": a rule's
                   // value matches any proportional one and scales with the extent
  kShape,          // a whole shape (Reshape's target): fixed to one shape
  kValue,          // a number the result depends on and no shape or degree
                   // does (a norm's epsilon, a dropout's rate and seed): a
                   // rule whose proof treats it as any value (its record's
                   // value_generic) matches every value, the same one
                   // wherever the rule repeats it
};

struct AttrSpec {
  std::string name;
  AttrType type;
  std::optional<AttrValue> default_value;  // none: the attribute is required
  std::string doc;
  std::vector<std::string> choices;        // allowed values of a string attribute
  // Extra validation: returns a reason when the value is not acceptable.
  std::function<std::optional<std::string>(const AttrValue&)> check;
  GenDomain gen = GenDomain::kDefault;
  AttrRole role = AttrRole::kPlain;
};

// The spec named `name` in `specs`, or nullptr.
const AttrSpec* find_spec(const std::vector<AttrSpec>& specs, const std::string& name);

class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<std::pair<const std::string, AttrValue>> init) : values_(init) {}

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const AttrValue& at(const std::string& name) const;
  void set(const std::string& name, AttrValue v) { values_[name] = std::move(v); }

  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const IntList& get_ints(const std::string& name) const;

  const std::map<std::string, AttrValue>& values() const { return values_; }
  bool operator==(const Attributes&) const = default;
  auto operator<=>(const Attributes& o) const { return values_ <=> o.values_; }

 private:
  std::map<std::string, AttrValue> values_;
};

// Fills defaults, rejects unknown or missing attributes and wrong types.
// Throws pcgx::Error naming `what` (e.g. "node 3 (Linear)") and the attribute.
Attributes normalize_attributes(const std::vector<AttrSpec>& specs, const Attributes& given,
                                const std::string& what);

// Common validators.
std::function<std::optional<std::string>(const AttrValue&)> positive_int();
std::function<std::optional<std::string>(const AttrValue&)> non_negative_int();
std::function<std::optional<std::string>(const AttrValue&)> positive_int_list();

}  // namespace pcgx
