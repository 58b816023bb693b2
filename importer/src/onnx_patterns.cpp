// Operators exporters write out in pieces, put back whole: PyTorch's Gelu
// as x * 0.5 * (1 + erf(x / sqrt 2)) and LayerNorm (before opset 17) as
// ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, then * gamma + beta.
// The pieces are skipped and the last one's output is the whole
// operator's.
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "onnx_context.h"

namespace pcgx::importer {
namespace {

struct Index {
  std::map<std::string, const onnx::NodeProto*> producer;
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers;
  std::map<std::string, Constant> constants;  // initializers and Constant nodes
};

Index index_of(const onnx::GraphProto& g) {
  Index ix;
  for (const auto& t : g.initializer()) ix.constants[t.name()] = constant_of(t, t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) ix.producer[o] = &n;
    for (const auto& i : n.input()) ix.readers[i].push_back(&n);
    if (n.op_type() == "Constant")
      for (const auto& a : n.attribute())
        if (a.name() == "value") ix.constants[n.output(0)] = constant_of(a.t(), n.output(0));
  }
  return ix;
}

// The one node reading `value`, when it is of `type`.
const onnx::NodeProto* sole_reader(const Index& ix, const std::string& value, const std::string& type) {
  const auto it = ix.readers.find(value);
  if (it == ix.readers.end() || it->second.size() != 1 || it->second[0]->op_type() != type) return nullptr;
  return it->second[0];
}

const onnx::NodeProto* producer(const Index& ix, const std::string& value, const std::string& type) {
  const auto it = ix.producer.find(value);
  return it != ix.producer.end() && it->second->op_type() == type ? it->second : nullptr;
}

// The scalar constant `value` holds, when it does.
std::optional<double> scalar(const Index& ix, const std::string& value) {
  const auto it = ix.constants.find(value);
  if (it == ix.constants.end() || it->second.values.size() != 1) return std::nullopt;
  return it->second.values[0];
}

// A binary node's operand other than `one`, when `one` is an operand.
std::optional<std::string> other(const onnx::NodeProto& n, const std::string& one) {
  if (n.input_size() != 2) return std::nullopt;
  if (n.input(0) == one) return n.input(1);
  if (n.input(1) == one) return n.input(0);
  return std::nullopt;
}

bool near(std::optional<double> v, double want) { return v && std::fabs(*v - want) < 1e-4 * std::fabs(want); }

void gelu(Context& c, const Index& ix, const onnx::NodeProto& erf) {
  const onnx::NodeProto* div = producer(ix, erf.input(0), "Div");
  const onnx::NodeProto* mul_in = producer(ix, erf.input(0), "Mul");
  std::string x;
  if (div && near(scalar(ix, div->input(1)), std::sqrt(2.0))) x = div->input(0);
  else if (mul_in && mul_in->input_size() == 2)
    for (int s = 0; s < 2; ++s)
      if (near(scalar(ix, mul_in->input(1 - s)), 1 / std::sqrt(2.0))) x = mul_in->input(s);
  if (x.empty()) return;
  const onnx::NodeProto* add = sole_reader(ix, erf.output(0), "Add");
  if (!add || !near(scalar(ix, *other(*add, erf.output(0))), 1.0)) return;
  const onnx::NodeProto* m1 = sole_reader(ix, add->output(0), "Mul");
  if (!m1) return;
  const std::string m1_other = *other(*m1, add->output(0));
  std::vector<const onnx::NodeProto*> pieces{div ? div : mul_in, &erf, add, m1};
  std::string result;
  if (m1_other == x) {  // (x * (1 + erf)) * 0.5
    const onnx::NodeProto* m2 = sole_reader(ix, m1->output(0), "Mul");
    if (!m2 || !near(scalar(ix, *other(*m2, m1->output(0))), 0.5)) return;
    pieces.push_back(m2);
    result = m2->output(0);
  } else {  // (x * 0.5) * (1 + erf)
    const onnx::NodeProto* half = producer(ix, m1_other, "Mul");
    if (!half || other(*half, x) == std::nullopt || !near(scalar(ix, *other(*half, x)), 0.5)) return;
    pieces.push_back(half);
    result = m1->output(0);
  }
  for (const onnx::NodeProto* p : pieces)
    if (p->output(0) != result) c.skip(p->output(0));
  c.fuse(result, {"Gelu", x, "", "", 0});
}

void layer_norm(Context& c, const Index& ix, const onnx::NodeProto& sub) {
  const onnx::NodeProto* mean = producer(ix, sub.input(1), "ReduceMean");
  if (!mean || mean->input(0) != sub.input(0)) return;
  const std::string x = sub.input(0);
  const auto axes = attr_ints(*mean, "axes");
  if (axes != std::vector<int64_t>{-1}) return;
  const auto readers = ix.readers.find(sub.output(0));
  if (readers == ix.readers.end() || readers->second.size() != 2) return;
  const onnx::NodeProto *pow = nullptr, *div = nullptr;
  for (const onnx::NodeProto* r : readers->second) {
    if (r->op_type() == "Pow") pow = r;
    if (r->op_type() == "Div" && r->input(0) == sub.output(0)) div = r;
  }
  if (!pow || !div || !near(scalar(ix, pow->input(1)), 2.0)) return;
  const onnx::NodeProto* var = sole_reader(ix, pow->output(0), "ReduceMean");
  if (!var || attr_ints(*var, "axes") != std::vector<int64_t>{-1}) return;
  const onnx::NodeProto* add_eps = sole_reader(ix, var->output(0), "Add");
  if (!add_eps) return;
  const auto eps = scalar(ix, *other(*add_eps, var->output(0)));
  const onnx::NodeProto* sqrt = sole_reader(ix, add_eps->output(0), "Sqrt");
  if (!eps || !sqrt || div->input(1) != sqrt->output(0)) return;
  std::vector<const onnx::NodeProto*> pieces{mean, &sub, pow, var, add_eps, sqrt, div};
  std::string result = div->output(0), gamma, beta;
  const onnx::NodeProto* scale = sole_reader(ix, div->output(0), "Mul");
  if (scale) {
    const onnx::NodeProto* shift = sole_reader(ix, scale->output(0), "Add");
    const std::string g = *other(*scale, div->output(0));
    if (shift && ix.constants.count(g) && ix.constants.count(*other(*shift, scale->output(0)))) {
      gamma = g, beta = *other(*shift, scale->output(0));
      pieces.push_back(scale), pieces.push_back(shift);
      result = shift->output(0);
    }
  }
  for (const onnx::NodeProto* p : pieces)
    if (p->output(0) != result) c.skip(p->output(0));
  c.fuse(result, {"LayerNorm", x, gamma, beta, *eps});
}

}  // namespace

void fuse_patterns(Context& c) {
  const Index ix = index_of(c.graph());
  for (const auto& n : c.graph().node()) {
    if (n.op_type() == "Erf") gelu(c, ix, n);
    if (n.op_type() == "Sub") layer_norm(c, ix, n);
  }
}

void emit_fused(Context& c, const onnx::NodeProto& n) {
  const Fused& f = *c.fused(n.output(0));
  GraphBuilder& b = c.builder();
  if (f.op == "Gelu") return c.bind(n.output(0), b.unary("Gelu", c.tensor(f.x), n.output(0)));
  const bool affine = !f.gamma.empty();
  std::vector<TensorRef> ins{c.tensor(f.x)};
  if (affine) ins.push_back(c.tensor(f.gamma)), ins.push_back(c.tensor(f.beta));
  c.bind(n.output(0), b.op("LayerNorm", {{"eps", f.eps}, {"affine", affine}}, std::move(ins), n.output(0)));
}

}  // namespace pcgx::importer
