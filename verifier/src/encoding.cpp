#include "encoding.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::verify {
namespace {

const AttrSpec& spec_of(const Encoding& e, const std::string& name) {
  const OpDef& op = OpRegistry::global().get(e.op);
  for (const AttrSpec& s : op.attrs)
    if (s.name == name) return s;
  throw Error(std::string(e.op) + " has no attribute " + name);
}

// d == num / den exactly, with den a power of two (every finite double is).
std::pair<int64_t, int64_t> exact_fraction(double d) {
  int64_t den = 1;
  while (d != std::floor(d) && den < (int64_t{1} << 40)) d *= 2, den *= 2;
  if (d != std::floor(d) || std::fabs(d) > 9e15) throw Error("scalar has no exact small fraction");
  auto num = static_cast<int64_t>(d);
  while (num % 2 == 0 && den > 1) num /= 2, den /= 2;
  return {num, den};
}

}  // namespace

const std::vector<Encoding>& encodings() {
  static const std::vector<Encoding> table = {
      {"Repartition", "repartition", 1, {"dim", "degree"}},
      {"Combine", "combine", 1, {"dim", "degree"}},
      {"Replicate", "replicate", 1, {"degree"}},
      {"Reduce", "reduce", 1, {"degree"}},
      {"AllReduce", "all_reduce", 1, {"degree"}},
      {"Relu", "relu", 1, {}},
      {"Gelu", "gelu", 1, {}},
      {"Sigmoid", "sigmoid", 1, {}},
      {"Tanh", "tanh", 1, {}},
      {"Dropout", "dropout", 1, {"rate", "seed"}},
      {"EwAdd", "ew_add", 2, {}},
      {"EwMul", "ew_mul", 2, {}},
      {"ScalarMul", "scalar_mul", 1, {"scalar"}},
      {"Linear", "linear", 2, {"activation"}, 0, {{"use_bias", false}}},
      {"MatMul", "matmul", 2, {}},
      {"BatchMatMul", "batch_matmul", 2, {}},
      {"Concat", "concat", 2, {"axis"}},
      {"Split", "split0", 1, {"axis"}, 0},
      {"Split", "split1", 1, {"axis"}, 1},
      {"Softmax", "softmax", 1, {"axis"}, 0, {{"causal", false}}},
      {"Transpose", "transpose", 1, {"perm"}},
      {"Reshape", "reshape", 1, {"shape"}},
      {"LayerNorm", "layer_norm", 1, {"eps"}, 0, {{"affine", false}}},
      {"LayerNorm", "layer_norm_affine", 3, {"eps"}, 0, {{"affine", true}}},
      {"BatchNorm", "batch_norm", 3, {"eps", "group"}},
      {"BatchSum", "batch_sum", 1, {}},
      {"BatchSquares", "batch_squares", 2, {}},
      {"BatchNormApply", "batch_norm_apply", 5, {"eps"}},
      {"Embedding", "embedding", 2, {}},
      {"EmbeddingBag", "embedding_bag", 2, {}},
      {"Conv2D", "conv2d", 2, {"stride_h", "stride_w", "pad_h", "pad_w", "groups", "activation"}, 0, {{"use_bias", false}}},
      {"Pool2D", "pool2d", 1, {"kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w", "mode"}},
      {"SoftmaxCrossEntropy", "softmax_cross_entropy", 2, {}},
      {"MSELoss", "mse_loss", 2, {}},
  };
  return table;
}

const Encoding* encoding_by_symbol(const std::string& symbol) {
  for (const auto& e : encodings())
    if (symbol == e.symbol) return &e;
  return nullptr;
}

const Encoding* encoding_for(const std::string& op, const Attributes& attrs, int output, int inputs) {
  for (const auto& e : encodings()) {
    if (op != e.op || e.output != output || e.tensors != inputs) continue;
    const bool fits = std::all_of(e.fixed.begin(), e.fixed.end(), [&](const auto& f) {
      return attrs.has(f.first) && attrs.get_bool(f.first) == f.second;
    });
    if (fits) return &e;
  }
  return nullptr;
}

int int_args(const Encoding& e) {
  int n = 0;
  for (const char* a : e.attrs) n += std::string(a) == "scalar" ? 2 : 1;
  return n;
}

std::vector<int64_t> encode_attrs(const Encoding& e, const Attributes& attrs, int64_t rank0) {
  std::vector<int64_t> out;
  for (const char* name : e.attrs) {
    const std::string a = name;
    const AttrSpec& spec = spec_of(e, a);
    if (a == "scalar") {
      const auto [num, den] = exact_fraction(attrs.get_float(a));
      out.push_back(num);
      out.push_back(den);
    } else if (a == "perm") {
      const IntList& p = attrs.get_ints(a);
      if (p.size() > 9) throw Error("Transpose of more than 9 dimensions has no SMT encoding");
      out.push_back(perm_code(p));
    } else if (a == "shape") {
      const auto code = shape_code(attrs.get_ints(a));
      if (!code) throw Error("Reshape to more than 4 dimensions or a size of 10000 or more has no SMT encoding");
      out.push_back(*code);
    } else if (spec.type == AttrType::kString) {
      const auto pos = std::find(spec.choices.begin(), spec.choices.end(), attrs.get_string(a));
      if (pos == spec.choices.end()) throw Error(a + " " + attrs.get_string(a) + " has no SMT encoding");
      out.push_back(pos - spec.choices.begin());
    } else if (spec.type == AttrType::kFloat) {
      out.push_back(std::bit_cast<int64_t>(attrs.get_float(a)));
    } else if (spec.type == AttrType::kBool) {
      out.push_back(attrs.get_bool(a) ? 1 : 0);
    } else if (spec.type == AttrType::kInt) {
      int64_t v = attrs.get_int(a);
      if (std::string(e.op) == "Softmax" && v < 0) v += rank0;
      out.push_back(v);
    } else {
      throw Error(std::string(e.op) + "." + a + " has no SMT encoding");
    }
  }
  return out;
}

std::optional<Attributes> decode_attrs(const Encoding& e, const std::vector<int64_t>& ints) {
  if (static_cast<int>(ints.size()) != int_args(e)) return std::nullopt;
  Attributes out;
  for (const auto& [name, value] : e.fixed) out.set(name, value);
  size_t i = 0;
  for (const char* name : e.attrs) {
    const std::string a = name;
    const AttrSpec& spec = spec_of(e, a);
    const int64_t x = ints[i++];
    if (a == "scalar") {
      const int64_t den = ints[i++];
      if (den <= 0) return std::nullopt;
      out.set(a, static_cast<double>(x) / static_cast<double>(den));
    } else if (a == "perm") {
      const auto p = perm_of(x);
      if (!p) return std::nullopt;
      out.set(a, *p);
    } else if (a == "shape") {
      const auto s = shape_of(x);
      if (!s) return std::nullopt;
      out.set(a, *s);
    } else if (spec.type == AttrType::kString) {
      if (x < 0 || x >= static_cast<int64_t>(spec.choices.size())) return std::nullopt;
      out.set(a, spec.choices[static_cast<size_t>(x)]);
    } else if (spec.type == AttrType::kFloat) {
      const double d = std::bit_cast<double>(x);
      if (!std::isfinite(d)) return std::nullopt;
      out.set(a, d);
    } else if (spec.type == AttrType::kBool) {
      if (x != 0 && x != 1) return std::nullopt;
      out.set(a, x == 1);
    } else {
      out.set(a, x);
    }
  }
  return out;
}

namespace {

// A list as one integer: 1 followed by each element in base `base`.
int64_t digits_code(const IntList& v, int64_t base) {
  int64_t c = 1;
  for (int64_t x : v) c = c * base + x;
  return c;
}
std::optional<IntList> digits_of(int64_t code, int64_t base, size_t max_len) {
  IntList v;
  while (code >= base) {
    v.insert(v.begin(), code % base);
    code /= base;
  }
  if (code != 1 || v.empty() || v.size() > max_len) return std::nullopt;
  return v;
}

}  // namespace

int64_t perm_code(const IntList& p) { return digits_code(p, 10); }

std::optional<IntList> perm_of(int64_t code) {
  auto p = digits_of(code, 10, 9);
  if (!p) return std::nullopt;
  IntList sorted = *p;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i)) return std::nullopt;
  return p;
}

std::optional<int64_t> shape_code(const IntList& s) {
  if (s.empty() || s.size() > 4) return std::nullopt;
  for (int64_t x : s)
    if (x <= 0 || x >= 10000) return std::nullopt;
  return digits_code(s, 10000);
}

std::optional<IntList> shape_of(int64_t code) {
  auto s = digits_of(code, 10000, 4);
  if (!s || std::find(s->begin(), s->end(), 0) != s->end()) return std::nullopt;
  return s;
}

}  // namespace pcgx::verify
