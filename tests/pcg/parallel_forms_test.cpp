// For every compute operator: evaluating its parallel form (partition the
// inputs as a legal degree combination prescribes, run every task on its
// shards, then concatenate blocks and sum partial-sum slots) equals
// evaluating it unpartitioned. Every combination of up to two active
// parallel kinds of degree 2, with and without a slot-wise replica factor,
// is tried in both number systems.
#include <gtest/gtest.h>

#include <set>

#include "pcgx/pcg/degree_inference.h"
#include "pcgx/pcg/error.h"
#include "op_cases.h"
#include "test_util.h"

namespace pcgx {
namespace {

// The slot coordinates of a tensor's replica slot along its replica task
// dimensions (outermost first).
std::vector<int64_t> slot_coords(int64_t slot, const TensorMapping& m, const TaskGrid& g) {
  std::vector<int64_t> c(m.replica_task.size());
  for (size_t k = m.replica_task.size(); k-- > 0;) {
    const int64_t e = g.extents[static_cast<size_t>(m.replica_task[k])];
    c[k] = slot % e;
    slot /= e;
  }
  return c;
}

// Lays `full` out as `shape`: split dims by block; replica slots are copies,
// except along a kSum kind, where only coordinate 0 holds the value.
template <class T>
ShardedTensor<T> partition(const Tensor<T>& full, const ParallelTensorShape& shape, const TensorMapping& m,
                           const TaskGrid& g, const std::vector<bool>& task_is_sum) {
  ShardedTensor<T> s = distribute(full, shape);
  const int64_t blocks = shape.num_blocks();
  for (int64_t c = 0; c < shape.replica; ++c) {
    const auto coords = slot_coords(c, m, g);
    bool zero = false;
    for (size_t k = 0; k < coords.size(); ++k)
      zero = zero || (task_is_sum[static_cast<size_t>(m.replica_task[k])] && coords[k] != 0);
    if (zero)
      for (int64_t b = 0; b < blocks; ++b)
        for (auto& v : s.shards[static_cast<size_t>(c * blocks + b)].data) v = T();
  }
  return s;
}

template <class T>
void add_into(Tensor<T>& acc, const Tensor<T>& x) {
  for (size_t i = 0; i < acc.data.size(); ++i) acc.data[i] += x.data[i];
}

struct Tally {
  int tried = 0;
  int active = 0;
};

template <class T>
void check_case(const OpCase& c, Tally& tally) {
  const OpDef& op = OpRegistry::global().get(c.op);
  const Attributes attrs = normalize_attributes(op.attrs, c.attrs, c.label);
  std::vector<Tensor<T>> full;
  std::vector<ParallelTensorShape> plain;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const int64_t range = i < c.index_range.size() ? c.index_range[i] : 0;
    full.push_back(random_tensor<T>(c.inputs[i], 100 + i, range));
    plain.push_back(ParallelTensorShape::unpartitioned(c.inputs[i].shape, c.inputs[i].dtype));
  }
  const auto plain_out = infer_output_shapes(op, attrs, plain, c.label);
  std::vector<ShardedTensor<T>> plain_in;
  for (size_t i = 0; i < full.size(); ++i) plain_in.push_back(distribute(full[i], plain[i]));
  std::vector<const ShardedTensor<T>*> ptrs;
  for (auto& s : plain_in) ptrs.push_back(&s);
  std::vector<Tensor<T>> expected;
  for (auto& o : evaluate_op<T>(op, attrs, ptrs, plain_out)) expected.push_back(gather_slot(o, 0));

  const auto kinds = op.kinds(attrs, c.inputs);
  const size_t nk = kinds.size();
  for (int64_t slots : {1, 2})
    for (uint32_t mask = 0; mask < (1u << nk); ++mask) {
      if (__builtin_popcount(mask) > 2) continue;
      std::vector<ParallelTensorShape> shapes = plain;
      for (size_t i = 0; i < shapes.size(); ++i) {
        shapes[i].replica = slots;
        for (size_t k = 0; k < nk; ++k) {
          if (!(mask & (1u << k))) continue;
          const int r = kinds[k].inputs[i];
          if (r >= 0) {
            shapes[i].dims[static_cast<size_t>(r)].degree = 2;
          } else {
            shapes[i].replica *= 2;
          }
        }
      }
      bool valid = true;
      for (const auto& s : shapes) valid = valid && !s.invalid_reason();
      if (!valid) continue;
      std::vector<TensorType> out_types;
      for (const auto& s : plain_out) out_types.push_back({s.logical_shape(), s.dtype});
      DegreeInference inf;
      try {
        inf = infer_degrees(op, attrs, shapes, out_types);
      } catch (const Error&) {
        continue;  // e.g. a degree that does not divide an output dimension
      }
      ++tally.tried;
      if (mask) ++tally.active;
      std::vector<bool> task_is_sum(inf.grid.extents.size(), false);
      for (size_t t = 1; t < inf.grid.names.size(); ++t)
        for (const auto& k : kinds)
          if (k.name == inf.grid.names[t])
            for (int r : k.inputs) task_is_sum[t] = task_is_sum[t] || r == ParallelKind::kSum;
      std::vector<ShardedTensor<T>> sharded;
      for (size_t i = 0; i < full.size(); ++i)
        sharded.push_back(partition(full[i], shapes[i], inf.grid.inputs[i], inf.grid, task_is_sum));
      std::vector<const ShardedTensor<T>*> sp;
      for (auto& s : sharded) sp.push_back(&s);
      const auto out = evaluate_op<T>(op, attrs, sp, inf.outputs);
      for (size_t o = 0; o < out.size(); ++o) {
        const int64_t partial = out[o].shape.replica / slots;
        for (int64_t s = 0; s < slots; ++s) {
          Tensor<T> sum = gather_slot(out[o], s * partial);
          for (int64_t p = 1; p < partial; ++p) add_into(sum, gather_slot(out[o], s * partial + p));
          SCOPED_TRACE(c.label + " mask " + std::to_string(mask) + " slots " + std::to_string(slots) + " output " +
                       std::to_string(o));
          if constexpr (std::is_same_v<T, float>) {
            testing::expect_close(sum, expected[o]);
          } else {
            testing::expect_equal(sum, expected[o]);
          }
        }
      }
    }
}

class ParallelForms : public ::testing::TestWithParam<OpCase> {};

TEST_P(ParallelForms, FloatMatchesUnpartitioned) {
  Tally t;
  check_case<float>(GetParam(), t);
  EXPECT_GT(t.active, 0) << "no parallel form was exercised";
}

TEST_P(ParallelForms, ModularMatchesUnpartitionedExactly) {
  Tally t;
  check_case<ModP>(GetParam(), t);
  EXPECT_GT(t.active, 0) << "no parallel form was exercised";
}

INSTANTIATE_TEST_SUITE_P(AllComputeOps, ParallelForms, ::testing::ValuesIn(op_cases()),
                         [](const auto& param_info) { return param_info.param.label; });

// Every compute operator in the registry has at least one case above.
TEST(ParallelForms, CoverEveryComputeOperator) {
  std::set<std::string> covered;
  for (const auto& c : op_cases()) covered.insert(c.op);
  for (const OpDef* op : OpRegistry::global().all())
    if (op->op_class == OpClass::kCompute) {
      EXPECT_TRUE(covered.count(op->name)) << op->name << " has no parallel-form case";
    }
}

}  // namespace
}  // namespace pcgx
