// Baseline strategies (see baselines.h).
#include "pcgx/search/baselines.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::search {
namespace {

std::vector<TensorType> types_of(const Graph& g, const Node& n) {
  std::vector<TensorType> t;
  for (const TensorRef& i : n.inputs) t.push_back(g.type(i));
  return t;
}

// The layout a plan asks of each input, or nothing when the plan names an
// unknown kind or needs summand replicas.
std::optional<std::vector<ParallelTensorShape>> required_inputs(const Graph& g, const Node& n, const NodePlan& plan) {
  const auto types = types_of(g, n);
  std::vector<ParallelTensorShape> req;
  for (const TensorType& t : types) req.push_back(ParallelTensorShape::unpartitioned(t.shape, t.dtype));
  if (plan.empty()) return req;
  if (!n.op->kinds) return std::nullopt;
  const auto kinds = n.op->kinds(n.attrs, types);
  for (const auto& [name, degree] : plan) {
    if (degree <= 1) continue;
    auto k = std::find_if(kinds.begin(), kinds.end(), [&](const ParallelKind& x) { return x.name == name; });
    if (k == kinds.end()) return std::nullopt;
    for (size_t i = 0; i < req.size() && i < k->inputs.size(); ++i) {
      const int d = k->inputs[i];
      if (d == ParallelKind::kSum) return std::nullopt;
      if (d == ParallelKind::kCopy) req[i].replica *= degree;
      else req[i].dims[static_cast<size_t>(d)].degree *= degree;
    }
  }
  for (const auto& r : req)
    if (r.invalid_reason()) return std::nullopt;
  return req;
}

struct Builder {
  const Graph& g;
  Graph out;
  std::vector<std::vector<TensorRef>> map;  // old tensor -> new
  std::map<std::pair<TensorRef, std::string>, TensorRef> converted;

  TensorRef add(const std::string& op, Attributes a, TensorRef in) { return {out.add(op, std::move(a), {in}), 0}; }

  // `t` (new graph) converted to layout `want`.
  TensorRef convert(TensorRef t, const ParallelTensorShape& want) {
    const auto key = std::make_pair(t, want.to_string());
    if (auto it = converted.find(key); it != converted.end()) return it->second;
    TensorRef cur = t;
    ParallelTensorShape s = out.shape(cur);
    if (s.replica > 1 && s.replica != want.replica) cur = add("Reduce", {{"degree", s.replica}}, cur), s = out.shape(cur);
    for (int j = 0; j < s.rank(); ++j) {
      const int64_t have = s.dims[static_cast<size_t>(j)].degree, need = want.dims[static_cast<size_t>(j)].degree;
      if (have > need) {
        const int64_t k = have % need == 0 ? have / need : have;
        cur = add("Combine", {{"dim", int64_t{j}}, {"degree", k}}, cur), s = out.shape(cur);
      }
    }
    for (int j = 0; j < s.rank(); ++j) {
      const int64_t have = s.dims[static_cast<size_t>(j)].degree, need = want.dims[static_cast<size_t>(j)].degree;
      if (need > have && need % have) cur = add("Combine", {{"dim", int64_t{j}}, {"degree", have}}, cur), s = out.shape(cur);
      const int64_t now = s.dims[static_cast<size_t>(j)].degree;
      if (need > now) cur = add("Repartition", {{"dim", int64_t{j}}, {"degree", need / now}}, cur), s = out.shape(cur);
    }
    if (want.replica > s.replica) cur = add("Replicate", {{"degree", want.replica / s.replica}}, cur);
    converted.emplace(key, cur);
    return cur;
  }
};

bool has_op(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.op->name == name) return true;
  return false;
}

// The kind splitting a node's samples: output dimension 0, or (for losses)
// partial sums over input 0's first dimension.
const ParallelKind* sample_kind(const std::vector<ParallelKind>& kinds) {
  for (const auto& k : kinds) {
    if (std::find(k.inputs.begin(), k.inputs.end(), ParallelKind::kSum) != k.inputs.end()) continue;
    if (!k.outputs.empty() && (k.outputs[0] == 0 || (k.outputs[0] == ParallelKind::kPartial && !k.inputs.empty() && k.inputs[0] == 0)))
      return &k;
  }
  return nullptr;
}

int64_t sample_size(const Graph& g, const Node& n, const ParallelKind& k) {
  if (k.outputs[0] == 0) return n.outputs[0].dims.at(0).size;
  return g.shape(n.inputs[0]).dims.at(0).size;
}

NodePlan sample_plan(const Graph& g, const Node& n, int64_t devices) {
  if (!n.op->kinds) return {};
  const auto kinds = n.op->kinds(n.attrs, types_of(g, n));
  const ParallelKind* k = sample_kind(kinds);
  if (!k) return {};
  const int64_t d = largest_dividing_degree(devices, sample_size(g, n, *k));
  return d > 1 ? NodePlan{{k->name, d}} : NodePlan{};
}

bool unary(const Node& n) {
  static const std::set<std::string> ops = {"Relu", "Gelu", "Sigmoid", "Tanh", "Dropout"};
  return ops.count(n.op->name) != 0;
}

}  // namespace

int64_t largest_dividing_degree(int64_t devices, int64_t n) {
  for (int64_t d = devices; d > 1; --d)
    if (devices % d == 0 && n % d == 0) return d;
  return 1;
}

Graph parallelize(const Graph& g, const std::function<NodePlan(const Graph&, const Node&)>& plan) {
  Builder b{g, Graph(g.name()), std::vector<std::vector<TensorRef>>(g.size()), {}};
  for (const Node& n : g.nodes()) {
    auto& outs = b.map[static_cast<size_t>(n.id)];
    if (n.op->op_class == OpClass::kSource) {
      const NodeId id = b.out.add(*n.op, n.attrs, {}, n.name);
      for (size_t o = 0; o < n.outputs.size(); ++o) outs.push_back({id, static_cast<int32_t>(o)});
      continue;
    }
    std::vector<TensorRef> ins;
    for (const TensorRef& i : n.inputs) ins.push_back(b.map[static_cast<size_t>(i.node)][static_cast<size_t>(i.output)]);
    NodeId id = -1;
    if (n.op->op_class == OpClass::kCompute) {
      if (auto req = required_inputs(g, n, plan(g, n))) {
        std::vector<TensorRef> conv;
        for (size_t i = 0; i < ins.size(); ++i) conv.push_back(b.convert(ins[i], (*req)[i]));
        try {
          id = b.out.add(*n.op, n.attrs, conv, n.name);
        } catch (const Error&) {
          id = -1;
        }
      }
      if (id < 0) {
        std::vector<TensorRef> conv;
        for (const TensorRef& i : ins) conv.push_back(b.convert(i, ParallelTensorShape::unpartitioned(b.out.type(i).shape, b.out.type(i).dtype)));
        id = b.out.add(*n.op, n.attrs, conv, n.name);
      }
    } else {
      id = b.out.add(*n.op, n.attrs, ins, n.name);
    }
    for (size_t o = 0; o < b.out.node(id).outputs.size(); ++o) outs.push_back({id, static_cast<int32_t>(o)});
  }
  for (const TensorRef& o : g.outputs())
    b.out.add_output(b.convert(b.map[static_cast<size_t>(o.node)][static_cast<size_t>(o.output)], g.shape(o)));
  return std::move(b.out);
}

Graph data_parallel(const Graph& g, int64_t devices) {
  return parallelize(g, [devices](const Graph& gr, const Node& n) { return sample_plan(gr, n, devices); });
}

std::string expert_family(const Graph& g) {
  if (has_op(g, "EmbeddingBag")) return "recommendation";
  if (has_op(g, "LayerNorm") && has_op(g, "BatchMatMul")) return "transformer";
  return "";
}

std::optional<Graph> expert(const Graph& g, const Machine& machine, int64_t devices) {
  const std::string family = expert_family(g);
  if (family == "recommendation") {
    return parallelize(g, [devices](const Graph& gr, const Node& n) {
      if (n.op->name == "EmbeddingBag" || n.op->name == "Embedding") return NodePlan{};
      return sample_plan(gr, n, devices);
    });
  }
  if (family != "transformer") return std::nullopt;
  const int64_t t = std::gcd(machine.devices_per_node, devices);
  const int64_t d = devices / t;
  // Feed-forward pairs: Linear A -> unary ops -> Linear B (no activation).
  const auto consumers = g.consumers();
  std::map<NodeId, std::string> role;  // "column", "middle", "row"
  for (const Node& n : g.nodes()) {
    if (n.op->name != "Linear") continue;
    std::vector<NodeId> chain;
    NodeId cur = n.id;
    for (;;) {
      const auto& cs = consumers[static_cast<size_t>(cur)];
      if (cs.size() != 1) break;
      const Node& c = g.node(cs[0].first);
      if (unary(c)) {
        chain.push_back(c.id), cur = c.id;
        continue;
      }
      if (c.op->name == "Linear" && cs[0].second == 0 && c.attrs.get_string("activation") == "none") {
        role[n.id] = "column", role[c.id] = "row";
        for (NodeId m : chain) role[m] = "middle";
      }
      break;
    }
  }
  return parallelize(g, [&, d, t](const Graph& gr, const Node& n) {
    NodePlan p = sample_plan(gr, n, d);
    auto r = role.find(n.id);
    if (r == role.end() || t <= 1) return p;
    const int64_t last = n.outputs[0].rank() - 1;
    if (r->second == "column") p["out"] = t;
    else if (r->second == "row") p["reduce"] = t;
    else p["dim" + std::to_string(last)] = t;
    return p;
  });
}

}  // namespace pcgx::search
