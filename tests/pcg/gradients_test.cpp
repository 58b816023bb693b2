// The reverse rules (operator.h) against finite differences of the
// interpreter, and the sharded gradient of parallelized graphs against the
// unpartitioned one.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "model_param_name.h"
#include "pcgx/pcg/gradients.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/zoo.h"
#include "test_util.h"

namespace pcgx {
namespace {

using Values = std::map<NodeId, Tensor<float>>;

Values random_values(const Graph& g, uint64_t seed) {
  Values v;
  const SourceFn<float> src = random_sources<float>(seed);
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kSource) v[n.id] = src(n);
  return v;
}

// `base`'s source values for the sources of `g` of the same name.
Values values_by_name(const Graph& g, const Graph& base, const Values& v) {
  Values out;
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kSource)
      for (const Node& m : base.nodes())
        if (m.name == n.name) out[n.id] = v.at(m.id);
  return out;
}

double loss_of(const Graph& g, const Values& v) {
  return evaluate_outputs<float>(g, [&](const Node& n) { return v.at(n.id); }).at(0).data.at(0);
}

// Gradient of output 0 with respect to every source, as logical tensors.
Values gradient_of(const Graph& g, const Values& v) {
  const auto values = evaluate<float>(g, [&](const Node& n) { return v.at(n.id); });
  const ShardedTensor<float> seed = loss_seed(g.shape(g.outputs().at(0)));
  std::vector<ShardedTensor<float>> seeds{seed};
  for (size_t o = 1; o < g.outputs().size(); ++o) seeds.push_back(zeros_like(g.shape(g.outputs()[o])));
  const auto grads = evaluate_gradients(g, values, seeds);
  Values out;
  for (const auto& [id, t] : v) out[id] = gather_slot(grads[static_cast<size_t>(id)][0], 0);
  return out;
}

// Directional derivative along random +-1 directions over every float
// source, analytic vs central differences (in double around float sums).
void expect_gradient_matches_differences(const Graph& g, uint64_t seed, double eps = 1e-2) {
  const Values v = random_values(g, seed);
  const Values grad = gradient_of(g, v);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 3; ++trial) {
    Values plus = v, minus = v;
    double analytic = 0, scale = 0;
    for (const auto& [id, t] : v) {
      if (g.node(id).outputs[0].dtype != DataType::kFloat32) continue;
      for (size_t i = 0; i < t.data.size(); ++i) {
        const float d = (rng() & 1) ? 1.f : -1.f;
        plus[id].data[i] += static_cast<float>(eps) * d;
        minus[id].data[i] -= static_cast<float>(eps) * d;
        analytic += grad.at(id).data[i] * d;
        scale += std::fabs(grad.at(id).data[i]);
      }
    }
    const double numeric = (loss_of(g, plus) - loss_of(g, minus)) / (2 * eps);
    EXPECT_NEAR(numeric, analytic, 0.02 * scale + 1e-3) << g.name() << " trial " << trial;
  }
}

class ZooGradient : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooGradient, MatchesFiniteDifferences) {
  // The tiny CNNs' batch of 2 leaves the last BatchNorms two values per
  // channel, normalized to +-1 whatever the input: differences there are
  // noise. Eight samples make them informative.
  ModelParams p;
  if (GetParam() == "resnext-50-tiny" || GetParam() == "inception-v3-tiny") p["batch"] = 8;
  expect_gradient_matches_differences(build_model(GetParam(), p), 7, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Tiny, ZooGradient,
                         ::testing::Values("mlp-tiny", "bert-large-tiny", "gpt-tiny", "dlrm-tiny", "xdl-tiny",
                                           "candle-uno-tiny", "vgg-13-tiny", "resnext-50-tiny", "inception-v3-tiny",
                                           "llama-tiny"),
                         pcgx::testing::model_param_name);

// Operators and attribute values the zoo does not use.
TEST(Gradients, OperatorsOutsideTheZoo) {
  GraphBuilder b("ops");
  TensorRef x = b.input("x", {4, 6});
  TensorRef h = b.linear(x, 6, "gelu", true, "l1");
  TensorRef s = b.unary("Sigmoid", b.linear(x, 6, "sigmoid", false, "l2"));
  TensorRef t = b.unary("Tanh", b.linear(x, 6, "tanh", true, "l3"));
  TensorRef m = b.binary("EwMul", h, b.unary("Gelu", s));
  const auto parts = b.op("Split", {{"axis", int64_t{1}}, {"sizes", IntList{2, 4}}}, {b.binary("EwAdd", m, t)});
  TensorRef joined = b.concat({TensorRef{parts.node, 1}, TensorRef{parts.node, 0}}, 1);
  TensorRef n = b.op("LayerNorm", {{"affine", false}}, {joined});
  TensorRef img = b.reshape(b.scalar_mul(n, 0.5), {1, 4, 2, 3});
  TensorRef c = b.conv2d(img, 4, 2, 2, 1, 1, 1, 1, 2, true, "relu", "conv");
  TensorRef p = b.pool2d(c, "avg", 2, 2, 1, 1, 0, 0);
  TensorRef flat = b.reshape(p, {1, 4 * 2 * 3});
  b.graph().add_output(b.mse_loss(b.linear(flat, 3, "none", false, "head"), b.input("y", {1, 3})));
  expect_gradient_matches_differences(b.finish(), 11);
}

// A new operator's gradient in a graph of its own: in a shared graph one
// operator's curvature (a Gelu's, a saturated Sigmoid's) can hide another's
// error or fail a correct rule at the shared step size.
TEST(Gradients, SiluAndRMSNorm) {
  GraphBuilder b("llama-ops");
  TensorRef x = b.input("x", {3, 8});
  TensorRef g = b.weight("gamma", {8});
  Attributes eps;
  eps.set("eps", 1e-6);
  TensorRef h = b.op("RMSNorm", eps, {x, g});
  TensorRef s = b.binary("EwMul", b.unary("Silu", b.linear(h, 8, "none", false, "gate")), b.linear(h, 8, "none", false, "up"));
  b.graph().add_output(b.mse_loss(s, b.input("y", {3, 8})));
  expect_gradient_matches_differences(b.finish(), 13, 1e-3);
}

// Reciprocal of a value kept away from 0 (one plus a sigmoid, in (1, 2)),
// between two Linears.
TEST(Gradients, Reciprocal) {
  GraphBuilder b("reciprocal");
  TensorRef x = b.input("x", {3, 8});
  TensorRef pos = b.unary("Sigmoid", b.linear(x, 8, "none", false, "l0"));
  TensorRef one_plus = b.binary("EwAdd", pos, b.unary("Sigmoid", b.scalar_mul(pos, 0.0)));  // sigmoid(0) = 1/2: in (1/2, 3/2)
  TensorRef r = b.unary("Reciprocal", one_plus);
  b.graph().add_output(b.mse_loss(b.linear(r, 4, "none", false, "l1"), b.input("y", {3, 4})));
  expect_gradient_matches_differences(b.finish(), 13, 1e-3);
}

// Clip between two Linears; the bounds cut inside the values' range (the
// difference quotients stay on one side of each bound at this seed).
TEST(Gradients, Clip) {
  GraphBuilder b("clip");
  TensorRef x = b.input("x", {3, 8});
  Attributes bounds;
  bounds.set("min", -0.4), bounds.set("max", 0.6);
  TensorRef h = b.op("Clip", bounds, {b.linear(x, 8, "none", false, "l0")});
  b.graph().add_output(b.mse_loss(b.linear(h, 4, "none", false, "l1"), b.input("y", {3, 4})));
  expect_gradient_matches_differences(b.finish(), 13, 1e-3);
}

TEST(Gradients, BatchNormAndMaxPool) {
  GraphBuilder b("bn");
  TensorRef x = b.input("x", {3, 2, 4, 4});
  TensorRef h = b.pool2d(b.batch_norm(x, "bn"), "max", 2, 2, 2, 2, 0, 0);
  b.graph().add_output(b.mse_loss(h, b.input("y", {3, 2, 2, 2})));
  expect_gradient_matches_differences(b.finish(), 5, 1e-3);
}

// BatchNorm over groups of samples, and BatchNorm as its statistics applied
// (BatchNormApply(x, BatchSum(x), BatchSquares(x, BatchSum(x)))), against
// finite differences.
TEST(Gradients, BatchNormGroupsAndStatistics) {
  for (const bool grouped : {true, false}) {
    GraphBuilder b(grouped ? "bn-groups" : "bn-stats");
    // Through a sigmoid: statistics with a mean far from 0 exercise every term.
    TensorRef x = b.unary("Sigmoid", b.input("x", {4, 2, 3, 3}));
    TensorRef g = b.weight("g", {2}), beta = b.weight("b", {2});
    TensorRef y;
    if (grouped) {
      y = b.op("BatchNorm", {{"group", int64_t{2}}}, {x, g, beta});
    } else {
      const TensorRef sum = b.op("BatchSum", {}, {x});
      y = b.op("BatchNormApply", {}, {x, sum, b.op("BatchSquares", {}, {x, sum}), g, beta});
    }
    b.graph().add_output(b.mse_loss(b.unary("Tanh", y), b.input("t", {4, 2, 3, 3})));
    SCOPED_TRACE(b.graph().name());
    expect_gradient_matches_differences(b.finish(), 5, 1e-3);
  }
}

// Synchronized BatchNorm data parallel over 2 devices (partial statistics,
// Reduce, Replicate to both halves) gives BatchNorm's gradients of its input
// and its weights.
TEST(Gradients, SynchronizedBatchNormGivesBatchNormsGradients) {
  auto build = [](bool parallel) {
    GraphBuilder b(parallel ? "sync-bn" : "bn");
    TensorRef x = b.unary("Sigmoid", b.input("x", {4, 2, 3, 3}));
    TensorRef g = b.weight("g", {2}), beta = b.weight("b", {2});
    TensorRef t = b.input("t", {4, 2, 3, 3});
    auto attr = [](int64_t d, int64_t k) { return Attributes{{"dim", d}, {"degree", k}}; };
    TensorRef y;
    if (parallel) {
      TensorRef xs = b.op("Repartition", attr(0, 2), {x});
      auto all_reduced = [&](TensorRef partial) {
        return b.op("Replicate", {{"degree", int64_t{2}}}, {b.op("Reduce", {{"degree", int64_t{2}}}, {partial})});
      };
      const TensorRef sum = all_reduced(b.op("BatchSum", {}, {xs}));
      const TensorRef squares = all_reduced(b.op("BatchSquares", {}, {xs, sum}));
      TensorRef ys = b.op("BatchNormApply", {}, {xs, sum, squares,
                                                 b.op("Replicate", {{"degree", int64_t{2}}}, {g}),
                                                 b.op("Replicate", {{"degree", int64_t{2}}}, {beta})});
      y = b.op("Combine", attr(0, 2), {b.unary("Tanh", ys)});
    } else {
      y = b.unary("Tanh", b.op("BatchNorm", {}, {x, g, beta}));
    }
    b.graph().add_output(b.mse_loss(y, t));
    return b.finish();
  };
  const Graph base = build(false), par = build(true);
  const Values v = random_values(base, 9);
  const Values vp = values_by_name(par, base, v);
  EXPECT_NEAR(loss_of(par, vp), loss_of(base, v), 1e-5);
  const Values want = gradient_of(base, v), got = gradient_of(par, vp);
  for (const Node& n : par.nodes())
    if (n.op->op_class == OpClass::kSource && n.name != "t")
      for (const Node& m : base.nodes())
        if (m.name == n.name) {
          SCOPED_TRACE(n.name);
          testing::expect_close(got.at(n.id), want.at(m.id), 1e-4, 1e-5);
        }
}

// The cross-entropy as its blocks' log-sum-exp applied (CrossEntropyApply(x,
// l, ClassLogSumExp(x))) against finite differences, and against
// SoftmaxCrossEntropy's own value and gradients; then split by classes over
// 2 devices (Megatron-LM's vocabulary-parallel cross-entropy: the logits
// split, the blocks' values gathered, the shares of the loss reduced), the
// same loss and gradients.
TEST(Gradients, CrossEntropyAsItsBlocksAppliedAndSplitByClasses) {
  auto build = [](const std::string& form) {
    GraphBuilder b("ce-" + form);
    TensorRef x = b.input("x", {4, 5});
    TensorRef w = b.weight("W", {5, 6});
    TensorRef labels = b.input("labels", {4}, DataType::kInt64, 6);
    TensorRef logits = b.unary("Tanh", b.op("Linear", {}, {x, w}));
    auto attr = [](int64_t d, int64_t k) { return Attributes{{"dim", d}, {"degree", k}}; };
    const Attributes two{{"degree", int64_t{2}}};
    TensorRef loss;
    if (form == "fused") {
      loss = b.softmax_cross_entropy(logits, labels);
    } else if (form == "blocks") {
      loss = b.op("CrossEntropyApply", {}, {logits, labels, b.op("ClassLogSumExp", {{"blocks", int64_t{3}}}, {logits})});
    } else {
      const TensorRef xs = b.op("Repartition", attr(1, 2), {logits});
      const TensorRef lse = b.op("ClassLogSumExp", {{"blocks", int64_t{2}}}, {xs});
      const TensorRef gathered = b.op("Replicate", two, {b.op("Combine", attr(1, 2), {lse})});
      loss = b.op("Reduce", two, {b.op("CrossEntropyApply", {}, {xs, b.op("Replicate", two, {labels}), gathered})});
    }
    b.graph().add_output(loss);
    return b.finish();
  };
  const Graph base = build("fused");
  const Values v = random_values(base, 11);
  const Values want = gradient_of(base, v);
  for (const std::string form : {"blocks", "classes"}) {
    SCOPED_TRACE(form);
    const Graph g = build(form);
    expect_gradient_matches_differences(g, 13, 1e-3);
    const Values vg = values_by_name(g, base, v);
    EXPECT_NEAR(loss_of(g, vg), loss_of(base, v), 1e-6);
    const Values got = gradient_of(g, vg);
    for (const Node& n : g.nodes())
      if (n.op->op_class == OpClass::kSource && n.name != "labels")
        for (const Node& m : base.nodes())
          if (m.name == n.name) {
            SCOPED_TRACE(n.name);
            testing::expect_close(got.at(n.id), want.at(m.id), 1e-5, 1e-6);
          }
  }
}

// Data and reduction parallel forms of one Linear: the weight's gradient
// (after the duals of Replicate and Repartition) equals the unpartitioned one.
TEST(Gradients, ParallelFormsGiveTheSameWeightGradient) {
  auto build = [](const std::string& form) {
    GraphBuilder b("lin-" + form);
    TensorRef x = b.input("x", {8, 6});
    TensorRef w = b.weight("W", {6, 4});
    TensorRef y = b.input("y", {8, 4});
    TensorRef out;
    if (form == "data") {
      TensorRef xs = b.op("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {x});
      TensorRef ws = b.op("Replicate", {{"degree", int64_t{2}}}, {w});
      TensorRef ys = b.op("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {y});
      out = b.op("Reduce", {{"degree", int64_t{2}}}, {b.mse_loss(b.op("Linear", {}, {xs, ws}), ys)});
    } else if (form == "reduce") {
      TensorRef xs = b.op("Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {x});
      TensorRef ws = b.op("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {w});
      out = b.mse_loss(b.op("Reduce", {{"degree", int64_t{2}}}, {b.op("Linear", {}, {xs, ws})}), y);
    } else if (form == "model") {
      TensorRef xs = b.op("Replicate", {{"degree", int64_t{2}}}, {x});
      TensorRef ws = b.op("Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {w});
      out = b.mse_loss(b.op("Combine", {{"dim", int64_t{1}}, {"degree", int64_t{2}}}, {b.op("Linear", {}, {xs, ws})}), y);
    } else {
      out = b.mse_loss(b.op("Linear", {}, {x, w}), y);
    }
    b.graph().add_output(out);
    return b.finish();
  };
  const Graph base = build("none");
  const Values v = random_values(base, 3);
  const Values want = gradient_of(base, v);
  for (const std::string form : {"data", "reduce", "model"}) {
    const Graph g = build(form);
    const Values vg = values_by_name(g, base, v);
    const Values got = gradient_of(g, vg);
    for (const Node& n : g.nodes())
      if (n.op->is_weight) {
        SCOPED_TRACE(form);
        NodeId base_id = -1;
        for (const Node& m : base.nodes())
          if (m.name == n.name) base_id = m.id;
        testing::expect_close(got.at(n.id), want.at(base_id), 1e-5, 1e-6);
      }
  }
}

}  // namespace
}  // namespace pcgx
