// Matching a rule's source graph in a PCG (see substitution.h).
#include <algorithm>
#include <cmath>

#include "degree_map.h"
#include "pcgx/search/substitution.h"
#include "sample_lift.h"

namespace pcgx::search {
namespace {

// A depth-first search that binds rule nodes in place and undoes them on
// backtracking (copying the bindings per candidate was most of the
// search's allocations).
struct Matcher {
  const Graph& g;
  const Rule& rule;
  const std::vector<std::vector<std::pair<NodeId, int>>>& consumers;
  bool generic;
  const MatchOptions& options;

  std::vector<NodeId> nodes;    // per rule node: the graph node (-1: unbound; operators only)
  std::vector<TensorRef> vars;  // per rule node: the bound tensor (node -1: unbound; variables only)
  std::vector<NodeId> trail;    // rule nodes in binding order
  std::vector<NodeId> used;     // graph nodes taken, to keep the match injective
  int64_t k = 0;                // 0: unbound
  int64_t lift = 0;             // the samples split the match is lifted over (sample_lift.h); 0: unbound
  std::vector<ValueBinding> values;  // value-generic attributes bound so far

  struct Mark {
    size_t trail;
    int64_t k, lift;
    size_t values;
  };
  Mark mark() const { return {trail.size(), k, lift, values.size()}; }
  void undo(Mark m) {
    values.resize(m.values);
    while (trail.size() > m.trail) {
      const NodeId p = trail.back();
      trail.pop_back();
      if (vars[static_cast<size_t>(p)].node != -1) {
        vars[static_cast<size_t>(p)] = {-1, 0};
      } else {
        nodes[static_cast<size_t>(p)] = -1;
        used.pop_back();
      }
    }
    k = m.k;
    lift = m.lift;
  }

  bool degree_ok(int64_t rule_v, int64_t graph_v) { return match_degree(rule_v, graph_v, generic, k); }

  // The rule's state p read as graph state t: equal (degrees mapped), or
  // with lifting, t is p split `lift` more ways on dimension 0 or copied
  // `lift` more times (binding `lift` on the first such variable).
  bool state_ok(const ParallelTensorShape& p, TensorRef ref) {
    const ParallelTensorShape& t = g.shape(ref);
    if (p.rank() != t.rank() || p.dtype != t.dtype) return false;
    const int64_t k0 = k;
    auto dims_ok = [&](int from) {
      for (int d = from; d < p.rank(); ++d) {
        const auto &a = p.dims[static_cast<size_t>(d)], &b = t.dims[static_cast<size_t>(d)];
        if (a.pipeline != 1 || b.pipeline != 1 || !degree_ok(a.degree, b.degree)) return false;
      }
      return true;
    };
    if (dims_ok(0) && degree_ok(p.replica, t.replica)) return true;
    k = k0;
    if (options.lift_tasks < 4) return false;
    auto bind = [&](int64_t l) {
      if (l < 2 || (lift != 0 && lift != l)) return false;
      lift = l;
      return true;
    };
    const int64_t lift0 = lift;
    if (p.rank() > 0 && p.dims[0].degree == 1 && t.dims[0].pipeline == 1 && bind(t.dims[0].degree) && dims_ok(1) &&
        degree_ok(p.replica, t.replica))
      return true;
    k = k0, lift = lift0;
    if (p.replica == 1 && bind(t.replica) && dims_ok(0) && all_copies(g, ref)) return true;
    k = k0, lift = lift0;
    return false;
  }

  // A lifted match keeps every block of samples apart (sample_lift.h), on
  // the source's side; the target's is checked where it is built.
  bool lift_ok(int64_t degree) const {
    if (lift < 2) return true;
    if (lift * degree > options.lift_tasks) return false;
    std::vector<std::vector<Lifted>> outs(rule.source.size());
    for (const Node& pn : rule.source.nodes()) {
      const size_t i = static_cast<size_t>(pn.id);
      if (pn.op->op_class == OpClass::kSource) {
        if (vars[i].node == -1) continue;
        const auto how = lifted_as(pn.outputs[0], g.shape(vars[i]), degree, lift);
        if (!how) return false;
        outs[i] = {*how};
        continue;
      }
      std::vector<Lifted> ins;
      for (const TensorRef& in : pn.inputs) ins.push_back(outs[static_cast<size_t>(in.node)].at(static_cast<size_t>(in.output)));
      const auto o = lift_node(pn, g, nodes[i], ins, degree, lift);
      if (!o) return false;
      outs[i].assign(pn.outputs.size(), *o);
    }
    return true;
  }

  bool attr_ok(const Node& pn, const std::string& name, const AttrValue& v, const AttrValue& w) {
    const AttrRole role = pn.op->attr_role(name);
    if (role == AttrRole::kDegree) return degree_ok(std::get<int64_t>(v), std::get<int64_t>(w));
    if (role == AttrRole::kExtentParts) {
      const auto &a = std::get<IntList>(v), &b = std::get<IntList>(w);
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (a[i] * b[0] != b[i] * a[0]) return false;
      return true;
    }
    if (role == AttrRole::kValue && value_generic(pn.op, name)) return bind_value(pn.op, name, v, w);
    return v == w;
  }

  bool value_generic(const OpDef* op, const std::string& name) const {
    if (!rule.proof) return false;
    for (const std::string& g : rule.proof->value_generic)
      if (g.size() == op->name.size() + 1 + name.size() && g.compare(0, op->name.size(), op->name) == 0 &&
          g[op->name.size()] == '.' && g.compare(op->name.size() + 1, name.size(), name) == 0)
        return true;
    return false;
  }

  // The rule's value v stands for the graph's w: the same w wherever the
  // rule has the same v (value_generic.h's argument needs no more).
  bool bind_value(const OpDef* op, const std::string& name, const AttrValue& v, const AttrValue& w) {
    for (const ValueBinding& b : values)
      if (b.op == op && b.attr == name && b.rule_value == v) return b.graph_value == w;
    values.push_back({op, name, v, w});
    return true;
  }

  bool attrs_ok(const Node& pn, const Node& gn) {
    // Normalized attributes of one operator have the same names in the same
    // order: walk both maps together, looking names up only if they differ.
    const auto &pa = pn.attrs.values(), &ga = gn.attrs.values();
    if (pa.size() == ga.size()) {
      auto it = ga.begin();
      bool aligned = true;
      for (const auto& [name, v] : pa) {
        if (it->first != name) {
          aligned = false;
          break;
        }
        if (!attr_ok(pn, name, v, it->second)) return false;
        ++it;
      }
      if (aligned) return true;
    }
    for (const auto& [name, v] : pa)
      if (!attr_ok(pn, name, v, gn.attrs.at(name))) return false;
    return true;
  }

  // Binds rule tensor p to graph tensor t and everything above it; on
  // failure the bindings made are left for the caller's undo.
  bool match(TensorRef p, TensorRef t) {
    const Node& pn = rule.source.node(p.node);
    const auto pi = static_cast<size_t>(p.node);
    if (pn.op->op_class == OpClass::kSource) {
      if (vars[pi].node != -1) return vars[pi] == t;
      if (!state_ok(pn.outputs[0], t)) return false;
      vars[pi] = t;
      trail.push_back(p.node);
      return true;
    }
    if (p.output != t.output) return false;
    if (nodes[pi] != -1) return nodes[pi] == t.node;
    const Node& gn = g.node(t.node);
    if (gn.op != pn.op || gn.inputs.size() != pn.inputs.size()) return false;
    if (std::find(used.begin(), used.end(), t.node) != used.end()) return false;
    if (!attrs_ok(pn, gn)) return false;
    nodes[pi] = t.node;
    trail.push_back(p.node);
    used.push_back(t.node);
    for (size_t i = 0; i < pn.inputs.size(); ++i)
      if (!match(pn.inputs[i], gn.inputs[i])) return false;
    return true;
  }

  // No replaced node is read from outside except through the rule's outputs.
  bool self_contained() const {
    const auto& outs = rule.source.outputs();
    auto is_output = [&](TensorRef t) {
      for (const auto& o : outs) {
        const Node& pn = rule.source.node(o.node);
        if (pn.op->op_class != OpClass::kSource && nodes[static_cast<size_t>(o.node)] == t.node && o.output == t.output)
          return true;
      }
      return false;
    };
    for (NodeId m : used) {
      for (const auto& [c, idx] : consumers[static_cast<size_t>(m)]) {
        if (std::find(used.begin(), used.end(), c) != used.end()) continue;
        if (!is_output(g.node(c).inputs[static_cast<size_t>(idx)])) return false;
      }
      for (const TensorRef& o : g.outputs())
        if (o.node == m && !is_output(o)) return false;
    }
    return true;
  }

  void emit(std::vector<Match>& out) const {
    std::map<std::string, TensorRef> bound;
    for (const Node& pn : rule.source.nodes())
      if (pn.op->op_class == OpClass::kSource && vars[static_cast<size_t>(pn.id)].node != -1)
        bound.emplace(pn.name, vars[static_cast<size_t>(pn.id)]);
    const int64_t l = std::max<int64_t>(lift, 1);
    if (k == 0 && generic && !options.free_degrees.empty()) {
      // The source fixes no degree: the target's degrees are free.
      for (int64_t d : options.free_degrees)
        if (lift_ok(d)) out.push_back({&rule, nodes, bound, d, l, values});
    } else if (lift_ok(k ? k : 2)) {
      out.push_back({&rule, nodes, std::move(bound), k ? k : 2, l, values});
    }
  }

  void roots(size_t i, std::vector<Match>& out, size_t limit) {
    if (out.size() >= limit) return;
    const auto& outs = rule.source.outputs();
    if (i == outs.size()) {
      for (const Node& pn : rule.source.nodes())
        if (pn.op->op_class != OpClass::kSource && nodes[static_cast<size_t>(pn.id)] == -1) return;
      if (self_contained()) emit(out);
      return;
    }
    const TensorRef r = outs[i];
    const Node& pn = rule.source.node(r.node);
    if (pn.op->op_class == OpClass::kSource || nodes[static_cast<size_t>(r.node)] != -1) {
      roots(i + 1, out, limit);  // a variable, or reached from an earlier root
      return;
    }
    auto visit = [&](NodeId c) {
      if (static_cast<size_t>(r.output) >= g.node(c).outputs.size()) return;
      const Mark m = mark();
      if (match(r, {c, r.output})) roots(i + 1, out, limit);
      undo(m);
    };
    if (options.by_op) {
      auto it = options.by_op->find(pn.op);
      if (it == options.by_op->end()) return;
      for (NodeId c : it->second) {
        visit(c);
        if (out.size() >= limit) return;
      }
    } else {
      for (const Node& gn : g.nodes()) {
        if (gn.op == pn.op) visit(gn.id);
        if (out.size() >= limit) return;
      }
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
  Matcher m{g, rule, consumers, rule.proof && rule.proof->degree_generic, options, {}, {}, {}, {}, 0, 0, {}};
  m.nodes.assign(rule.source.size(), -1);
  m.vars.assign(rule.source.size(), TensorRef{-1, 0});
  std::vector<Match> out;
  m.roots(0, out, options.limit);
  return out;
}

std::optional<RuleRoot> rule_root(const Rule& rule) {
  for (const TensorRef& o : rule.source.outputs()) {
    const Node& pn = rule.source.node(o.node);
    if (pn.op->op_class == OpClass::kSource) continue;
    RuleRoot r;
    r.rule = &rule;
    r.node = &pn;
    r.op = pn.op;
    r.output = o.output;
    r.arity = pn.inputs.size();
    for (size_t j = 0; j < pn.inputs.size() && j < kRootFeeders; ++j) {
      const Node& feeder = rule.source.node(pn.inputs[j].node);
      if (feeder.op->op_class != OpClass::kSource) r.feeders[j] = {feeder.op, pn.inputs[j].output};
    }
    return r;
  }
  return std::nullopt;
}

size_t feeders_missed(const Graph& g, const RuleRoot& root, NodeId node, int* at) {
  const Node& gn = g.node(node);
  if (gn.op != root.op || gn.inputs.size() != root.arity || static_cast<size_t>(root.output) >= gn.outputs.size())
    return SIZE_MAX;
  size_t missed = 0;
  for (size_t j = 0; j < root.arity && j < kRootFeeders; ++j) {
    const auto& [op, output] = root.feeders[j];
    if (op && (op != g.node(gn.inputs[j].node).op || output != gn.inputs[j].output)) {
      ++missed;
      if (at) *at = static_cast<int>(j);
    }
  }
  return missed;
}

bool root_needs(const Graph& g, const RuleRoot& root, NodeId node, std::vector<RootNeed>& needs) {
  static const std::vector<std::vector<std::pair<NodeId, int>>> no_consumers;
  static const MatchOptions no_options;
  const Node& gn = g.node(node);
  needs.assign(gn.inputs.size(), std::nullopt);
  // The inputs whose feeder is not the rule's: changing one input can
  // mend at most one of them (tested before the attributes, as cheaper).
  int at = -1;
  const size_t missed = feeders_missed(g, root, node, &at);
  if (missed > 1) return false;
  const Rule& rule = *root.rule;
  const Node& pn = *root.node;
  // Inputs past the copied ones, read from the rule.
  for (size_t j = kRootFeeders; j < pn.inputs.size(); ++j) {
    const Node& feeder = rule.source.node(pn.inputs[j].node);
    if (feeder.op->op_class != OpClass::kSource &&
        (feeder.op != g.node(gn.inputs[j].node).op || pn.inputs[j].output != gn.inputs[j].output)) {
      if (at >= 0) return false;
      at = static_cast<int>(j);
    }
  }
  Matcher m{g, rule, no_consumers, rule.proof && rule.proof->degree_generic, no_options, {}, {}, {}, {}, 0, 0, {}};
  if (!m.attrs_ok(pn, gn)) return false;
  for (size_t j = 0; j < pn.inputs.size(); ++j) {
    if (at >= 0 && static_cast<int>(j) != at) continue;
    const Node& feeder = rule.source.node(pn.inputs[j].node);
    needs[j] = feeder.op->op_class == OpClass::kSource ? std::make_pair(static_cast<const OpDef*>(nullptr), 0)
                                                       : std::make_pair(feeder.op, pn.inputs[j].output);
  }
  return true;
}

bool root_needs(const Graph& g, const Rule& rule, NodeId node, std::vector<RootNeed>& needs) {
  const auto root = rule_root(rule);
  if (!root) {
    needs.assign(g.node(node).inputs.size(), std::nullopt);
    return false;
  }
  return root_needs(g, *root, node, needs);
}

RootNeed root_needs(const Graph& g, const Rule& rule, NodeId node, int input) {
  std::vector<RootNeed> needs;
  if (input < 0 || !root_needs(g, rule, node, needs) || static_cast<size_t>(input) >= needs.size()) return std::nullopt;
  return needs[static_cast<size_t>(input)];
}

std::map<const OpDef*, std::vector<NodeId>> nodes_by_op(const Graph& g) {
  std::map<const OpDef*, std::vector<NodeId>> out;
  for (const Node& n : g.nodes()) out[n.op].push_back(n.id);
  return out;
}

}  // namespace pcgx::search
