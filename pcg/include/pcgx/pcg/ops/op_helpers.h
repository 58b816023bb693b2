#pragma once
// Shared vocabulary for writing operator definitions: the built-in ones
// (pcg/src/ops/*.cpp) and a plugin's (plugin.h). Attribute specs, the
// reads of a gradient rule, shape checks, the elementwise parallel kinds,
// global indices of a shard's elements, and PCGX_KERNELS, which binds one
// kernel template to both number systems (numeric.h's Num<T>).
#include <array>
#include <string>
#include <vector>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/operator.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::ops {

// The generator's domain, and the role (attributes.h) that a structural
// domain implies: an attribute enumerated as dimensions is a dimension, as
// degrees a degree, as halves of an extent parts of it, as a regrouped
// shape a shape.
inline AttrSpec with_domain(AttrSpec s, GenDomain d) {
  s.gen = d;
  switch (d) {
    case GenDomain::kDim: s.role = AttrRole::kDim; break;
    case GenDomain::kDimOrReplica: s.role = AttrRole::kDimOrReplica; break;
    case GenDomain::kDegree: s.role = AttrRole::kDegree; break;
    case GenDomain::kHalves: s.role = AttrRole::kExtentParts; break;
    case GenDomain::kRegroup: s.role = AttrRole::kShape; break;
    default: break;
  }
  return s;
}
inline AttrSpec int_attr(std::string name, std::optional<int64_t> def, std::string doc,
                         std::function<std::optional<std::string>(const AttrValue&)> check = nullptr) {
  AttrSpec s{std::move(name), AttrType::kInt, std::nullopt, std::move(doc), {}, std::move(check)};
  if (def) s.default_value = *def;
  return s;
}
inline AttrSpec float_attr(std::string name, std::optional<double> def, std::string doc) {
  AttrSpec s{std::move(name), AttrType::kFloat, std::nullopt, std::move(doc), {}, nullptr};
  if (def) s.default_value = *def;
  return s;
}
// `s` as a value no shape or degree depends on (AttrRole::kValue).
inline AttrSpec value_attr(AttrSpec s) {
  s.role = AttrRole::kValue;
  return s;
}
inline AttrSpec bool_attr(std::string name, bool def, std::string doc) {
  return {std::move(name), AttrType::kBool, def, std::move(doc), {}, nullptr};
}
inline AttrSpec string_attr(std::string name, std::string def, std::vector<std::string> choices, std::string doc) {
  return {std::move(name), AttrType::kString, std::move(def), std::move(doc), std::move(choices), nullptr};
}
inline AttrSpec ints_attr(std::string name, std::optional<IntList> def, std::string doc,
                          std::function<std::optional<std::string>(const AttrValue&)> check = nullptr) {
  AttrSpec s{std::move(name), AttrType::kIntList, std::nullopt, std::move(doc), {}, std::move(check)};
  if (def) s.default_value = *def;
  return s;
}
inline AttrSpec activation_attr() {
  return with_domain(string_attr("activation", "none", {"none", "relu", "gelu", "sigmoid", "tanh"}, "fused activation"),
                     GenDomain::kChoices);
}

// OpDef::backward_reads of a rule that reads the same whatever its
// attributes: bit i of `inputs` for input i, bit o of `outputs` for output o.
inline std::function<BackwardReads(const Attributes&)> reads(uint64_t inputs, uint64_t outputs) {
  return [r = BackwardReads{inputs, outputs}](const Attributes&) { return r; };
}
// The reads of a product with a fused activation (Linear, Conv2D): x and W
// for the product's gradients; then the derivative's operand, the output
// for relu, sigmoid and tanh, or the pre-activation for gelu, which the
// rule computes again from x, W and the bias.
BackwardReads fused_activation_reads(const Attributes& a);

// Throws the reason as a pcgx::Error when `ok` is false. A macro so that
// the reason, usually built from shapes, is only formatted on failure:
// shape inference runs for every node of every candidate the search
// builds, and formatting its messages eagerly was a tenth of a search.
#define PCGX_REQUIRE(ok, reason)                  \
  do {                                            \
    if (!(ok)) throw ::pcgx::Error(reason);       \
  } while (0)
std::string shape_str(const std::vector<int64_t>& s);
void require_float(const TensorType& t, const std::string& what);
void require_rank(const TensorType& t, int rank, const std::string& what);
void require_min_rank(const TensorType& t, int rank, const std::string& what);
void require_same_shape(const TensorType& a, const TensorType& b, const std::string& what);

// Every dimension of every input splits the same dimension of output 0.
std::vector<ParallelKind> elementwise_kinds(size_t rank, size_t inputs);

// Calls f(i, g) for every element i of a local shard with extent `local` at
// `offset` in the logical tensor of `global`, g being its row-major global
// index. Runs without allocating (ranks up to 8).
template <class F>
void for_each_global_index(const ParallelTensorShape& global, std::span<const int64_t> offset,
                           std::span<const int64_t> local, F f) {
  const size_t r = local.size();
  if (r > kMaxRank) throw Error("rank " + std::to_string(r) + " is above " + std::to_string(kMaxRank));
  std::array<int64_t, kMaxRank> gstrides{}, idx{};
  int64_t stride = 1;
  for (size_t j = r; j-- > 0;) gstrides[j] = stride, stride *= global.dims[j].size;
  const int64_t n = product(local);
  for (int64_t i = 0; i < n; ++i) {
    int64_t g = 0;
    for (size_t j = 0; j < r; ++j) g += (offset[j] + idx[j]) * gstrides[j];
    f(i, g);
    for (size_t j = r; j-- > 0;) {
      if (++idx[j] < local[j]) break;
      idx[j] = 0;
    }
  }
}

// Binds one kernel template to both number systems.
#define PCGX_KERNELS(def, fn)     \
  do {                            \
    (def).kernel_f32 = &fn<float>; \
    (def).kernel_mod = &fn<ModP>;  \
  } while (0)
#define PCGX_SHARD_EVAL(def, fn) \
  do {                           \
    (def).shard_f32 = &fn<float>; \
    (def).shard_mod = &fn<ModP>;  \
  } while (0)

}  // namespace pcgx::ops
