// OpDef::grad_writes against the reverse rules: a rule said to add
// (grad_writes false), handed input gradients that already hold values,
// returns those values plus the gradient it computes from zeros, so the
// runtime may sum a weight's gradient over micro-batches in place; and a
// rule said to write does not add (the flag is not set for nothing).
#include <gtest/gtest.h>

#include <cmath>

#include "op_cases.h"
#include "pcgx/pcg/gradients.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/tasks.h"

namespace pcgx {
namespace {

// One task's gradients (the cases are unpartitioned: one task), the input
// gradients starting from `start` (zeros when empty).
std::vector<Tensor<float>> task_gradients(const OpCase& c, const std::vector<Tensor<float>>& start) {
  const OpDef& op = OpRegistry::global().get(c.op);
  const Attributes attrs = normalize_attributes(op.attrs, c.attrs, c.op);
  std::vector<ParallelTensorShape> in_shapes;
  std::vector<Tensor<float>> in;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    in_shapes.push_back(ParallelTensorShape::unpartitioned(c.inputs[i].shape, c.inputs[i].dtype));
    const int64_t range = i < c.index_range.size() ? c.index_range[i] : 0;
    in.push_back(random_tensor<float>(c.inputs[i], 11 + i, range));
  }
  const auto out_shapes = infer_output_shapes(op, attrs, in_shapes, c.op);
  std::vector<const ShardedTensor<float>*> sharded_in;
  std::vector<ShardedTensor<float>> held;
  for (size_t i = 0; i < in.size(); ++i) held.push_back(distribute(in[i], in_shapes[i]));
  for (const auto& t : held) sharded_in.push_back(&t);
  const auto out = evaluate_op<float>(op, attrs, sharded_in, out_shapes);
  std::vector<Tensor<float>> dout;
  for (size_t o = 0; o < out.size(); ++o) dout.push_back(random_tensor<float>({out[o].shape.logical_shape(), DataType::kFloat32}, 101 + o));
  std::vector<const Tensor<float>*> in_p, out_p, dout_p;
  for (const auto& t : held) in_p.push_back(&t.shards[0]);
  for (const auto& t : out) out_p.push_back(&t.shards[0]);
  for (const auto& t : dout) dout_p.push_back(&t);
  std::vector<Tensor<float>> din;
  for (size_t i = 0; i < in.size(); ++i) {
    if (c.inputs[i].dtype != DataType::kFloat32) din.emplace_back();  // an index input: an empty entry
    else din.push_back(start.empty() ? Tensor<float>(in_shapes[i].shard_shape()) : start[i]);
  }
  const TaskTable table = task_table(op, attrs, in_shapes, out_shapes);  // (ctx's shapes live in it)
  const TaskContext ctx = table.context(0);
  op.grad_f32(GradArgs{attrs, in_p, out_p, dout_p, din, ctx});
  return din;
}

class GradientAddsCase : public ::testing::TestWithParam<OpCase> {};

TEST_P(GradientAddsCase, ARuleThatAddsAddsToWhatTheGradientHolds) {
  const OpCase& c = GetParam();
  const OpDef& op = OpRegistry::global().get(c.op);
  if (op.is_shard_level(normalize_attributes(op.attrs, c.attrs, c.op)) || !op.grad_f32) GTEST_SKIP() << "no per-task reverse rule";
  const auto fresh = task_gradients(c, {});
  std::vector<Tensor<float>> start;
  for (size_t i = 0; i < fresh.size(); ++i)
    start.push_back(fresh[i].data.empty() ? Tensor<float>() : random_tensor<float>({fresh[i].shape, DataType::kFloat32}, 301 + i));
  const auto added = task_gradients(c, start);
  bool adds = true;
  for (size_t i = 0; i < fresh.size(); ++i)
    for (size_t e = 0; e < fresh[i].data.size(); ++e) {
      const float want = start[i].data[e] + fresh[i].data[e];
      const float tolerance = 1e-5f * (std::fabs(start[i].data[e]) + std::fabs(fresh[i].data[e]) + 1.f);
      if (!(std::fabs(added[i].data[e] - want) <= tolerance)) adds = false;
    }
  if (op.grad_writes) EXPECT_FALSE(adds) << c.op << " is said to write its gradients, but its rule adds into them";
  else EXPECT_TRUE(adds) << c.op << "'s rule does not add into its inputs' gradients: set grad_writes";
}

INSTANTIATE_TEST_SUITE_P(AllComputeOps, GradientAddsCase, ::testing::ValuesIn(op_cases()),
                         [](const auto& param_info) { return param_info.param.label; });

}  // namespace
}  // namespace pcgx
