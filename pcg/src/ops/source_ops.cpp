// Input and Weight: graph sources. Their parallel shape is given by
// attributes, so generator patterns can start from partitioned tensors.
#include "op_families.h"
#include "pcgx/pcg/ops/op_helpers.h"

namespace pcgx::ops {
namespace {

std::vector<TensorType> source_type(const Attributes& a, std::span<const TensorType>) {
  auto dtype = parse_data_type(a.get_string("dtype"));
  return {{a.get_ints("shape"), *dtype}};
}

std::vector<ParallelTensorShape> source_parallel(const Attributes& a, std::span<const ParallelTensorShape>) {
  auto types = source_type(a, {});
  ParallelTensorShape s = ParallelTensorShape::unpartitioned(types[0].shape, types[0].dtype);
  const IntList& degrees = a.get_ints("degrees");
  PCGX_REQUIRE(degrees.empty() || degrees.size() == s.dims.size(),
          "attribute 'degrees' has " + std::to_string(degrees.size()) + " entries for a tensor of rank " +
              std::to_string(s.dims.size()));
  for (size_t j = 0; j < degrees.size(); ++j) s.dims[j].degree = degrees[j];
  s.replica = a.get_int("replica");
  if (auto reason = s.invalid_reason()) throw Error(*reason);
  return {s};
}

std::vector<AttrSpec> source_attrs(bool weight) {
  std::vector<AttrSpec> attrs{
      ints_attr("shape", std::nullopt, "logical shape", positive_int_list()),
      ints_attr("degrees", IntList{}, "parallel degree per dimension (empty: all 1)", positive_int_list()),
      int_attr("replica", 1, "replica degree", positive_int()),
      string_attr("dtype", "float32", {"float32", "int64"}, "element type"),
  };
  if (weight) {
    attrs.push_back(string_attr("init", "normal", {"normal", "uniform", "zeros", "ones"}, "initializer"));
  } else {
    attrs.push_back(int_attr("index_range", 0, "for int64 inputs: values lie in [0, index_range)", non_negative_int()));
  }
  return attrs;
}

}  // namespace

void register_source_ops(OpRegistry& r) {
  OpDef input;
  input.name = "Input";
  input.op_class = OpClass::kSource;
  input.summary = "a graph input (data or labels)";
  input.attrs = source_attrs(false);
  input.infer_types = source_type;
  input.infer_parallel = source_parallel;
  input.flops = [](const Attributes&, auto, auto) { return 0.0; };
  r.add(input);

  OpDef weight = input;
  weight.name = "Weight";
  weight.summary = "a trainable parameter";
  weight.attrs = source_attrs(true);
  weight.is_weight = true;
  r.add(weight);
}

}  // namespace pcgx::ops
