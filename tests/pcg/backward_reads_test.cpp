// The registry's backward_reads (operator.h) against the reverse rules
// themselves: what a rule is said not to read, poisoned with NaN, leaves
// every gradient the same bits, and so does leaving them as the runtime
// does, shaped but empty (it frees those values before the backward pass,
// so a rule reading one would read freed memory); and what
// a rule is said to read, poisoned alone, changes a gradient (so no value
// is kept through the step for nothing).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "op_cases.h"
#include "pcgx/pcg/gradients.h"
#include "pcgx/pcg/registry.h"

namespace pcgx {
namespace {

struct Evaluated {
  const OpDef* op = nullptr;
  Attributes attrs;
  std::vector<ShardedTensor<float>> in, out, out_grad;
};

Evaluated evaluate_case(const OpCase& c) {
  Evaluated e;
  e.op = &OpRegistry::global().get(c.op);
  e.attrs = normalize_attributes(e.op->attrs, c.attrs, c.op);
  std::vector<ParallelTensorShape> shapes;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    shapes.push_back(ParallelTensorShape::unpartitioned(c.inputs[i].shape, c.inputs[i].dtype));
    const int64_t range = i < c.index_range.size() ? c.index_range[i] : 0;
    e.in.push_back(distribute(random_tensor<float>(c.inputs[i], 11 + i, range), shapes.back()));
  }
  std::vector<const ShardedTensor<float>*> ptrs;
  for (const auto& t : e.in) ptrs.push_back(&t);
  e.out = evaluate_op<float>(*e.op, e.attrs, ptrs, infer_output_shapes(*e.op, e.attrs, shapes, c.op));
  for (size_t o = 0; o < e.out.size(); ++o) {
    const ParallelTensorShape& s = e.out[o].shape;
    e.out_grad.push_back(distribute(random_tensor<float>({s.logical_shape(), DataType::kFloat32}, 101 + o), s));
  }
  return e;
}

std::vector<ShardedTensor<float>> gradients(const Evaluated& e) {
  auto ptrs = [](const std::vector<ShardedTensor<float>>& v) {
    std::vector<const ShardedTensor<float>*> p;
    for (const auto& t : v) p.push_back(&t);
    return p;
  };
  const auto in = ptrs(e.in), out = ptrs(e.out), dout = ptrs(e.out_grad);
  return backward_op(*e.op, e.attrs, in, out, dout);
}

void poison(ShardedTensor<float>& t) {
  for (auto& s : t.shards) std::fill(s.data.begin(), s.data.end(), std::numeric_limits<float>::quiet_NaN());
}

// Bit for bit (NaN included: a poisoned read shows as a different pattern).
bool same_bits(const std::vector<ShardedTensor<float>>& a, const std::vector<ShardedTensor<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shards.size() != b[i].shards.size()) return false;
    for (size_t s = 0; s < a[i].shards.size(); ++s) {
      const auto &x = a[i].shards[s].data, &y = b[i].shards[s].data;
      if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0) return false;
    }
  }
  return true;
}

class BackwardReadsCase : public ::testing::TestWithParam<OpCase> {};

void free_data(ShardedTensor<float>& t) {
  for (auto& sh : t.shards) std::vector<float>().swap(sh.data);
}

// The case's gradients with `spoil` applied to every value its
// backward_reads leaves out (float ones only when `floats_only`).
std::vector<ShardedTensor<float>> gradients_without_unread(const Evaluated& e, void (*spoil)(ShardedTensor<float>&), bool floats_only) {
  const BackwardReads r = backward_reads(*e.op, e.attrs);
  Evaluated spoiled = e;
  for (size_t i = 0; i < e.in.size(); ++i)
    if (!r.input(i) && (!floats_only || e.in[i].shape.dtype == DataType::kFloat32)) spoil(spoiled.in[i]);
  for (size_t o = 0; o < e.out.size(); ++o)
    if (!r.output(o)) spoil(spoiled.out[o]);
  return gradients(spoiled);
}

TEST_P(BackwardReadsCase, UnreadValuesPoisonedChangeNothing) {
  const Evaluated e = evaluate_case(GetParam());
  EXPECT_TRUE(same_bits(gradients_without_unread(e, &poison, true), gradients(e)))
      << "the reverse rule reads a value its backward_reads leaves out";
}

// As the runtime leaves them: the shape kept, no data (a rule reading a
// value's data would crash, one using its size would differ).
TEST_P(BackwardReadsCase, UnreadValuesFreedChangeNothing) {
  const Evaluated e = evaluate_case(GetParam());
  EXPECT_TRUE(same_bits(gradients_without_unread(e, &free_data, false), gradients(e)))
      << "the reverse rule uses the size of a value its backward_reads leaves out";
}

TEST_P(BackwardReadsCase, EachReadValuePoisonedChangesAGradient) {
  const Evaluated e = evaluate_case(GetParam());
  const BackwardReads r = backward_reads(*e.op, e.attrs);
  const auto want = gradients(e);
  for (size_t i = 0; i < e.in.size(); ++i) {
    if (!r.input(i) || e.in[i].shape.dtype != DataType::kFloat32) continue;  // indices cannot hold NaN
    Evaluated poisoned = e;
    poison(poisoned.in[i]);
    EXPECT_FALSE(same_bits(gradients(poisoned), want)) << "input " << i << " is declared read but never is";
  }
  for (size_t o = 0; o < e.out.size(); ++o) {
    if (!r.output(o)) continue;
    Evaluated poisoned = e;
    poison(poisoned.out[o]);
    EXPECT_FALSE(same_bits(gradients(poisoned), want)) << "output " << o << " is declared read but never is";
  }
}

INSTANTIATE_TEST_SUITE_P(AllComputeOps, BackwardReadsCase, ::testing::ValuesIn(op_cases()),
                         [](const auto& param_info) { return param_info.param.label; });

// Every operator with a reverse rule says what it reads: without a
// declaration its inputs and outputs would live until the backward pass.
TEST(BackwardReads, EveryComputeOperatorDeclaresThem) {
  for (const OpDef* op : OpRegistry::global().all()) {
    if (op->op_class == OpClass::kCompute && op->grad_f32) {
      EXPECT_TRUE(op->backward_reads) << op->name;
    }
  }
  // A parallel operator's dual reads no value.
  const OpDef& rep = OpRegistry::global().get("Repartition");
  const BackwardReads r = backward_reads(rep, normalize_attributes(rep.attrs, {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, "Repartition"));
  EXPECT_EQ(r.inputs, 0u);
  EXPECT_EQ(r.outputs, 0u);
}

}  // namespace
}  // namespace pcgx
