// Shape arithmetic folded at import: exporters compute reshape targets
// from Shape, Gather, Unsqueeze, Concat... of tensors whose shapes pcgx
// knows statically, so those nodes become constants. A node is folded when
// every input is a constant (Shape also of a tensor).
#include <cmath>
#include <set>

#include "onnx_context.h"
#include "pcgx/pcg/error.h"

namespace pcgx::importer {
namespace {

int64_t axis_in(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }

std::vector<int64_t> ints_of(const Constant& k) { return {k.values.begin(), k.values.end()}; }

// The axes of Unsqueeze/Squeeze: an input from opset 13, an attribute before.
std::vector<int64_t> axes_of(Context& c, const onnx::NodeProto& n) {
  if (n.input_size() > 1 && !n.input(1).empty()) {
    const Constant* k = c.constant(n.input(1));
    return k ? ints_of(*k) : std::vector<int64_t>{};
  }
  return attr_ints(n, "axes");
}

bool all_constant(Context& c, const onnx::NodeProto& n) {
  for (const auto& i : n.input())
    if (!i.empty() && !c.is_constant(i)) return false;
  return true;
}

// Elementwise on two constants, a scalar broadcast.
std::optional<Constant> elementwise(const Constant& a, const Constant& b, const std::string& op) {
  if (a.values.size() != b.values.size() && a.values.size() != 1 && b.values.size() != 1) return std::nullopt;
  Constant r = a.values.size() >= b.values.size() ? a : b;
  r.integer = a.integer && b.integer;
  for (size_t i = 0; i < r.values.size(); ++i) {
    const double x = a.values[a.values.size() == 1 ? 0 : i], y = b.values[b.values.size() == 1 ? 0 : i];
    if (op == "Add") r.values[i] = x + y;
    else if (op == "Sub") r.values[i] = x - y;
    else if (op == "Mul") r.values[i] = x * y;
    else if (op == "Div") r.values[i] = r.integer ? std::trunc(x / y) : x / y;
    else r.values[i] = x == y;  // Equal
  }
  if (op == "Equal") r.integer = true;
  return r;
}

}  // namespace

bool fold_constant(Context& c, const onnx::NodeProto& n) {
  const std::string& t = n.op_type();
  if (t == "Shape") {
    std::vector<int64_t> s = c.is_constant(n.input(0)) ? c.constant(n.input(0))->shape : c.builder().shape(c.tensor(n.input(0))).logical_shape();
    const auto rank = s.size();
    const auto start = static_cast<size_t>(std::clamp<int64_t>(axis_in(attr_int(n, "start", 0), rank), 0, static_cast<int64_t>(rank)));
    const auto end = static_cast<size_t>(std::clamp<int64_t>(axis_in(attr_int(n, "end", static_cast<int64_t>(rank)), rank), 0, static_cast<int64_t>(rank)));
    Constant k{{static_cast<int64_t>(end > start ? end - start : 0)}, {}, true};
    for (size_t d = start; d < end; ++d) k.values.push_back(static_cast<double>(s[d]));
    c.add_constant(n.output(0), std::move(k));
    return true;
  }
  if (!all_constant(c, n)) return false;
  auto in = [&](int i) { return *c.constant(n.input(i)); };
  Constant r;
  if (t == "Gather") {
    const Constant data = in(0), idx = in(1);
    if (data.shape.size() != 1 || attr_int(n, "axis", 0) != 0) return false;
    r = {idx.shape, {}, data.integer};
    for (double i : idx.values) r.values.push_back(data.values.at(static_cast<size_t>(axis_in(static_cast<int64_t>(i), data.values.size()))));
  } else if (t == "Unsqueeze" || t == "Squeeze") {
    r = in(0);
    const std::vector<int64_t> axes = axes_of(c, n);
    if (t == "Unsqueeze") {
      const size_t rank = r.shape.size() + axes.size();
      std::set<int64_t> at;
      for (int64_t a : axes) at.insert(axis_in(a, rank));
      std::vector<int64_t> s;
      for (size_t d = 0, j = 0; d < rank; ++d) s.push_back(at.count(static_cast<int64_t>(d)) ? 1 : r.shape[j++]);
      r.shape = s;
    } else {
      std::vector<int64_t> s;
      for (size_t d = 0; d < r.shape.size(); ++d) {
        const bool named = std::find_if(axes.begin(), axes.end(), [&](int64_t a) { return axis_in(a, r.shape.size()) == static_cast<int64_t>(d); }) != axes.end();
        if (!(axes.empty() ? r.shape[d] == 1 : named)) s.push_back(r.shape[d]);
      }
      r.shape = s;
    }
  } else if (t == "Slice") {
    const Constant data = in(0);
    if (data.shape.size() != 1 || n.input_size() < 3) return false;
    const auto len = static_cast<int64_t>(data.values.size());
    const int64_t step = n.input_size() > 4 && !n.input(4).empty() ? static_cast<int64_t>(in(4).values.at(0)) : 1;
    if (step != 1) return false;
    const int64_t start = std::clamp<int64_t>(axis_in(static_cast<int64_t>(in(1).values.at(0)), data.values.size()), 0, len);
    const double e = in(2).values.at(0);
    const int64_t end = e >= 9e18 ? len : std::clamp<int64_t>(axis_in(static_cast<int64_t>(e), data.values.size()), 0, len);
    r = {{std::max<int64_t>(end - start, 0)}, {}, data.integer};
    for (int64_t i = start; i < end; ++i) r.values.push_back(data.values[static_cast<size_t>(i)]);
  } else if (t == "Concat") {
    r = {{0}, {}, true};
    for (int i = 0; i < n.input_size(); ++i) {
      const Constant k = in(i);
      if (k.shape.size() != 1) return false;
      r.values.insert(r.values.end(), k.values.begin(), k.values.end());
      r.integer = r.integer && k.integer;
    }
    r.shape = {static_cast<int64_t>(r.values.size())};
  } else if (t == "Cast") {
    r = in(0);
    const int64_t to = attr_int(n, "to", onnx::TensorProto::FLOAT);
    r.integer = to != onnx::TensorProto::FLOAT && to != onnx::TensorProto::DOUBLE && to != onnx::TensorProto::FLOAT16;
  } else if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Equal") {
    const auto e = elementwise(in(0), in(1), t);
    if (!e) return false;
    r = *e;
  } else if (t == "Where") {
    const Constant cond = in(0), a = in(1), b = in(2);
    if (cond.values.size() != a.values.size() || a.values.size() != b.values.size()) return false;
    r = a;
    for (size_t i = 0; i < r.values.size(); ++i) r.values[i] = cond.values[i] != 0 ? a.values[i] : b.values[i];
  } else if (t == "ConstantOfShape") {
    Constant value{{1}, {0.0}, false};
    for (const auto& a : n.attribute())
      if (a.name() == "value") value = constant_of(a.t(), c.where(n));
    r = {ints_of(in(0)), {}, value.integer};
    r.values.assign(static_cast<size_t>(product(r.shape)), value.values.at(0));
  } else if (t == "Identity") {
    r = in(0);
  } else if (t == "Transpose") {  // a weight stored transposed
    const Constant x = in(0);
    const size_t rank = x.shape.size();
    std::vector<int64_t> perm = attr_ints(n, "perm");
    if (perm.empty())
      for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    if (perm.size() != rank) return false;
    std::vector<int64_t> xs(rank, 1);
    for (size_t d = rank; d-- > 1;) xs[d - 1] = xs[d] * x.shape[d];
    r = x;
    for (size_t d = 0; d < rank; ++d) r.shape[d] = x.shape[static_cast<size_t>(perm[d])];
    std::vector<int64_t> idx(rank, 0);
    for (size_t i = 0; i < r.values.size(); ++i) {
      size_t at = 0;
      for (size_t d = 0; d < rank; ++d) at += static_cast<size_t>(idx[d] * xs[static_cast<size_t>(perm[d])]);
      r.values[i] = x.values[at];
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < r.shape[d]) break;
        idx[d] = 0;
      }
    }
  } else {
    return false;
  }
  if (t != "Transpose" && t != "Identity") r.source.clear();  // only data movement keeps a weight's name
  c.add_constant(n.output(0), std::move(r));
  return true;
}

}  // namespace pcgx::importer
