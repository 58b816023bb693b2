// The degree rules docs/design.md and the core issue name, one by one, plus the
// error messages for illegal combinations.
#include <gtest/gtest.h>

#include "pcgx/pcg/degree_inference.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/registry.h"

namespace pcgx {
namespace {

ParallelTensorShape shape(std::vector<int64_t> sizes, std::vector<int64_t> degrees, int64_t replica = 1,
                          DataType dt = DataType::kFloat32) {
  ParallelTensorShape s = ParallelTensorShape::unpartitioned(sizes, dt);
  for (size_t i = 0; i < degrees.size(); ++i) s.dims[i].degree = degrees[i];
  s.replica = replica;
  return s;
}

std::vector<ParallelTensorShape> infer(const std::string& op, const Attributes& given,
                                       std::vector<ParallelTensorShape> inputs) {
  const OpDef& def = OpRegistry::global().get(op);
  return infer_output_shapes(def, normalize_attributes(def.attrs, given, op), inputs, op);
}

std::string error_of(const std::string& op, const Attributes& given, std::vector<ParallelTensorShape> inputs) {
  try {
    infer(op, given, std::move(inputs));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(DegreeInference, LinearDataParallel) {
  auto out = infer("Linear", {}, {shape({8, 6}, {4, 1}), shape({6, 10}, {1, 1}, 4)});
  EXPECT_EQ(out[0], shape({8, 10}, {4, 1}));
}

TEST(DegreeInference, LinearModelParallel) {
  auto out = infer("Linear", {}, {shape({8, 6}, {1, 1}, 2), shape({6, 10}, {1, 2})});
  EXPECT_EQ(out[0], shape({8, 10}, {1, 2}));
}

TEST(DegreeInference, LinearReductionGivesPartialSums) {
  auto out = infer("Linear", {}, {shape({8, 6}, {1, 2}), shape({6, 10}, {2, 1})});
  EXPECT_EQ(out[0], shape({8, 10}, {1, 1}, 2));
}

TEST(DegreeInference, LinearSlotWise) {
  auto out = infer("Linear", {}, {shape({8, 6}, {1, 1}, 2), shape({6, 10}, {1, 1}, 2)});
  EXPECT_EQ(out[0], shape({8, 10}, {1, 1}, 2));
}

TEST(DegreeInference, LinearProductOfKinds) {
  // Data parallel by 2 and reduction by 2: W replicated twice and split on rows.
  auto out = infer("Linear", {}, {shape({8, 6}, {2, 2}), shape({6, 10}, {2, 1}, 2)});
  EXPECT_EQ(out[0], shape({8, 10}, {2, 1}, 2));
}

TEST(DegreeInference, LinearReductionNeedsNoActivation) {
  EXPECT_NE(error_of("Linear", {{"activation", std::string("relu")}}, {shape({8, 6}, {1, 2}), shape({6, 10}, {2, 1})})
                .find("split along dimension 1 (degree 2)"),
            std::string::npos);
}

TEST(DegreeInference, BatchMatMulHeadAndBatchSplits) {
  auto out = infer("BatchMatMul", {}, {shape({4, 8, 6}, {2, 1, 1}), shape({4, 6, 5}, {2, 1, 1})});
  EXPECT_EQ(out[0], shape({4, 8, 5}, {2, 1, 1}));
  auto red = infer("BatchMatMul", {}, {shape({4, 8, 6}, {1, 1, 2}), shape({4, 6, 5}, {1, 2, 1})});
  EXPECT_EQ(red[0], shape({4, 8, 5}, {1, 1, 1}, 2));
}

TEST(DegreeInference, ElementwiseNeedsIdenticalDegrees) {
  EXPECT_EQ(infer("EwAdd", {}, {shape({4, 6}, {2, 3}), shape({4, 6}, {2, 3})})[0], shape({4, 6}, {2, 3}));
  EXPECT_NE(error_of("EwAdd", {}, {shape({4, 6}, {2, 1}), shape({4, 6}, {1, 1})}).find("disagree"), std::string::npos);
  EXPECT_NE(error_of("EwMul", {}, {shape({4, 6}, {1, 1}, 2), shape({4, 6}, {1, 1})}).find("replica degree"),
            std::string::npos);
}

TEST(DegreeInference, ConcatAlongASplitDimensionIsIllegal) {
  EXPECT_EQ(infer("Concat", {{"axis", int64_t{1}}}, {shape({4, 6}, {2, 1}), shape({4, 2}, {2, 1})})[0],
            shape({4, 8}, {2, 1}));
  const std::string e = error_of("Concat", {{"axis", int64_t{1}}}, {shape({4, 6}, {1, 2}), shape({4, 2}, {1, 2})});
  EXPECT_NE(e.find("input 0 (x) is split along dimension 1 (degree 2)"), std::string::npos) << e;
  EXPECT_NE(e.find("Concat"), std::string::npos) << e;
}

TEST(DegreeInference, ReplicaConcat) {
  EXPECT_EQ(infer("Concat", {{"axis", int64_t{-1}}}, {shape({4, 6}, {2, 1}), shape({4, 6}, {2, 1})})[0],
            shape({4, 6}, {2, 1}, 2));
  EXPECT_NE(error_of("Concat", {{"axis", int64_t{-1}}}, {shape({4, 6}, {2, 1}), shape({4, 6}, {1, 1})})
                .find("identical partitioning"),
            std::string::npos);
}

TEST(DegreeInference, EmbeddingRowsAndColumns) {
  const auto idx = shape({8, 3}, {1, 1}, 2, DataType::kInt64);
  auto rows = infer("Embedding", {}, {idx, shape({100, 16}, {2, 1})});
  EXPECT_EQ(rows[0], shape({8, 3, 16}, {1, 1, 1}, 2));
  auto cols = infer("Embedding", {}, {idx, shape({100, 16}, {1, 2})});
  EXPECT_EQ(cols[0], shape({8, 3, 16}, {1, 1, 2}));
  auto batch = infer("Embedding", {}, {shape({8, 3}, {2, 1}, 1, DataType::kInt64), shape({100, 16}, {1, 1}, 2)});
  EXPECT_EQ(batch[0], shape({8, 3, 16}, {2, 1, 1}));
}

TEST(DegreeInference, ConvGroupParallelismMustDivideGroups) {
  auto ok = infer("Conv2D", {{"groups", int64_t{2}}}, {shape({2, 4, 5, 5}, {1, 2, 1, 1}), shape({4, 2, 3, 3}, {2, 1, 1, 1})});
  EXPECT_EQ(ok[0], shape({2, 4, 3, 3}, {1, 2, 1, 1}));
  EXPECT_NE(error_of("Conv2D", {{"groups", int64_t{2}}}, {shape({2, 8, 5, 5}, {1, 4, 1, 1}), shape({8, 4, 3, 3}, {4, 1, 1, 1})})
                .find("must divide 2"),
            std::string::npos);
  // Spatial splits are not local computations.
  EXPECT_NE(error_of("Conv2D", {}, {shape({2, 4, 6, 6}, {1, 1, 2, 1}), shape({4, 4, 3, 3}, {1, 1, 1, 1})})
                .find("dimension 2"),
            std::string::npos);
}

TEST(DegreeInference, NormalizedDimensionCannotBeSplit) {
  EXPECT_NE(error_of("Softmax", {}, {shape({4, 6}, {1, 2})}).find("dimension 1"), std::string::npos);
  EXPECT_EQ(infer("Softmax", {}, {shape({4, 6}, {2, 1})})[0], shape({4, 6}, {2, 1}));
  EXPECT_NE(error_of("BatchNorm", {}, {shape({4, 2, 2, 2}, {2, 1, 1, 1}), shape({2}, {1}), shape({2}, {1})})
                .find("dimension 0"),
            std::string::npos);
}

TEST(DegreeInference, LossUnderDataParallelismIsPartialSums) {
  auto out = infer("MSELoss", {}, {shape({8, 2}, {4, 1}), shape({8, 2}, {4, 1})});
  EXPECT_EQ(out[0].replica, 4);
  EXPECT_TRUE(out[0].dims.empty());
}

TEST(DegreeInference, PipelinedDimensionFlowsThroughSplittableOps) {
  ParallelTensorShape x = shape({8, 6}, {1, 1});
  x.dims[0].pipeline = 2;
  auto out = infer("Linear", {}, {x, shape({6, 4}, {1, 1})});
  EXPECT_EQ(out[0].dims[0].pipeline, 2);
  ParallelTensorShape y = shape({8, 6}, {1, 1});
  y.dims[1].pipeline = 2;
  EXPECT_NE(error_of("Softmax", {}, {y}).find("pipelined"), std::string::npos);
}

TEST(DegreeInference, TaskGridOrderMatchesOutputShards) {
  // Reduction (partial) kinds come right after the slot dimension, then the
  // kinds that split output dimensions, so task t writes output shard t.
  const OpDef& lin = OpRegistry::global().get("Linear");
  const Attributes a = normalize_attributes(lin.attrs, {}, "Linear");
  std::vector<ParallelTensorShape> in{shape({8, 6}, {2, 2}), shape({6, 10}, {2, 1}, 2)};
  auto r = infer_degrees(lin, a, in, std::vector<TensorType>{{{8, 10}, DataType::kFloat32}});
  ASSERT_EQ(r.grid.names, (std::vector<std::string>{"slot", "reduce", "batch0"}));
  std::vector<int64_t> coords(3, 0);
  for (int64_t t = 0; t < r.grid.num_tasks(); ++t) {
    coords = {0, t / 2, t % 2};
    EXPECT_EQ(shard_for_task(r.grid.outputs[0], r.outputs[0], coords, r.grid.extents), t);
  }
}

TEST(Registry, EveryKindSplitsSomeInputAndEveryOperatorIsComplete) {
  for (const OpDef* op : OpRegistry::global().all()) {
    SCOPED_TRACE(op->name);
    EXPECT_TRUE(op->infer_types) << "no type inference";
    EXPECT_TRUE(op->flops) << "no FLOP count";
    if (op->op_class == OpClass::kCompute) {
      EXPECT_TRUE(op->kinds);
      EXPECT_TRUE(op->kernel_f32 && op->kernel_mod) << "missing a reference kernel";
    } else if (op->op_class == OpClass::kParallel) {
      EXPECT_TRUE(op->infer_parallel && op->shard_f32 && op->shard_mod);
    }
  }
  for (const char* name : {"Input", "Weight", "Linear", "MatMul", "BatchMatMul", "EwAdd", "EwMul", "ScalarMul", "Relu",
                           "Gelu", "Sigmoid", "Tanh", "Softmax", "LayerNorm", "Concat", "Split", "Reshape", "Transpose",
                           "Embedding", "EmbeddingBag", "Conv2D", "Pool2D", "BatchNorm", "BatchSum", "BatchSquares", "BatchNormApply", "Dropout",
                           "SoftmaxCrossEntropy", "MSELoss", "Repartition", "Combine", "Replicate", "Reduce",
                           "AllReduce", "Pipeline", "Batch"})
    EXPECT_NE(OpRegistry::global().find(name), nullptr) << name;
}

}  // namespace
}  // namespace pcgx
