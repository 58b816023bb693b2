// The ONNX operators pcgx imports, each onto registry operators. Opsets 7
// to 17 of the default domain (attributes as those opsets define them).
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>

#include "onnx_context.h"
#include "pcgx/pcg/error.h"

namespace pcgx::importer {
namespace {

std::string out(const onnx::NodeProto& n) { return n.output(0); }

int64_t normalize_axis(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// A scalar constant operand (a one-element initializer or Constant), or null.
const Constant* scalar(Context& c, const std::string& name) {
  const Constant* k = c.constant(name);
  return k && k->values.size() == 1 && c.is_constant(name) ? k : nullptr;
}

Tensor<float> transposed(const Tensor<float>& w) {  // [r, c] -> [c, r]
  Tensor<float> t({w.shape[1], w.shape[0]});
  // In tiles, so that both sides stay in cache (a classifier's weight is
  // hundreds of MB: element by element, every write of a column missed).
  constexpr int64_t kTile = 64;
  const int64_t rows = w.shape[0], cols = w.shape[1];
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = 0; j0 < cols; j0 += kTile)
      for (int64_t i = i0; i < std::min(i0 + kTile, rows); ++i)
        for (int64_t j = j0; j < std::min(j0 + kTile, cols); ++j)
          t.data[static_cast<size_t>(j * rows + i)] = w.data[static_cast<size_t>(i * cols + j)];
  return t;
}

// A Linear of x by weight value `w` [in, out] (named `w_name`), with the
// bias initializer `bias` when given.
void linear(Context& c, const onnx::NodeProto& n, const std::string& result, TensorRef x, const std::string& w_name, Tensor<float> w,
            const std::string& bias) {
  GraphBuilder& b = c.builder();
  if (b.shape(x).dims.back().size != w.shape[0])
    throw Error(c.where(n) + ": input width " + std::to_string(b.shape(x).dims.back().size) + " against weight rows " + std::to_string(w.shape[0]));
  std::vector<TensorRef> ins{x, c.weight(w_name, std::move(w))};
  if (!bias.empty()) ins.push_back(c.weight(bias, c.constant(bias)->as_tensor()));
  c.bind(result, b.op("Linear", {{"activation", std::string("none")}, {"use_bias", !bias.empty()}}, std::move(ins), result));
}

// The bias Add that follows a product into `product`, when it is the
// product's only reader and adds a 1-D initializer of `width`: its output
// name and the bias's, folded into the Linear.
std::pair<std::string, std::string> bias_add_after(Context& c, const std::string& product, int64_t width) {
  if (c.consumers(product) != 1) return {};
  for (const auto& m : c.graph().node()) {
    if (m.op_type() != "Add" || m.input_size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      if (m.input(side) != product) continue;
      const std::string& other = m.input(1 - side);
      const Constant* k = c.constant(other);
      if (k && c.is_constant(other) && !k->integer && k->shape == std::vector<int64_t>{width}) return {m.output(0), other};
    }
  }
  return {};
}

void gemm(Context& c, const onnx::NodeProto& n) {
  if (attr_int(n, "transA", 0) != 0 || attr_float(n, "alpha", 1) != 1.0 || attr_float(n, "beta", 1) != 1.0)
    throw Error(c.where(n) + ": only transA = 0, alpha = beta = 1 are imported");
  const Constant* w = c.constant(n.input(1));
  if (!w || !c.is_constant(n.input(1)) || w->shape.size() != 2) throw Error(c.where(n) + ": B must be a 2-D initializer (a weight)");
  Tensor<float> wt = w->as_tensor();
  if (attr_int(n, "transB", 0)) wt = transposed(wt);  // PyTorch's nn.Linear: weight [out, in]
  std::string bias;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const Constant* k = c.constant(n.input(2));
    if (!k || k->shape != std::vector<int64_t>{wt.shape[1]}) throw Error(c.where(n) + ": C must be a 1-D initializer of the output width");
    bias = n.input(2);
  }
  linear(c, n, out(n), c.tensor(n.input(0)), c.weight_name(n.input(1)), std::move(wt), bias);
}

void matmul(Context& c, const onnx::NodeProto& n) {
  GraphBuilder& b = c.builder();
  const Constant* w = c.constant(n.input(1));
  if (w && c.is_constant(n.input(1)) && w->shape.size() == 2) {
    const auto [add, bias] = bias_add_after(c, out(n), w->shape[1]);
    if (!add.empty()) {
      c.skip(add);
      linear(c, n, add, c.tensor(n.input(0)), c.weight_name(n.input(1)), w->as_tensor(), bias);
      return;
    }
    linear(c, n, out(n), c.tensor(n.input(0)), c.weight_name(n.input(1)), w->as_tensor(), "");
    return;
  }
  const TensorRef x = c.tensor(n.input(0)), y = c.tensor(n.input(1));
  const bool batched = b.shape(x).rank() > 2;
  c.bind(out(n), batched ? b.batch_matmul(x, y, out(n)) : b.matmul(x, y, out(n)));
}

// Mul of `a` by `b` broadcast to a's shape (numpy's rules: b's dims
// aligned to a's last ones, each equal to a's or 1), out of pcgx's own
// operators, exactly: a's dims where b has its own values (K, in order)
// moved first, the broadcast ones (R) last, a reshaped to [|K|, |R|, 1]
// and b to [|K|, 1, 1], and their batched product is a scaled by b, each
// of b's values over its row of |R| values of a (its gradient summing over
// them, as broadcasting's does); then back to a's shape. Nothing when b
// does not broadcast to a's shape.
// Whether a tensor of shape `from` broadcasts to `to` (numpy's rules:
// aligned to the last dimensions, each equal or 1).
bool broadcasts(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t f = from[i], t = to[to.size() - from.size() + i];
    if (f != t && f != 1) return false;
  }
  return true;
}

std::optional<TensorRef> broadcast_mul(GraphBuilder& b, TensorRef a, TensorRef by, const std::string& name) {
  const std::vector<int64_t> as = b.shape(a).logical_shape(), bs0 = b.shape(by).logical_shape();
  if (!broadcasts(bs0, as)) return std::nullopt;
  std::vector<int64_t> bs(as.size() - bs0.size(), 1);
  bs.insert(bs.end(), bs0.begin(), bs0.end());
  std::vector<int64_t> kept, spread;
  int64_t k = 1, r = 1;
  for (size_t i = 0; i < as.size(); ++i) {
    if (bs[i] == as[i]) kept.push_back(static_cast<int64_t>(i)), k *= as[i];
    else spread.push_back(static_cast<int64_t>(i)), r *= as[i];
  }
  std::vector<int64_t> perm = kept, moved;
  perm.insert(perm.end(), spread.begin(), spread.end());
  for (const int64_t i : perm) moved.push_back(as[static_cast<size_t>(i)]);
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  const TensorRef at = identity ? a : b.transpose(a, perm, name + ".broadcast_order");
  const TensorRef rows = b.reshape(at, {k, r, 1}, name + ".rows");
  const TensorRef scale = b.reshape(by, {k, 1, 1}, name + ".scale");
  const TensorRef product = b.batch_matmul(rows, scale, name + ".scaled");
  if (identity) return b.reshape(product, as, name);
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return b.transpose(b.reshape(product, moved, name + ".moved"), inverse, name);
}

// Ones of `like`'s shape, exactly, out of pcgx's own operators: 0 * like
// clipped to [1, 1] (for finite values; nothing flows back to `like`,
// whose derivative there is 0).
TensorRef ones_like(GraphBuilder& b, TensorRef like, const std::string& name) {
  return b.op("Clip", {{"min", 1.0}, {"max", 1.0}}, {b.scalar_mul(like, 0.0, name + ".zeros")}, name + ".ones");
}

// `by` broadcast to `a`'s shape (numpy's rules), exactly: ones of a's
// shape scaled by it (broadcast_mul), its gradient the sum over the
// broadcast dimensions. Nothing when it does not broadcast to a's shape.
std::optional<TensorRef> broadcast_to(GraphBuilder& b, TensorRef a, TensorRef by, const std::string& name) {
  if (!broadcasts(b.shape(by).logical_shape(), b.shape(a).logical_shape())) return std::nullopt;
  return broadcast_mul(b, ones_like(b, a, name), by, name + ".broadcast");
}

// Add, Sub, Mul, Div: same-shape tensors, or a tensor and a scalar
// constant (Add and Sub as the constant broadcast: ones scaled by it), or
// a tensor and one broadcast to its shape. Div is the product with the
// divisor's Reciprocal (so x / y rounds twice where ONNX rounds once).
void arithmetic(Context& c, const onnx::NodeProto& n) {
  GraphBuilder& b = c.builder();
  const std::string& t = n.op_type();
  const Constant* ka = scalar(c, n.input(0));
  const Constant* kb = scalar(c, n.input(1));
  auto combine = [&](TensorRef x, TensorRef y) {  // same shapes
    if (t == "Add") return c.bind(out(n), b.binary("EwAdd", x, y, out(n)));
    if (t == "Mul") return c.bind(out(n), b.binary("EwMul", x, y, out(n)));
    if (t == "Sub") return c.bind(out(n), b.binary("EwAdd", x, b.scalar_mul(y, -1.0, out(n) + ".neg"), out(n)));
    return c.bind(out(n), b.binary("EwMul", x, b.unary("Reciprocal", y, out(n) + ".reciprocal"), out(n)));  // Div
  };
  if (kb || ka) {
    const double k = (kb ? kb : ka)->values[0];
    const TensorRef x = c.tensor(n.input(kb ? 0 : 1));
    // numpy's result has the higher rank: a [1, 1] constant makes a [D]
    // tensor [1, D], which a scalar's path would not.
    if (static_cast<int64_t>((kb ? kb : ka)->shape.size()) > static_cast<int64_t>(b.shape(x).rank()))
      throw Error(c.where(n) + ": " + t + " with a one-element constant of rank " + std::to_string((kb ? kb : ka)->shape.size()) +
                  ", above the tensor's " + std::to_string(b.shape(x).rank()) + ", is not imported (it would change the result's rank)");
    if (t == "Mul") return c.bind(out(n), b.scalar_mul(x, k, out(n)));
    if (t == "Div" && kb) return c.bind(out(n), b.scalar_mul(x, 1.0 / k, out(n)));
    if (t == "Add" || t == "Sub") {
      const TensorRef constant = b.scalar_mul(ones_like(b, x, out(n)), k, out(n) + ".constant");
      return kb ? combine(x, constant) : combine(constant, x);
    }
    return c.bind(out(n), b.scalar_mul(b.unary("Reciprocal", x, out(n) + ".reciprocal"), k, out(n)));  // k / x
  }
  const TensorRef x = c.tensor(n.input(0)), y = c.tensor(n.input(1));
  if (b.shape(x).logical_shape() != b.shape(y).logical_shape()) {
    if (t == "Mul") {
      auto product = broadcast_mul(b, x, y, out(n));
      if (!product) product = broadcast_mul(b, y, x, out(n));
      if (product) return c.bind(out(n), *product);
    } else if (t == "Div") {  // x times the divisor's reciprocal, either broadcast
      if (broadcasts(b.shape(y).logical_shape(), b.shape(x).logical_shape()))
        return c.bind(out(n), *broadcast_mul(b, x, b.unary("Reciprocal", y, out(n) + ".reciprocal"), out(n)));
      if (const auto wide = broadcast_to(b, y, x, out(n) + ".x")) return combine(*wide, y);
    } else if (t == "Add" || t == "Sub") {
      if (const auto wide = broadcast_to(b, x, y, out(n) + ".y")) return combine(x, *wide);
      if (const auto wide = broadcast_to(b, y, x, out(n) + ".x")) return combine(*wide, y);
    }
    throw Error(c.where(n) + ": broadcasting " + t + " (operands of different shapes) is not imported where neither operand has the result's shape");
  }
  combine(x, y);
}

template <const char* kOp>
void unary(Context& c, const onnx::NodeProto& n) {
  c.bind(out(n), c.builder().unary(kOp, c.tensor(n.input(0)), out(n)));
}
constexpr char kRelu[] = "Relu", kTanh[] = "Tanh", kSigmoid[] = "Sigmoid", kGelu[] = "Gelu", kReciprocal[] = "Reciprocal";

void passthrough(Context& c, const onnx::NodeProto& n) { c.alias(out(n), n.input(0)); }

// Clip (PyTorch's clamp, hardtanh and ReLU6): pcgx's Clip of both bounds;
// a lower bound of 0 alone is Relu, no bound the identity. The bounds are
// constant inputs from opset 11 on, attributes before (whose defaults,
// the largest floats, mean no bound).
void clip(Context& c, const onnx::NodeProto& n) {
  auto bound = [&](int input, const char* attr) -> std::optional<double> {
    if (n.input_size() > input && !n.input(input).empty()) {
      const Constant* k = scalar(c, n.input(input));
      if (!k) throw Error(c.where(n) + ": its " + attr + " must be a constant scalar");
      return k->values[0];
    }
    const double v = attr_float(n, attr, std::nan(""));
    if (std::isnan(v) || std::abs(v) >= 3.4e38) return std::nullopt;
    return v;
  };
  const std::optional<double> lo = bound(1, "min"), hi = bound(2, "max");
  if (lo && hi) return c.bind(out(n), c.builder().op("Clip", {{"min", *lo}, {"max", *hi}}, {c.tensor(n.input(0))}, out(n)));
  if (lo && *lo == 0) return c.bind(out(n), c.builder().unary("Relu", c.tensor(n.input(0)), out(n)));
  if (!lo && !hi) return c.alias(out(n), n.input(0));
  throw Error(c.where(n) + ": a Clip with only " + (lo ? "a lower bound other than 0" : "an upper bound") +
              " is not imported (pcgx's Clip takes both bounds)");
}

// Dropout: in training mode (opset 12's training_mode input true) pcgx's
// Dropout of the ratio (its own draws: the same elements on every
// partitioning, not ONNX's); otherwise the identity, as in inference.
void dropout(Context& c, const onnx::NodeProto& n) {
  auto constant_input = [&](int i, double fallback) {
    if (n.input_size() <= i || n.input(i).empty()) return fallback;
    const Constant* k = c.constant(n.input(i));
    if (!k || k->values.size() != 1) throw Error(c.where(n) + ": the ratio and training mode must be constants");
    return k->values[0];
  };
  const double ratio = constant_input(1, attr_float(n, "ratio", 0.5));
  const bool training = constant_input(2, 0) != 0;
  for (int i = 1; i < n.output_size(); ++i)
    if (!n.output(i).empty() && c.consumers(n.output(i)) > 0) throw Error(c.where(n) + ": its mask output is not imported");
  if (!training || ratio <= 0) return c.alias(out(n), n.input(0));
  c.bind(out(n), c.builder().dropout(c.tensor(n.input(0)), ratio, out(n)));
}

void softmax(Context& c, const onnx::NodeProto& n) {
  const TensorRef x = c.tensor(n.input(0));
  const size_t rank = static_cast<size_t>(c.builder().shape(x).rank());
  const int64_t axis = normalize_axis(attr_int(n, "axis", -1), rank);
  c.bind(out(n), c.builder().op("Softmax", {{"axis", axis}, {"causal", false}}, {x}, out(n)));
}

void layer_norm(Context& c, const onnx::NodeProto& n) {
  const TensorRef x = c.tensor(n.input(0));
  const size_t rank = static_cast<size_t>(c.builder().shape(x).rank());
  if (normalize_axis(attr_int(n, "axis", -1), rank) != static_cast<int64_t>(rank) - 1)
    throw Error(c.where(n) + ": only normalization over the last axis is imported");
  if (n.input_size() < 3 || n.input(2).empty()) throw Error(c.where(n) + ": a LayerNormalization without bias is not imported");
  c.bind(out(n), c.builder().op("LayerNorm", {{"eps", attr_float(n, "epsilon", 1e-5)}, {"affine", true}},
                                {x, c.tensor(n.input(1)), c.tensor(n.input(2))}, out(n)));
}

void reshape_to(Context& c, const onnx::NodeProto& n, TensorRef x, IntList shape) {
  c.bind(out(n), c.builder().reshape(x, std::move(shape), out(n)));
}

void flatten(Context& c, const onnx::NodeProto& n) {
  const TensorRef x = c.tensor(n.input(0));
  const auto s = c.builder().shape(x).logical_shape();
  const auto axis = static_cast<size_t>(normalize_axis(attr_int(n, "axis", 1), s.size()));
  int64_t lead = 1, rest = 1;
  for (size_t d = 0; d < s.size(); ++d) (d < axis ? lead : rest) *= s[d];
  reshape_to(c, n, x, {lead, rest});
}

void reshape(Context& c, const onnx::NodeProto& n) {
  const TensorRef x = c.tensor(n.input(0));
  const Constant* k = c.constant(n.input(1));
  if (!k || !k->integer) throw Error(c.where(n) + ": the shape must be a constant");
  const auto s = c.builder().shape(x).logical_shape();
  IntList shape;
  int64_t known = 1, unknown = -1;
  for (size_t d = 0; d < k->values.size(); ++d) {
    auto v = static_cast<int64_t>(k->values[d]);
    if (v == 0) v = s.at(d);  // ONNX: copy the input's dimension
    if (v == -1) unknown = static_cast<int64_t>(d), v = 1;
    else known *= v;
    shape.push_back(v);
  }
  if (unknown >= 0) shape[static_cast<size_t>(unknown)] = product(s) / known;
  reshape_to(c, n, x, std::move(shape));
}

void transpose(Context& c, const onnx::NodeProto& n) {
  const TensorRef x = c.tensor(n.input(0));
  const auto rank = static_cast<int64_t>(c.builder().shape(x).rank());
  std::vector<int64_t> reverse;
  for (int64_t d = rank - 1; d >= 0; --d) reverse.push_back(d);
  c.bind(out(n), c.builder().transpose(x, attr_ints(n, "perm", reverse), out(n)));
}

void concat(Context& c, const onnx::NodeProto& n) {
  std::vector<TensorRef> xs;
  for (const auto& i : n.input()) xs.push_back(c.tensor(i));
  const auto rank = static_cast<size_t>(c.builder().shape(xs.front()).rank());
  c.bind(out(n), c.builder().concat(std::move(xs), normalize_axis(attr_int(n, "axis", 0), rank), out(n)));
}

void constant(Context& c, const onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) {
    if (a.name() == "value") return c.add_constant(out(n), constant_of(a.t(), c.where(n)));
    if (a.name() == "value_float") return c.add_constant(out(n), Constant{{}, {a.f()}, false});
    if (a.name() == "value_int") return c.add_constant(out(n), Constant{{}, {static_cast<double>(a.i())}, true});
  }
  throw Error(c.where(n) + ": a Constant without a value pcgx reads");
}

// Spatial attributes of Conv and the pools: 2-D, symmetric padding.
struct Window {
  int64_t kh, kw, sh, sw, ph, pw;
};
Window window(Context& c, const onnx::NodeProto& n, std::vector<int64_t> kernel) {
  kernel = attr_ints(n, "kernel_shape", kernel);
  if (kernel.size() != 2) throw Error(c.where(n) + ": only 2-D windows are imported");
  const auto strides = attr_ints(n, "strides", {1, 1});
  const auto pads = attr_ints(n, "pads", {0, 0, 0, 0});
  for (int64_t d : attr_ints(n, "dilations", {1, 1}))
    if (d != 1) throw Error(c.where(n) + ": dilations other than 1 are not imported");
  if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]) throw Error(c.where(n) + ": only symmetric padding is imported");
  const auto* auto_pad = [&]() -> const onnx::AttributeProto* {
    for (const auto& a : n.attribute())
      if (a.name() == "auto_pad") return &a;
    return nullptr;
  }();
  if (auto_pad && auto_pad->s() != "NOTSET" && auto_pad->s() != "VALID") throw Error(c.where(n) + ": auto_pad " + auto_pad->s() + " is not imported");
  if (attr_int(n, "ceil_mode", 0) != 0) throw Error(c.where(n) + ": ceil_mode is not imported");
  return {kernel[0], kernel[1], strides[0], strides[1], pads[0], pads[1]};
}

// The input of a Conv or AveragePool, through a zero Pad it takes over
// (its padding added to `k`'s).
TensorRef padded_input(Context& c, const onnx::NodeProto& n, Window& k) {
  const Context::Padding* p = c.padding(n.input(0));
  if (!p) return c.tensor(n.input(0));
  k.ph += p->h, k.pw += p->w;
  return c.tensor(p->input);
}

void conv(Context& c, const onnx::NodeProto& n) {
  const Constant* w = c.constant(n.input(1));
  if (!w || !c.is_constant(n.input(1)) || w->shape.size() != 4) throw Error(c.where(n) + ": W must be a 4-D initializer");
  Window k = window(c, n, {w->shape[2], w->shape[3]});
  const bool bias = n.input_size() > 2 && !n.input(2).empty();
  const TensorRef x = padded_input(c, n, k);
  std::vector<TensorRef> ins{x, c.weight(n.input(1), w->as_tensor())};
  if (bias) ins.push_back(c.tensor(n.input(2)));
  c.bind(out(n), c.builder().op("Conv2D",
                                {{"stride_h", k.sh}, {"stride_w", k.sw}, {"pad_h", k.ph}, {"pad_w", k.pw},
                                 {"groups", attr_int(n, "group", 1)}, {"use_bias", bias}, {"activation", std::string("none")}},
                                std::move(ins), out(n)));
}

// pcgx's average counts padding as area (count_include_pad = 1); a zero
// Pad before an unpadded AveragePool is the same.
void pool(Context& c, const onnx::NodeProto& n) {
  Window k = window(c, n, {});
  const bool avg = n.op_type() == "AveragePool";
  if (avg && (k.ph || k.pw) && attr_int(n, "count_include_pad", 0) == 0)
    throw Error(c.where(n) + ": a padded AveragePool that leaves the padding out of the average is not imported");
  if (!avg && c.padding(n.input(0))) throw Error(c.where(n) + ": a MaxPool of a zero Pad is not imported");
  const TensorRef x = padded_input(c, n, k);
  c.bind(out(n), c.builder().pool2d(x, avg ? "avg" : "max", k.kh, k.kw, k.sh, k.sw, k.ph, k.pw, out(n)));
}

// A zero Pad of the spatial dimensions of NCHW, symmetric: taken over by
// the Conv or AveragePool that reads it.
void pad(Context& c, const onnx::NodeProto& n) {
  for (const auto& a : n.attribute())
    if (a.name() == "mode" && a.s() != "constant") throw Error(c.where(n) + ": mode " + a.s() + " is not imported");
  std::vector<int64_t> pads = attr_ints(n, "pads");
  if (n.input_size() > 1 && !n.input(1).empty()) {
    const Constant* k = c.constant(n.input(1));
    if (!k) throw Error(c.where(n) + ": the pads must be a constant");
    pads.assign(k->values.begin(), k->values.end());
  }
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const Constant* v = c.constant(n.input(2));
    if (!v || v->values.size() != 1 || v->values[0] != 0) throw Error(c.where(n) + ": only zero padding is imported");
  }
  if (pads.size() != 8 || pads[0] || pads[1] || pads[4] || pads[5] || pads[2] != pads[6] || pads[3] != pads[7])
    throw Error(c.where(n) + ": only symmetric padding of the spatial dimensions of NCHW is imported");
  c.add_padding(out(n), {n.input(0), pads[2], pads[3]});
}

void global_average_pool(Context& c, const onnx::NodeProto& n) {
  const TensorRef x = c.tensor(n.input(0));
  const auto s = c.builder().shape(x).logical_shape();
  if (s.size() != 4) throw Error(c.where(n) + ": only NCHW inputs are imported");
  c.bind(out(n), c.builder().pool2d(x, "avg", s[2], s[3], s[2], s[3], 0, 0, out(n)));
}

void gather(Context& c, const onnx::NodeProto& n) {
  const Constant* table = c.constant(n.input(0));
  if (!table || !c.is_constant(n.input(0)) || table->shape.size() != 2 || attr_int(n, "axis", 0) != 0)
    throw Error(c.where(n) + ": only Gather of rows of a 2-D initializer (an embedding) is imported");
  const TensorRef idx = c.tensor(n.input(1), table->shape[0]);
  c.bind(out(n), c.builder().op("Embedding", {}, {idx, c.weight(n.input(0), table->as_tensor())}, out(n)));
}

// Whether a BatchNormalization computes batch statistics: opset 14's
// training_mode, or (before) the running statistics it outputs, as
// PyTorch's training-mode exports write it.
bool batch_norm_trains(const onnx::NodeProto& n) {
  if (attr_int(n, "training_mode", 0) != 0) return true;
  for (int i = 1; i < n.output_size(); ++i)
    if (!n.output(i).empty()) return true;
  return false;
}

// BatchNormalization in training mode as pcgx trains it: statistics of the
// batch (the running mean and variance inputs are not read). In inference
// mode, of constant scale, bias, mean and variance: the per-channel affine
// map they make, y = x a + b with a = scale / sqrt(var + eps) and
// b = bias - mean a, as a 1x1 depthwise Conv2D with a bias (x reshaped to
// [N, C, rest, 1] around it where it is not 4-D). Its a and b are then
// weights named NODE.scale and NODE.shift: `pcgx eval` computes the
// model exactly, and training would update them as weights.
void batch_norm(Context& c, const onnx::NodeProto& n) {
  const double eps = attr_float(n, "epsilon", 1e-5);
  if (batch_norm_trains(n)) {
    c.bind(out(n), c.builder().op("BatchNorm", {{"eps", eps}}, {c.tensor(n.input(0)), c.tensor(n.input(1)), c.tensor(n.input(2))}, out(n)));
    return;
  }
  const TensorRef x = c.tensor(n.input(0));
  const std::vector<int64_t> s = c.builder().shape(x).logical_shape();
  if (s.size() < 2) throw Error(c.where(n) + ": the input has no channel dimension");
  const int64_t C = s[1];
  std::array<const Constant*, 4> k{};  // scale, bias, mean, variance
  for (int i = 0; i < 4; ++i) {
    k[static_cast<size_t>(i)] = n.input_size() > i + 1 && c.is_constant(n.input(i + 1)) ? c.constant(n.input(i + 1)) : nullptr;
    if (!k[static_cast<size_t>(i)] || k[static_cast<size_t>(i)]->values.size() != static_cast<size_t>(C))
      throw Error(c.where(n) + ": in inference mode its scale, bias, mean and variance must be constants of one value per channel (" +
                  std::to_string(C) + ")");
  }
  Tensor<float> a({C, 1, 1, 1}), b({C});
  for (size_t j = 0; j < static_cast<size_t>(C); ++j) {
    const double scale = k[0]->values[j] / std::sqrt(k[3]->values[j] + eps);
    a.data[j] = static_cast<float>(scale);
    b.data[j] = static_cast<float>(k[1]->values[j] - k[2]->values[j] * scale);
  }
  int64_t rest = 1;
  for (size_t d = 2; d < s.size(); ++d) rest *= s[d];
  const bool four = s.size() == 4;
  const TensorRef in = four ? x : c.builder().reshape(x, {s[0], C, rest, 1}, out(n) + ".as_nchw");
  const TensorRef y = c.builder().op("Conv2D",
                                     {{"stride_h", int64_t{1}}, {"stride_w", int64_t{1}}, {"pad_h", int64_t{0}}, {"pad_w", int64_t{0}},
                                      {"groups", C}, {"use_bias", true}, {"activation", std::string("none")}},
                                     {in, c.weight(out(n) + ".scale", a), c.weight(out(n) + ".shift", b)}, four ? out(n) : out(n) + ".affine");
  c.bind(out(n), four ? y : c.builder().reshape(y, IntList(s.begin(), s.end()), out(n)));
}

// Split into the sizes given (opset 13: an input; before: an attribute) or
// equal parts.
void split(Context& c, const onnx::NodeProto& n) {
  const TensorRef x = c.tensor(n.input(0));
  const auto s = c.builder().shape(x).logical_shape();
  const int64_t axis = normalize_axis(attr_int(n, "axis", 0), s.size());
  std::vector<int64_t> sizes = attr_ints(n, "split");
  if (n.input_size() > 1 && !n.input(1).empty()) {
    const Constant* k = c.constant(n.input(1));
    if (!k) throw Error(c.where(n) + ": the split sizes must be a constant");
    sizes.assign(k->values.begin(), k->values.end());
  }
  const auto parts = static_cast<int64_t>(n.output_size());
  if (sizes.empty()) {
    if (s[static_cast<size_t>(axis)] % parts != 0) throw Error(c.where(n) + ": " + std::to_string(parts) + " equal parts do not divide the axis");
    sizes.assign(static_cast<size_t>(parts), s[static_cast<size_t>(axis)] / parts);
  }
  const TensorRef first = c.builder().op("Split", {{"axis", axis}, {"sizes", sizes}}, {x}, out(n));
  for (int i = 0; i < n.output_size(); ++i) c.bind(n.output(i), {first.node, static_cast<int32_t>(i)});
}

// Slice of a tensor along one axis, step 1 (a packed projection's
// pieces): the middle piece of a Split.
void slice(Context& c, const onnx::NodeProto& n) {
  const TensorRef x = c.tensor(n.input(0));
  const auto s = c.builder().shape(x).logical_shape();
  auto one = [&](int i, int64_t fallback) -> int64_t {
    if (n.input_size() <= i || n.input(i).empty()) return fallback;
    const Constant* k = c.constant(n.input(i));
    if (!k || k->values.size() != 1) throw Error(c.where(n) + ": only a slice along one axis with constant bounds is imported");
    return static_cast<int64_t>(k->values[0]);
  };
  const int64_t axis = normalize_axis(one(3, 0), s.size());
  if (one(4, 1) != 1) throw Error(c.where(n) + ": only slices of step 1 are imported");
  const int64_t len = s.at(static_cast<size_t>(axis));
  auto bound = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + len : v, 0, len); };
  const int64_t start = bound(one(1, 0)), end = bound(one(2, len));
  if (end <= start) throw Error(c.where(n) + ": an empty slice");
  if (start == 0 && end == len) return c.alias(out(n), n.input(0));
  std::vector<int64_t> sizes;
  if (start > 0) sizes.push_back(start);
  sizes.push_back(end - start);
  if (end < len) sizes.push_back(len - end);
  const TensorRef pieces = c.builder().op("Split", {{"axis", axis}, {"sizes", sizes}}, {x}, out(n) + ".split");
  c.bind(out(n), {pieces.node, start > 0 ? 1 : 0});
}

// Shape arithmetic left after folding (onnx_fold.cpp): its inputs are
// tensor values, which pcgx does not compute at import.
void shape_only(Context& c, const onnx::NodeProto& n) {
  throw Error(c.where(n) + ": computes from tensor values; pcgx imports " + n.op_type() + " only where it folds into a constant shape");
}

}  // namespace

Handler handler_of(const std::string& op_type) {
  static const std::map<std::string, Handler> handlers = {
      {"Gemm", gemm},         {"MatMul", matmul},   {"Add", arithmetic},     {"Sub", arithmetic},
      {"Mul", arithmetic},    {"Div", arithmetic},  {"Relu", unary<kRelu>},  {"Tanh", unary<kTanh>}, {"Clip", clip},
      {"Sigmoid", unary<kSigmoid>}, {"Gelu", unary<kGelu>}, {"Reciprocal", unary<kReciprocal>}, {"Softmax", softmax}, {"LayerNormalization", layer_norm},
      {"Identity", passthrough}, {"Dropout", dropout}, {"Flatten", flatten}, {"Reshape", reshape},
      {"Transpose", transpose}, {"Concat", concat}, {"Constant", constant}, {"Conv", conv},
      {"MaxPool", pool},      {"AveragePool", pool}, {"GlobalAveragePool", global_average_pool}, {"Gather", gather},
      {"BatchNormalization", batch_norm}, {"Split", split}, {"Pad", pad},
      {"Shape", shape_only}, {"Unsqueeze", shape_only}, {"Squeeze", shape_only}, {"Slice", slice}, {"Cast", shape_only},
      {"Equal", shape_only}, {"Where", shape_only}, {"ConstantOfShape", shape_only}};
  const auto it = handlers.find(op_type);
  return it == handlers.end() ? nullptr : it->second;
}

}  // namespace pcgx::importer
