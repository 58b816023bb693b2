// The parallel operators' identities (docs/design.md), evaluated as graphs by the
// interpreter in both number systems, and graph-level parallel forms built
// from them.
#include <gtest/gtest.h>

#include "pcgx/pcg/graph_builder.h"
#include "test_util.h"

namespace pcgx {
namespace {

Attributes dim_degree(int64_t dim, int64_t k) { return {{"dim", dim}, {"degree", k}}; }
Attributes degree(int64_t k) { return {{"degree", k}}; }

// Evaluates `a` and `b` (each with one output) on the same random sources
// and compares every replica slot of the first with slot 0 of the second,
// scaled by `scale`.
template <class T>
void expect_same(const Graph& a, const Graph& b, int64_t scale = 1) {
  auto va = evaluate<T>(a, random_sources<T>(5));
  auto vb = evaluate<T>(b, random_sources<T>(5));
  const TensorRef oa = a.outputs()[0], ob = b.outputs()[0];
  const auto& ta = va[static_cast<size_t>(oa.node)][static_cast<size_t>(oa.output)];
  const auto& tb = vb[static_cast<size_t>(ob.node)][static_cast<size_t>(ob.output)];
  Tensor<T> want = gather_slot(tb, 0);
  T factor{};
  if constexpr (std::is_same_v<T, float>) {
    factor = static_cast<float>(scale);
  } else {
    factor = ModP::from_int(scale);
  }
  for (auto& v : want.data) v = v * factor;
  for (int64_t c = 0; c < ta.shape.replica; ++c) {
    if constexpr (std::is_same_v<T, float>) {
      testing::expect_close(gather_slot(ta, c), want);
    } else {
      testing::expect_equal(gather_slot(ta, c), want);
    }
  }
}

template <class T>
void expect_same_both(const Graph& a, const Graph& b, int64_t scale = 1) {
  expect_same<float>(a, b, scale);
  expect_same<ModP>(a, b, scale);
}

Graph single(const std::function<TensorRef(GraphBuilder&, TensorRef)>& f, IntList shape = {4, 6}) {
  GraphBuilder b("g");
  TensorRef x = b.input("x", std::move(shape));
  b.graph().add_output(f(b, x));
  return b.finish();
}

TEST(ParallelIdentities, CombineAfterRepartitionIsIdentity) {
  for (int64_t dim : {0, 1})
    for (int64_t k : {2, 3}) {
      if ((dim == 0 ? 4 : 6) % k) continue;
      Graph a = single([&](GraphBuilder& b, TensorRef x) {
        TensorRef p = b.op("Repartition", dim_degree(dim, k), {x});
        EXPECT_EQ(b.shape(p).dims[static_cast<size_t>(dim)].degree, k);
        return b.op("Combine", dim_degree(dim, k), {p});
      });
      Graph id = single([](GraphBuilder&, TensorRef x) { return x; });
      expect_same_both<float>(a, id);
    }
}

TEST(ParallelIdentities, NestedRepartitionOrder) {
  // Repartition by 2 then 2 on one dimension equals repartition by 4.
  Graph a = single([](GraphBuilder& b, TensorRef x) {
    TensorRef p = b.op("Repartition", dim_degree(0, 2), {x});
    p = b.op("Repartition", dim_degree(0, 2), {p});
    return b.op("Combine", dim_degree(0, 4), {p});
  });
  Graph id = single([](GraphBuilder&, TensorRef x) { return x; });
  expect_same_both<float>(a, id);
}

TEST(ParallelIdentities, ReduceAfterReplicateIsKTimes) {
  for (int64_t k : {2, 3}) {
    Graph a = single([&](GraphBuilder& b, TensorRef x) {
      return b.op("Reduce", degree(k), {b.op("Replicate", degree(k), {x})});
    });
    Graph id = single([](GraphBuilder&, TensorRef x) { return x; });
    expect_same_both<float>(a, id, k);
  }
}

TEST(ParallelIdentities, AllReduceIsReplicateAfterReduce) {
  auto partial = [](GraphBuilder& b, TensorRef x) {
    // Replica slots holding different partial sums: reduction parallelism.
    TensorRef xs = b.op("Repartition", dim_degree(1, 2), {x});
    TensorRef w = b.weight("w", {6, 4});
    TensorRef ws = b.op("Repartition", dim_degree(0, 2), {w});
    return b.op("Linear", {}, {xs, ws});
  };
  Graph a = single([&](GraphBuilder& b, TensorRef x) { return b.op("AllReduce", degree(2), {partial(b, x)}); });
  Graph c = single([&](GraphBuilder& b, TensorRef x) {
    return b.op("Replicate", degree(2), {b.op("Reduce", degree(2), {partial(b, x)})});
  });
  expect_same_both<float>(a, c);
  // And the reduced partial sums are the unpartitioned Linear.
  Graph d = single([&](GraphBuilder& b, TensorRef x) { return b.op("Reduce", degree(2), {partial(b, x)}); });
  Graph e = single([](GraphBuilder& b, TensorRef x) { return b.op("Linear", {}, {x, b.weight("w", {6, 4})}); });
  expect_same_both<float>(d, e);
}

TEST(ParallelIdentities, AddIsReduceOfReplicaConcat) {
  // Unity's hybrid rewrite: Add(x, y) = Reduce(2)(Concat_replica(x, y)).
  auto build = [](bool hybrid) {
    GraphBuilder b("g");
    TensorRef x = b.input("x", {4, 6});
    TensorRef y = b.input("y", {4, 6});
    TensorRef out = hybrid ? b.op("Reduce", degree(2), {b.concat({x, y}, -1)}) : b.binary("EwAdd", x, y);
    b.graph().add_output(out);
    return b.finish();
  };
  expect_same_both<float>(build(true), build(false));
}

TEST(ParallelIdentities, ReplicaSplitUndoesReplicaConcat) {
  auto build = [](bool roundtrip) {
    GraphBuilder b("g");
    TensorRef x = b.input("x", {4, 6});
    TensorRef y = b.input("y", {4, 6});
    TensorRef out = y;
    if (roundtrip) {
      TensorRef c = b.concat({x, y}, -1);
      out = {b.graph().add("Split", {{"axis", int64_t{-1}}, {"sizes", IntList{1, 1}}}, {c}), 1};
    }
    b.graph().add_output(out);
    return b.finish();
  };
  expect_same_both<float>(build(true), build(false));
}

TEST(ParallelIdentities, PipelineAndBatchChangeScheduleNotValues) {
  Graph a = single([](GraphBuilder& b, TensorRef x) {
    TensorRef p = b.op("Pipeline", dim_degree(0, 2), {x});
    EXPECT_EQ(b.shape(p).dims[0].pipeline, 2);
    TensorRef r = b.unary("Relu", p);
    EXPECT_EQ(b.shape(r).dims[0].pipeline, 2);
    return b.op("Batch", dim_degree(0, 2), {r});
  });
  Graph c = single([](GraphBuilder& b, TensorRef x) { return b.unary("Relu", x); });
  expect_same_both<float>(a, c);
}

TEST(ParallelIdentities, DataParallelLinearAsAGraph) {
  // x split on the batch, W replicated: each task holds one batch block.
  Graph a = single([](GraphBuilder& b, TensorRef x) {
    TensorRef xs = b.op("Repartition", dim_degree(0, 2), {x});
    TensorRef w = b.op("Replicate", degree(2), {b.weight("w", {6, 4})});
    TensorRef y = b.op("Linear", {{"activation", std::string("relu")}}, {xs, w});
    EXPECT_EQ(b.shape(y).dims[0].degree, 2);
    EXPECT_EQ(b.shape(y).replica, 1);
    return b.op("Combine", dim_degree(0, 2), {y});
  });
  Graph c = single([](GraphBuilder& b, TensorRef x) {
    return b.op("Linear", {{"activation", std::string("relu")}}, {x, b.weight("w", {6, 4})});
  });
  expect_same_both<float>(a, c);
}

TEST(ParallelIdentities, RepartitionCommutesWithRelu) {
  Graph a = single([](GraphBuilder& b, TensorRef x) {
    return b.op("Combine", dim_degree(1, 2), {b.unary("Relu", b.op("Repartition", dim_degree(1, 2), {x}))});
  });
  Graph c = single([](GraphBuilder& b, TensorRef x) { return b.unary("Relu", x); });
  expect_same_both<float>(a, c);
}

TEST(ModularSurrogates, ReluKeepsItsIdentities) {
  // relu(x) - relu(-x) = x, relu(relu(x)) = relu(x), relu(a x) = a relu(x) for a "positive" (a residue).
  Graph a = single([](GraphBuilder& b, TensorRef x) {
    TensorRef neg = b.scalar_mul(x, -1.0);
    return b.binary("EwAdd", b.unary("Relu", x), b.scalar_mul(b.unary("Relu", neg), -1.0));
  });
  Graph id = single([](GraphBuilder&, TensorRef x) { return x; });
  expect_same<ModP>(a, id);
  expect_same<float>(a, id);
  Graph twice = single([](GraphBuilder& b, TensorRef x) { return b.unary("Relu", b.unary("Relu", x)); });
  Graph once = single([](GraphBuilder& b, TensorRef x) { return b.unary("Relu", x); });
  expect_same<ModP>(twice, once);
  Graph scaled = single([](GraphBuilder& b, TensorRef x) { return b.unary("Relu", b.scalar_mul(x, 4.0)); });
  Graph outside = single([](GraphBuilder& b, TensorRef x) { return b.scalar_mul(b.unary("Relu", x), 4.0); });
  expect_same<ModP>(scaled, outside);
  expect_same<float>(scaled, outside);
}

TEST(ModularSurrogates, NonLinearOperatorsAreNotLinear) {
  // relu(x + y) != relu(x) + relu(y): the surrogate must not make this an identity.
  auto build = [](bool inside) {
    GraphBuilder b("g");
    TensorRef x = b.input("x", {8, 8});
    TensorRef y = b.input("y", {8, 8});
    for (const char* op : {"Relu", "Gelu", "Sigmoid", "Tanh"}) {
      TensorRef out = inside ? b.unary(op, b.binary("EwAdd", x, y))
                             : b.binary("EwAdd", b.unary(op, x), b.unary(op, y));
      b.graph().add_output(out);
    }
    return b.finish();
  };
  const auto a = evaluate_outputs<ModP>(build(true), random_sources<ModP>(1));
  const auto c = evaluate_outputs<ModP>(build(false), random_sources<ModP>(1));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NE(a[i].data, c[i].data) << "operator " << i;
}

}  // namespace
}  // namespace pcgx
