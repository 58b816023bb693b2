#pragma once
// Helpers shared by the pcg tests.
#include <gtest/gtest.h>

#include <cmath>

#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::testing {

inline void expect_close(const Tensor<float>& a, const Tensor<float>& b, double rtol = 1e-4, double atol = 1e-5) {
  ASSERT_EQ(a.shape, b.shape);
  for (size_t i = 0; i < a.data.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a.data[i])) << "element " << i;
    ASSERT_NEAR(a.data[i], b.data[i], atol + rtol * std::fabs(b.data[i])) << "element " << i;
  }
}

inline void expect_equal(const Tensor<ModP>& a, const Tensor<ModP>& b) {
  ASSERT_EQ(a.shape, b.shape);
  for (size_t i = 0; i < a.data.size(); ++i) ASSERT_EQ(a.data[i].value(), b.data[i].value()) << "element " << i;
}

inline Tensor<float> tensor(std::vector<int64_t> shape, std::vector<float> values) {
  Tensor<float> t(std::move(shape));
  EXPECT_EQ(t.data.size(), values.size());
  t.data = std::move(values);
  return t;
}

// Runs one operator on unpartitioned float inputs.
inline std::vector<Tensor<float>> run_op(const std::string& op, const Attributes& given,
                                         const std::vector<Tensor<float>>& inputs,
                                         std::vector<DataType> dtypes = {}) {
  const OpDef& def = OpRegistry::global().get(op);
  const Attributes attrs = normalize_attributes(def.attrs, given, op);
  std::vector<ShardedTensor<float>> sharded;
  std::vector<ParallelTensorShape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto dt = i < dtypes.size() ? dtypes[i] : DataType::kFloat32;
    shapes.push_back(ParallelTensorShape::unpartitioned(inputs[i].shape, dt));
    sharded.push_back(distribute(inputs[i], shapes.back()));
  }
  std::vector<const ShardedTensor<float>*> ptrs;
  for (auto& s : sharded) ptrs.push_back(&s);
  const auto out_shapes = infer_output_shapes(def, attrs, shapes, op);
  auto out = evaluate_op<float>(def, attrs, ptrs, out_shapes);
  std::vector<Tensor<float>> result;
  for (auto& o : out) result.push_back(gather_slot(o, 0));
  return result;
}

}  // namespace pcgx::testing
