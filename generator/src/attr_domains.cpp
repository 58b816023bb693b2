#include "attr_domains.h"

#include <algorithm>
#include <numeric>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::gen {
namespace {

std::vector<AttrValue> domain(const AttrSpec& spec, const Attributes& partial, const ParallelTensorShape& x,
                              const std::vector<int64_t>& degrees) {
  std::vector<AttrValue> v;
  const int64_t rank = x.rank();
  switch (spec.gen) {
    case GenDomain::kDefault:
      if (spec.default_value) v.push_back(*spec.default_value);
      break;
    case GenDomain::kChoices:
      if (spec.type == AttrType::kBool) {
        v = {false, true};
      } else {
        for (const auto& c : spec.choices) v.push_back(c);
      }
      break;
    case GenDomain::kDim:
      for (int64_t d = 0; d < rank; ++d) v.push_back(d);
      break;
    case GenDomain::kDimOrReplica:
      for (int64_t d = 0; d < rank; ++d) v.push_back(d);
      v.push_back(int64_t{-1});
      break;
    case GenDomain::kDegree:
      for (int64_t k : degrees) v.push_back(k);
      break;
    case GenDomain::kHalves: {
      if (!partial.has("axis")) break;
      const int64_t axis = partial.get_int("axis");
      const int64_t extent = axis < 0 ? x.replica : (axis < rank ? x.dims[static_cast<size_t>(axis)].size : 0);
      if (extent >= 2 && extent % 2 == 0) v.push_back(IntList{extent / 2, extent / 2});
      break;
    }
    case GenDomain::kPermutation: {
      IntList perm(static_cast<size_t>(rank));
      std::iota(perm.begin(), perm.end(), 0);
      while (std::next_permutation(perm.begin(), perm.end())) v.push_back(perm);
      break;
    }
    case GenDomain::kScalar:
      v.push_back(2.0);
      break;
    case GenDomain::kRegroup:  // same rank: the operators after it see the ranks they were written for
      for (int64_t d = 0; d + 1 < rank; ++d) {
        IntList s;
        for (const auto& dim : x.dims) s.push_back(dim.size);
        const size_t i = static_cast<size_t>(d);
        for (const bool left : {true, false}) {
          IntList t = s;
          int64_t& from = left ? t[i + 1] : t[i];
          int64_t& to = left ? t[i] : t[i + 1];
          if (from % 2 != 0) continue;
          from /= 2, to *= 2;
          v.push_back(t);
        }
      }
      break;
  }
  return v;
}

}  // namespace

std::vector<Attributes> attribute_combinations(const OpDef& op, const OpChoice& choice,
                                               const ParallelTensorShape& input0,
                                               const std::vector<int64_t>& degrees) {
  std::vector<Attributes> combos{Attributes{}};
  for (const AttrSpec& spec : op.attrs) {
    std::vector<Attributes> next;
    for (const Attributes& partial : combos) {
      auto it = choice.values.find(spec.name);
      const std::vector<AttrValue> values =
          it != choice.values.end() ? it->second : domain(spec, partial, input0, degrees);
      for (const AttrValue& v : values) {
        Attributes a = partial;
        a.set(spec.name, v);
        next.push_back(std::move(a));
      }
    }
    combos = std::move(next);
  }
  std::vector<Attributes> out;
  for (const Attributes& a : combos) {
    try {
      out.push_back(normalize_attributes(op.attrs, a, op.name));
    } catch (const Error&) {
    }
  }
  return out;
}

void check_enumerable(const OpChoice& choice) {
  const OpDef& op = OpRegistry::global().get(choice.op);
  for (const AttrSpec& spec : op.attrs)
    if (!spec.default_value && spec.gen == GenDomain::kDefault && !choice.values.count(spec.name))
      throw Error("operator " + op.name + ": attribute '" + spec.name +
                  "' has no default; give its values in the operator list, e.g. '" + op.name + "(" + spec.name + "=...)'");
}

}  // namespace pcgx::gen
