// Matching a rule's source graph in a PCG (see substitution.h).
#include <algorithm>
#include <cmath>

#include "degree_map.h"
#include "pcgx/search/substitution.h"

namespace pcgx::search {
namespace {

struct Matcher {
  const Graph& g;
  const Rule& rule;
  const std::vector<std::vector<std::pair<NodeId, int>>>& consumers;
  bool generic;
  const MatchOptions& options;

  struct State {
    std::vector<NodeId> nodes;
    std::map<std::string, TensorRef> vars;
    std::vector<NodeId> used;  // graph nodes taken, to keep the match injective
    int64_t k = 0;             // 0: unbound
  };

  bool degree_ok(int64_t rule_v, int64_t graph_v, State& s) const { return match_degree(rule_v, graph_v, generic, s.k); }

  bool state_ok(const ParallelTensorShape& p, const ParallelTensorShape& t, State& s) const {
    if (p.rank() != t.rank() || p.dtype != t.dtype) return false;
    for (int d = 0; d < p.rank(); ++d) {
      const auto &a = p.dims[static_cast<size_t>(d)], &b = t.dims[static_cast<size_t>(d)];
      if (a.pipeline != 1 || b.pipeline != 1) return false;
      if (!degree_ok(a.degree, b.degree, s)) return false;
    }
    return degree_ok(p.replica, t.replica, s);
  }

  bool attrs_ok(const Node& pn, const Node& gn, State& s) const {
    for (const auto& [name, v] : pn.attrs.values()) {
      const AttrValue& w = gn.attrs.at(name);
      if (pn.op->op_class == OpClass::kParallel && name == "degree") {
        if (!degree_ok(std::get<int64_t>(v), std::get<int64_t>(w), s)) return false;
      } else if (pn.op->name == "Split" && name == "sizes") {
        const auto &a = std::get<IntList>(v), &b = std::get<IntList>(w);
        if (a.size() != b.size()) return false;
        for (size_t i = 0; i < a.size(); ++i)
          if (a[i] * b[0] != b[i] * a[0]) return false;
      } else if (!(v == w)) {
        return false;
      }
    }
    return true;
  }

  bool match(TensorRef p, TensorRef t, State& s) const {
    const Node& pn = rule.source.node(p.node);
    if (pn.op->op_class == OpClass::kSource) {
      auto it = s.vars.find(pn.name);
      if (it != s.vars.end()) return it->second == t;
      if (!state_ok(pn.outputs[0], g.shape(t), s)) return false;
      s.vars.emplace(pn.name, t);
      return true;
    }
    if (p.output != t.output) return false;
    NodeId& slot = s.nodes[static_cast<size_t>(p.node)];
    if (slot != -1) return slot == t.node;
    const Node& gn = g.node(t.node);
    if (gn.op != pn.op || gn.inputs.size() != pn.inputs.size()) return false;
    if (std::find(s.used.begin(), s.used.end(), t.node) != s.used.end()) return false;
    if (!attrs_ok(pn, gn, s)) return false;
    slot = t.node;
    s.used.push_back(t.node);
    for (size_t i = 0; i < pn.inputs.size(); ++i)
      if (!match(pn.inputs[i], gn.inputs[i], s)) return false;
    return true;
  }

  // No replaced node is read from outside except through the rule's outputs.
  bool self_contained(const State& s) const {
    const auto& outs = rule.source.outputs();
    auto is_output = [&](TensorRef t) {
      for (const auto& o : outs) {
        const Node& pn = rule.source.node(o.node);
        if (pn.op->op_class != OpClass::kSource && s.nodes[static_cast<size_t>(o.node)] == t.node && o.output == t.output)
          return true;
      }
      return false;
    };
    for (NodeId m : s.used) {
      for (const auto& [c, idx] : consumers[static_cast<size_t>(m)]) {
        if (std::find(s.used.begin(), s.used.end(), c) != s.used.end()) continue;
        if (!is_output(g.node(c).inputs[static_cast<size_t>(idx)])) return false;
      }
      for (const TensorRef& o : g.outputs())
        if (o.node == m && !is_output(o)) return false;
    }
    return true;
  }

  void roots(size_t i, State s, std::vector<Match>& out, size_t limit) const {
    if (out.size() >= limit) return;
    const auto& outs = rule.source.outputs();
    if (i == outs.size()) {
      for (const Node& pn : rule.source.nodes())
        if (pn.op->op_class != OpClass::kSource && s.nodes[static_cast<size_t>(pn.id)] == -1) return;
      if (!self_contained(s)) return;
      if (s.k == 0 && generic && !options.free_degrees.empty()) {
        // The source fixes no degree: the target's degrees are free.
        for (int64_t d : options.free_degrees) out.push_back({&rule, s.nodes, s.vars, d});
      } else {
        out.push_back({&rule, s.nodes, s.vars, s.k ? s.k : 2});
      }
      return;
    }
    const TensorRef r = outs[i];
    const Node& pn = rule.source.node(r.node);
    if (pn.op->op_class == OpClass::kSource || s.nodes[static_cast<size_t>(r.node)] != -1) {
      roots(i + 1, std::move(s), out, limit);  // a variable, or reached from an earlier root
      return;
    }
    std::vector<NodeId> scanned;
    const std::vector<NodeId>* candidates = nullptr;
    if (options.by_op) {
      auto it = options.by_op->find(pn.op);
      if (it == options.by_op->end()) return;
      candidates = &it->second;
    } else {
      for (const Node& gn : g.nodes())
        if (gn.op == pn.op) scanned.push_back(gn.id);
      candidates = &scanned;
    }
    for (NodeId c : *candidates) {
      if (static_cast<size_t>(r.output) >= g.node(c).outputs.size()) continue;
      State next = s;
      if (match(r, {c, r.output}, next)) roots(i + 1, std::move(next), out, limit);
      if (out.size() >= limit) return;
    }
  }
};

}  // namespace

std::vector<Match> find_matches(const Graph& g, const Rule& rule, size_t limit) {
  const auto consumers = g.consumers();
  return find_matches(g, rule, consumers, limit);
}

std::vector<Match> find_matches(const Graph& g, const Rule& rule,
                                const std::vector<std::vector<std::pair<NodeId, int>>>& consumers, size_t limit) {
  MatchOptions o;
  o.limit = limit;
  return find_matches(g, rule, consumers, o);
}

std::vector<Match> find_matches(const Graph& g, const Rule& rule,
                                const std::vector<std::vector<std::pair<NodeId, int>>>& consumers,
                                const MatchOptions& options) {
  Matcher m{g, rule, consumers, rule.proof && rule.proof->degree_generic, options};
  Matcher::State s;
  s.nodes.assign(rule.source.size(), -1);
  std::vector<Match> out;
  m.roots(0, std::move(s), out, options.limit);
  return out;
}

std::map<const OpDef*, std::vector<NodeId>> nodes_by_op(const Graph& g) {
  std::map<const OpDef*, std::vector<NodeId>> out;
  for (const Node& n : g.nodes()) out[n.op].push_back(n.id);
  return out;
}

}  // namespace pcgx::search
