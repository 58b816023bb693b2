// ONNX operators imported on models written here with ONNX's own protobuf
// classes, so that they run where PyTorch cannot export
// (tests/python/onnx_models.py covers what PyTorch exports where it can):
// Clip (pcgx's Clip, or Relu, or the identity), BatchNormalization in
// inference mode (its per-channel affine map) and in training mode, and
// Mul, Add and Sub of a tensor and one broadcast to its shape.
#include <gtest/gtest.h>

#ifdef PCGX_HAVE_ONNX_PROTO  // built with libonnx-dev and libprotobuf-dev
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <onnx/onnx_pb.h>

#include "pcgx/importer/onnx_import.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"
#include "temp_dir.h"

namespace pcgx::importer {
namespace {

namespace fs = std::filesystem;

void add_value(onnx::ValueInfoProto* v, const std::string& name, const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (const int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

void add_constant(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, const std::vector<float>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (const int64_t d : dims) t->add_dims(d);
  for (const float v : values) t->add_float_data(v);
}

// A model of the default domain at `opset`, its graph named `name`.
onnx::ModelProto new_model(const std::string& name, int64_t ir_version, int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(ir_version);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name(name);
  return m;
}

// `m` written to <temp dir `dir`>/<name>.onnx.
fs::path save_model(const onnx::ModelProto& m, const std::string& dir, const std::string& name) {
  const fs::path path = pcgx::testing::temp_dir(dir) / (name + ".onnx");
  std::ofstream f(path, std::ios::binary);
  m.SerializeToOstream(&f);
  return path;
}

// x [4, 6] -> MatMul by W [6, 5] -> Clip -> y: bounds as inputs (opset
// 13), or as attributes (opset 6); `lo`/`hi` absent: not given.
fs::path write_model(const std::string& name, std::optional<float> lo, std::optional<float> hi, bool as_attributes) {
  onnx::ModelProto m = new_model(name, as_attributes ? 3 : 8, as_attributes ? 6 : 13);
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", {4, 6});
  add_value(g->add_output(), "y", {4, 5});
  std::vector<float> w(30);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(static_cast<int>(i % 7) - 3);
  add_constant(g, "W", {6, 5}, w);
  auto* mm = g->add_node();
  mm->set_op_type("MatMul"), mm->add_input("x"), mm->add_input("W"), mm->add_output("h");
  auto* clip = g->add_node();
  clip->set_op_type("Clip"), clip->add_input("h"), clip->add_output("y");
  auto bound = [&](const char* attr, std::optional<float> v, const char* input) {
    if (as_attributes) {
      if (!v) return;
      auto* a = clip->add_attribute();
      a->set_name(attr), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(*v);
    } else {
      clip->add_input(v ? input : "");
      if (v) add_constant(g, input, {}, {*v});
    }
  };
  bound("min", lo, "lo");
  bound("max", hi, "hi");
  return save_model(m, "pcgx_clip_import", name);
}

std::vector<std::string> compute_ops(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kCompute && n.op->loss == LossKind::kNone) ops.push_back(n.op->name);
  return ops;
}

TEST(ClipImport, BothBoundsAreClipAsInputsOrAttributes) {
  if (!onnx_available()) GTEST_SKIP() << "built without libonnx-dev";
  for (const bool attributes : {false, true}) {
    SCOPED_TRACE(attributes ? "opset 6" : "opset 13");
    ImportOptions o;
    o.loss = LossHead::kNone;
    const ImportedModel m = import_onnx(write_model(attributes ? "relu6_attr" : "relu6", 0.f, 6.f, attributes).string(), o);
    EXPECT_EQ(compute_ops(m.graph), (std::vector<std::string>{"Linear", "Clip"}));
    for (const Node& n : m.graph.nodes())
      if (n.op->name == "Clip") {
        EXPECT_EQ(n.attrs.get_float("min"), 0.0);
        EXPECT_EQ(n.attrs.get_float("max"), 6.0);
      }
    // Its values: x W clamped to [0, 6].
    const SourceFn<float> src = [&](const Node& n) {
      Tensor<float> t(n.outputs[0].logical_shape());
      if (n.op->is_weight) return m.weights.at(n.name);
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(static_cast<int>(i % 11) - 5) * 1.5f;
      return t;
    };
    const auto y = evaluate_outputs<float>(m.graph, src).at(0);
    const auto xn = std::find_if(m.graph.nodes().begin(), m.graph.nodes().end(), [](const Node& n) { return n.name == "x"; });
    ASSERT_NE(xn, m.graph.nodes().end());
    const Tensor<float> x = src(*xn);
    const Tensor<float>& w = m.weights.begin()->second;
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 5; ++c) {
        float h = 0;
        for (int64_t k = 0; k < 6; ++k) h += x.data[static_cast<size_t>(r * 6 + k)] * w.data[static_cast<size_t>(k * 5 + c)];
        EXPECT_NEAR(y.data[static_cast<size_t>(r * 5 + c)], std::clamp(h, 0.f, 6.f), 1e-5) << r << ", " << c;
      }
  }
}

TEST(ClipImport, OneBoundOrNone) {
  if (!onnx_available()) GTEST_SKIP() << "built without libonnx-dev";
  ImportOptions o;
  o.loss = LossHead::kNone;
  EXPECT_EQ(compute_ops(import_onnx(write_model("relu", 0.f, std::nullopt, false).string(), o).graph),
            (std::vector<std::string>{"Linear", "Relu"}));
  EXPECT_EQ(compute_ops(import_onnx(write_model("none", std::nullopt, std::nullopt, true).string(), o).graph),
            (std::vector<std::string>{"Linear"}));
  for (const auto& [lo, hi] : std::vector<std::pair<std::optional<float>, std::optional<float>>>{{std::nullopt, 6.f}, {1.f, std::nullopt}}) {
    const fs::path p = write_model("one_bound", lo, hi, false);
    try {
      import_onnx(p.string(), o);
      ADD_FAILURE() << "imported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not imported (pcgx's Clip takes both bounds)"), std::string::npos) << e.what();
    }
  }
}

// x [2, 3, ...] -> BatchNormalization of constant statistics -> y, in
// inference mode (opset 13, one output) or training mode (opset 15,
// training_mode 1); `stats_as_inputs`: the statistics as graph inputs.
fs::path write_batch_norm(const std::string& name, std::vector<int64_t> x_dims, bool training, bool stats_as_inputs = false) {
  onnx::ModelProto m = new_model(name, 8, training ? 15 : 13);
  auto* g = m.mutable_graph();
  auto* x = g->add_input();
  x->set_name("x");
  auto* xt = x->mutable_type()->mutable_tensor_type();
  xt->set_elem_type(onnx::TensorProto::FLOAT);
  for (const int64_t d : x_dims) xt->mutable_shape()->add_dim()->set_dim_value(d);
  auto* y = g->add_output();
  y->CopyFrom(*x);
  y->set_name("y");
  const std::vector<std::pair<std::string, std::vector<float>>> stats = {
      {"scale", {1.5f, -0.5f, 2.f}}, {"bias", {0.25f, 1.f, -1.f}}, {"mean", {0.5f, -1.f, 0.f}}, {"var", {4.f, 0.25f, 1.f}}};
  auto* bn = g->add_node();
  bn->set_op_type("BatchNormalization"), bn->add_input("x"), bn->add_output("y");
  for (const auto& [s, v] : stats) {
    bn->add_input(s);
    if (stats_as_inputs) add_value(g->add_input(), s, {3});
    else add_constant(g, s, {3}, v);
  }
  auto* eps = bn->add_attribute();
  eps->set_name("epsilon"), eps->set_type(onnx::AttributeProto::FLOAT), eps->set_f(0.01f);
  if (training) {
    auto* t = bn->add_attribute();
    t->set_name("training_mode"), t->set_type(onnx::AttributeProto::INT), t->set_i(1);
  }
  return save_model(m, "pcgx_bn_import", name);
}

// Inference mode: (x - mean) / sqrt(var + eps) * scale + bias per channel,
// at ranks 4 and 3, through the imported weights.
TEST(BatchNormImport, InferenceModeIsItsPerChannelAffineMap) {
  if (!onnx_available()) GTEST_SKIP() << "built without libonnx-dev";
  ImportOptions o;
  o.loss = LossHead::kNone;
  const float scale[] = {1.5f, -0.5f, 2.f}, bias[] = {0.25f, 1.f, -1.f}, mean[] = {0.5f, -1.f, 0.f}, var[] = {4.f, 0.25f, 1.f};
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{2, 3, 2, 2}, std::vector<int64_t>{2, 3, 5}}) {
    SCOPED_TRACE(dims.size());
    const ImportedModel m = import_onnx(write_batch_norm("bn_eval", dims, false).string(), o);
    const auto ops = compute_ops(m.graph);
    EXPECT_NE(std::find(ops.begin(), ops.end(), "Conv2D"), ops.end());
    EXPECT_EQ(std::find(ops.begin(), ops.end(), "BatchNorm"), ops.end());
    const SourceFn<float> src = [&](const Node& n) {
      if (n.op->is_weight) return m.weights.at(n.name);
      Tensor<float> t(n.outputs[0].logical_shape());
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(static_cast<int>(i % 9) - 4) * 0.75f;
      return t;
    };
    const auto xn = std::find_if(m.graph.nodes().begin(), m.graph.nodes().end(), [](const Node& n) { return n.name == "x"; });
    ASSERT_NE(xn, m.graph.nodes().end());
    const Tensor<float> x = src(*xn);
    const Tensor<float> y = evaluate_outputs<float>(m.graph, src).at(0);
    ASSERT_EQ(y.shape, dims);
    const int64_t per = static_cast<int64_t>(x.data.size()) / (dims[0] * 3);
    for (size_t i = 0; i < x.data.size(); ++i) {
      const auto ch = static_cast<size_t>((static_cast<int64_t>(i) / per) % 3);
      const float want = (x.data[i] - mean[ch]) / std::sqrt(var[ch] + 0.01f) * scale[ch] + bias[ch];
      EXPECT_NEAR(y.data[i], want, 1e-5) << i;
    }
  }
}

TEST(BatchNormImport, TrainingModeComputesBatchStatistics) {
  if (!onnx_available()) GTEST_SKIP() << "built without libonnx-dev";
  ImportOptions o;
  o.loss = LossHead::kNone;
  const auto ops = compute_ops(import_onnx(write_batch_norm("bn_train", {2, 3, 2, 2}, true).string(), o).graph);
  EXPECT_EQ(ops, (std::vector<std::string>{"BatchNorm"}));
  // Inference mode of statistics pcgx does not know at import: refused, naming why.
  try {
    import_onnx(write_batch_norm("bn_inputs", {2, 3, 2, 2}, false, true).string(), o);
    ADD_FAILURE() << "imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in inference mode its scale, bias, mean and variance must be constants"), std::string::npos)
        << e.what();
  }
}

// y = OP(x, s) of two graph inputs, s broadcast to x's shape (or to
// s's: `swap` puts the broadcast operand first).
fs::path write_binary_model(const std::string& op, const std::string& name, std::vector<int64_t> xd, std::vector<int64_t> sd,
                            std::vector<int64_t> yd, bool swap) {
  onnx::ModelProto m = new_model(name, 8, 13);
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", xd);
  add_value(g->add_input(), "s", sd);
  add_value(g->add_output(), "y", yd);
  auto* node = g->add_node();
  node->set_op_type(op), node->add_input(swap ? "s" : "x"), node->add_input(swap ? "x" : "s"), node->add_output("y");
  return save_model(m, "pcgx_binary_import", name);
}
fs::path write_mul_model(const std::string& name, std::vector<int64_t> xd, std::vector<int64_t> sd, std::vector<int64_t> yd, bool swap) {
  return write_binary_model("Mul", name, std::move(xd), std::move(sd), std::move(yd), swap);
}

// y = op(x, 2.5), or op(2.5, x) with `constant_first`; x and y [2, 3].
fs::path write_constant_model(const std::string& op, bool constant_first) {
  const std::string name = op + (constant_first ? "_constant_first" : "_constant");
  onnx::ModelProto m = new_model(name, 8, 13);
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", {2, 3});
  add_value(g->add_output(), "y", {2, 3});
  add_constant(g, "k", {}, {2.5f});
  auto* node = g->add_node();
  node->set_op_type(op), node->add_input(constant_first ? "k" : "x"), node->add_input(constant_first ? "x" : "k"), node->add_output("y");
  return save_model(m, "pcgx_binary_import", name);
}

// The binary models' inputs: element j of x is 0.5 (j % 13 - 6), of s
// -0.25 (j % 13 - 6).
float input_value(const std::string& name, size_t j) { return (name == "x" ? 0.5f : -0.25f) * static_cast<float>(static_cast<int>(j % 13) - 6); }
SourceFn<float> binary_inputs() {
  return [](const Node& n) {
    Tensor<float> t(n.outputs[0].logical_shape());
    for (size_t j = 0; j < t.data.size(); ++j) t.data[j] = input_value(n.name, j);
    return t;
  };
}
using ElementOfS = std::function<size_t(int64_t, int64_t, int64_t, int64_t)>;  // s's element for x[n, c, h, w]
// y [2, 3, 4, 5] is f(x[n, c, h, w], s[at(n, c, h, w)]) in every element, bit for bit.
void expect_elementwise(const Tensor<float>& y, const ElementOfS& at, const std::function<float(float, float)>& f) {
  ASSERT_EQ(y.shape, (std::vector<int64_t>{2, 3, 4, 5}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t w = 0; w < 5; ++w) {
          const size_t j = static_cast<size_t>(((n * 3 + c) * 4 + h) * 5 + w);
          ASSERT_EQ(y.data[j], f(input_value("x", j), input_value("s", at(n, c, h, w)))) << n << c << h << w;
        }
}

// A squeeze-and-excitation gate (x [N, C, H, W] times s [N, C, 1, 1]) and
// a per-column scale (s [W]): numpy's broadcasting, computed exactly by
// pcgx's own operators, whichever operand comes first.
TEST(MulImport, ATensorBroadcastToTheOthersShape) {
  if (!onnx_available()) GTEST_SKIP() << "built without libonnx-dev";
  struct Case {
    std::vector<int64_t> s;
    ElementOfS at;
  };
  const std::vector<Case> cases = {
      {{2, 3, 1, 1}, [](int64_t n, int64_t c, int64_t, int64_t) { return static_cast<size_t>(n * 3 + c); }},
      {{5}, [](int64_t, int64_t, int64_t, int64_t w) { return static_cast<size_t>(w); }},
      {{3, 4, 1}, [](int64_t, int64_t c, int64_t h, int64_t) { return static_cast<size_t>(c * 4 + h); }},
  };
  for (size_t i = 0; i < cases.size(); ++i)
    for (const bool swap : {false, true}) {
      SCOPED_TRACE("case " + std::to_string(i) + (swap ? ", broadcast operand first" : ""));
      ImportOptions o;
      o.loss = LossHead::kNone;
      const ImportedModel m = import_onnx(write_mul_model("mul" + std::to_string(i) + (swap ? "s" : ""), {2, 3, 4, 5}, cases[i].s, {2, 3, 4, 5}, swap).string(), o);
      expect_elementwise(evaluate_outputs<float>(m.graph, binary_inputs()).at(0), cases[i].at, [](float x, float s) { return x * s; });
    }
  // Both operands broadcast ([4, 1] by [1, 5]): refused, naming why.
  try {
    ImportOptions o;
    o.loss = LossHead::kNone;
    import_onnx(write_mul_model("outer", {4, 1}, {1, 5}, {4, 5}, false).string(), o);
    ADD_FAILURE() << "imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither operand has the result's shape"), std::string::npos) << e.what();
  }
}

// Add and Sub of a tensor and one broadcast to its shape (a per-channel
// bias [C, 1, 1], a per-column offset [W]), in either order, exactly: the
// broadcast operand is ones scaled by it; and of a tensor and a scalar
// constant, either first.
TEST(AddImport, ATensorBroadcastToTheOthersShape) {
  if (!onnx_available()) GTEST_SKIP() << "built without libonnx-dev";
  const SourceFn<float> src = binary_inputs();
  ImportOptions o;
  o.loss = LossHead::kNone;
  for (const std::string op : {"Add", "Sub"})
    for (const bool swap : {false, true}) {
      SCOPED_TRACE(op + (swap ? ", broadcast operand first" : ""));
      for (const auto& [sd, at] : std::vector<std::pair<std::vector<int64_t>, ElementOfS>>{
               {{3, 1, 1}, [](int64_t, int64_t c, int64_t, int64_t) { return static_cast<size_t>(c); }},
               {{5}, [](int64_t, int64_t, int64_t, int64_t w) { return static_cast<size_t>(w); }}}) {
        const ImportedModel m =
            import_onnx(write_binary_model(op, op + std::to_string(sd.size()) + (swap ? "s" : ""), {2, 3, 4, 5}, sd, {2, 3, 4, 5}, swap).string(), o);
        const bool add = op == "Add", first_s = swap;
        expect_elementwise(evaluate_outputs<float>(m.graph, src).at(0), at, [add, first_s](float x, float s) {
          const float first = first_s ? s : x, second = first_s ? x : s;
          return add ? first + second : first - second;
        });
      }
    }
  // A scalar constant: x + 2.5 and 2.5 - x.
  for (const std::string op : {"Add", "Sub"}) {
    const ImportedModel im = import_onnx(write_constant_model(op, op != "Add").string(), o);
    const auto y = evaluate_outputs<float>(im.graph, src).at(0);
    for (size_t j = 0; j < 6; ++j) ASSERT_EQ(y.data[j], op == "Add" ? input_value("x", j) + 2.5f : 2.5f - input_value("x", j)) << op << j;
  }
  {  // a one-element constant of a higher rank would change the result's rank: refused
    onnx::ModelProto m = new_model("rank_constant", 8, 13);
    auto* g = m.mutable_graph();
    add_value(g->add_input(), "x", {3});
    add_value(g->add_output(), "y", {1, 3});
    add_constant(g, "k", {1, 1}, {2.5f});
    auto* node = g->add_node();
    node->set_op_type("Add"), node->add_input("x"), node->add_input("k"), node->add_output("y");
    try {
      import_onnx(save_model(m, "pcgx_binary_import", "rank_constant").string(), o);
      ADD_FAILURE() << "imported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("one-element constant of rank 2, above the tensor's 1"), std::string::npos) << e.what();
    }
  }
}

// Div as the product with the divisor's Reciprocal: of one shape, of a
// tensor and one broadcast to its shape in either order, and of a scalar
// constant by a tensor; to rounding (ONNX rounds the quotient once, pcgx
// the reciprocal and the product).
TEST(DivImport, TheProductWithTheDivisorsReciprocal) {
  if (!onnx_available()) GTEST_SKIP() << "built without libonnx-dev";
  const SourceFn<float> src = binary_inputs();
  ImportOptions o;
  o.loss = LossHead::kNone;
  auto near = [](float got, float want) { return got == want || std::fabs(got - want) <= 1e-6f * std::fabs(want); };  // x / 0 = inf too
  {
    const ImportedModel m = import_onnx(write_binary_model("Div", "div_same", {2, 3}, {2, 3}, {2, 3}, false).string(), o);
    const auto y = evaluate_outputs<float>(m.graph, src).at(0);
    for (size_t j = 0; j < 6; ++j) {
      const float want = input_value("x", j) / input_value("s", j);
      EXPECT_TRUE(near(y.data[j], want)) << j << ": " << y.data[j] << " vs " << want;
    }
  }
  for (const bool swap : {false, true}) {
    SCOPED_TRACE(swap ? "broadcast dividend" : "broadcast divisor");
    const ImportedModel m = import_onnx(write_binary_model("Div", std::string("div_b") + (swap ? "s" : ""), {2, 3, 4, 5}, {3, 1, 1},
                                                           {2, 3, 4, 5}, swap).string(),
                                        o);
    const auto y = evaluate_outputs<float>(m.graph, src).at(0);
    for (size_t j = 0; j < y.data.size(); ++j) {
      const float x = input_value("x", j), s = input_value("s", (j / 20) % 3);
      const float want = swap ? s / x : x / s;
      EXPECT_TRUE(near(y.data[j], want)) << j << ": " << y.data[j] << " vs " << want;
    }
  }
  {  // 2.5 / x
    const ImportedModel im = import_onnx(write_constant_model("Div", true).string(), o);
    const auto y = evaluate_outputs<float>(im.graph, src).at(0);
    for (size_t j = 0; j < 6; ++j) EXPECT_TRUE(near(y.data[j], 2.5f / input_value("x", j))) << j;
  }
}

}  // namespace
}  // namespace pcgx::importer
#endif
