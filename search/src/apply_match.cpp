// Replacing a match by the rule's target (see substitution.h).
#include <cctype>
#include <functional>
#include <numeric>
#include <unordered_set>

#include "degree_map.h"
#include "pcgx/pcg/error.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/substitution.h"
#include "sample_lift.h"

namespace pcgx::search {
namespace {

// A target node's attributes at the match: degrees mapped, parts of an
// extent (Split's sizes) proportional to the extent they now split.
Attributes target_attrs(const Node& tn, const Match& m, const Graph& out, const std::vector<TensorRef>& ins) {
  Attributes a = tn.attrs;
  for (const AttrSpec& spec : tn.op->attrs) {
    if (spec.role == AttrRole::kDegree) {
      a.set(spec.name, map_degree(a.get_int(spec.name), m.degree));
    } else if (spec.role == AttrRole::kValue && a.has(spec.name)) {
      for (const ValueBinding& b : m.values)
        if (b.op == tn.op && b.attr == spec.name && b.rule_value == a.at(spec.name)) {
          a.set(spec.name, b.graph_value);
          break;
        }
    } else if (spec.role == AttrRole::kExtentParts) {
      const IntList& rule_parts = a.get_ints(spec.name);
      const auto& s = out.shape(ins[0]);
      const int64_t axis = a.get_int("axis");
      const int64_t extent = axis < 0 ? s.replica : s.dims.at(static_cast<size_t>(axis)).size;
      const int64_t total = std::accumulate(rule_parts.begin(), rule_parts.end(), int64_t{0});
      IntList parts;
      for (int64_t x : rule_parts) {
        if ((x * extent) % total) throw Error(tn.op->name + " " + spec.name + " do not scale to the extent");
        parts.push_back(x * extent / total);
      }
      a.set(spec.name, parts);
    }
  }
  return a;
}

}  // namespace

Rule reversed(const Rule& rule) {
  Rule r = rule;
  r.id = rule.id + "~";
  std::swap(r.source, r.target);
  for (auto& [a, b] : r.output_map) std::swap(a, b);
  return r;
}

std::optional<Graph> apply_match(const Graph& g, const Match& m) {
  const Rule& rule = *m.rule;
  std::vector<char> replaced(g.size(), 0);
  for (NodeId n : m.nodes)
    if (n >= 0) replaced[static_cast<size_t>(n)] = 1;

  Graph out(g.name());
  std::vector<std::vector<TensorRef>> done(g.size());  // new refs of each emitted graph node's outputs
  std::vector<char> state(g.size(), 0);                // 0 new, 1 in progress, 2 emitted
  std::vector<TensorRef> target_out;                   // new refs of the target's outputs
  int target_state = 0;

  std::function<TensorRef(TensorRef)> ref;
  std::function<void(NodeId)> emit;
  // A target operator that is the only one of its kind on both sides is
  // the source's, rewritten: it keeps the graph node's name, so that the
  // model's operators stay nameable in a rewritten plan (`pcgx plan show`
  // selects them by name) and in reports.
  struct Carried {
    const OpDef* op;
    int source = 0, target = 0;
    std::string name;  // the last matched graph node's of that kind
  };
  std::vector<Carried> carried;
  auto kind = [&](const OpDef* op) -> Carried& {
    for (Carried& c : carried)
      if (c.op == op) return c;
    return carried.emplace_back(Carried{op});
  };
  for (const Node& pn : rule.source.nodes())
    if (pn.op->op_class == OpClass::kCompute) {
      Carried& c = kind(pn.op);
      ++c.source, c.name = g.node(m.nodes[static_cast<size_t>(pn.id)]).name;
    }
  for (const Node& tn : rule.target.nodes())
    if (tn.op->op_class == OpClass::kCompute) ++kind(tn.op).target;
  // Any other operator an algebraic rule makes (the Linear of two fused
  // ones, the Concat of their weights) is named after the first operator
  // the rule matched, with its own kind ("a.query.linear", a second one
  // "a.query.linear2", the first number no operator of the graph has), so
  // that a plan can state the rewrite and what it made (user_plan.h's
  // PlanRewrite) and a later rewrite of it names where.
  std::string base;
  const bool algebraic = is_algebraic(rule);
  for (const Node& pn : rule.source.nodes())
    if (pn.op->op_class == OpClass::kCompute && base.empty()) base = g.node(m.nodes[static_cast<size_t>(pn.id)]).name;
  std::unordered_set<std::string> taken;  // (built when first needed)
  auto name_of = [&](const Node& tn) {
    const Carried& c = kind(tn.op);
    if (c.source == 1 && c.target == 1) return c.name;
    if (!algebraic || base.empty()) return std::string();
    if (taken.empty())
      for (const Node& n : g.nodes()) taken.insert(n.name);
    std::string stem = base + ".";
    for (const char x : tn.op->name) stem += static_cast<char>(std::tolower(static_cast<unsigned char>(x)));
    std::string name = stem;
    for (int k = 2; taken.contains(name); ++k) name = stem + std::to_string(k);
    taken.insert(name);
    return name;
  };
  std::function<void()> emit_target = [&] {
    if (target_state == 2) return;
    if (target_state == 1) throw Error("the rule would create a cycle");
    target_state = 1;
    std::vector<std::vector<TensorRef>> node_outs(rule.target.size());
    std::vector<std::vector<Lifted>> lifted(rule.target.size());  // a lifted match's (sample_lift.h)
    for (const Node& tn : rule.target.nodes()) {
      if (tn.op->op_class == OpClass::kSource) {
        auto v = m.vars.find(tn.name);
        if (v == m.vars.end()) throw Error("the target reads an input the source does not bind");
        node_outs[static_cast<size_t>(tn.id)] = {ref(v->second)};
        if (m.lift > 1)  // the match checked the source's variables (pattern_match.cpp)
          lifted[static_cast<size_t>(tn.id)] = {lifted_as(tn.outputs[0], g.shape(v->second), m.degree, m.lift).value_or(Lifted::kCopies)};
        continue;
      }
      std::vector<TensorRef> ins;
      std::vector<Lifted> in_lift;
      for (const TensorRef& i : tn.inputs) {
        ins.push_back(node_outs[static_cast<size_t>(i.node)][static_cast<size_t>(i.output)]);
        if (m.lift > 1) in_lift.push_back(lifted[static_cast<size_t>(i.node)][static_cast<size_t>(i.output)]);
      }
      const NodeId id = out.add(*tn.op, target_attrs(tn, m, out, ins), ins, name_of(tn));
      for (size_t o = 0; o < out.node(id).outputs.size(); ++o) node_outs[static_cast<size_t>(tn.id)].push_back({id, static_cast<int32_t>(o)});
      if (m.lift > 1) {
        const auto l = lift_node(tn, out, id, in_lift, m.degree, m.lift);
        if (!l) throw Error("the lifted target mixes blocks of samples");
        lifted[static_cast<size_t>(tn.id)].assign(tn.outputs.size(), *l);
      }
    }
    for (const TensorRef& o : rule.target.outputs()) target_out.push_back(node_outs[static_cast<size_t>(o.node)][static_cast<size_t>(o.output)]);
    target_state = 2;
  };
  ref = [&](TensorRef t) -> TensorRef {
    if (replaced[static_cast<size_t>(t.node)]) {
      emit_target();
      const auto& souts = rule.source.outputs();
      for (const auto& [i, j] : rule.output_map) {
        const TensorRef so = souts[static_cast<size_t>(i)];
        if (m.nodes[static_cast<size_t>(so.node)] == t.node && so.output == t.output) {
          const TensorRef n = target_out[static_cast<size_t>(j)];
          if (!(out.shape(n) == g.shape(t))) throw Error("the target changes an output's parallel shape");
          return n;
        }
      }
      throw Error("a replaced tensor is read outside the match");
    }
    emit(t.node);
    return done[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)];
  };
  emit = [&](NodeId id) {
    auto& st = state[static_cast<size_t>(id)];
    if (st == 2) return;
    if (st == 1) throw Error("the rule would create a cycle");
    st = 1;
    const Node& n = g.node(id);
    std::vector<TensorRef> ins;
    for (const TensorRef& i : n.inputs) ins.push_back(ref(i));
    const NodeId nid = out.add_like(g, id, std::move(ins));
    for (size_t o = 0; o < n.outputs.size(); ++o) done[static_cast<size_t>(id)].push_back({nid, static_cast<int32_t>(o)});
    st = 2;
  };

  try {
    for (const Node& n : g.nodes())
      if (!replaced[static_cast<size_t>(n.id)]) emit(n.id);
    for (const TensorRef& o : g.outputs()) out.add_output(ref(o));
  } catch (const Error&) {
    return std::nullopt;
  }
  return out;
}

std::optional<Graph> introduce(const Graph& g, const Rule& rule, NodeId consumer, int input, int64_t degree,
                               NodeId& new_consumer, int64_t lift_tasks) {
  const auto& vars = rule.source.nodes();
  if (vars.size() != 1 || rule.source.outputs().size() != 1) return std::nullopt;
  const Node& var = vars[0];
  const TensorRef x = g.node(consumer).inputs.at(static_cast<size_t>(input));
  const ParallelTensorShape& want = var.outputs[0];
  const ParallelTensorShape& have = g.shape(x);
  const bool generic = rule.proof && rule.proof->degree_generic;
  int64_t k = degree;
  if (want.rank() != have.rank() || want.dtype != have.dtype) return std::nullopt;
  bool exact = true;
  for (int d = 0; d < want.rank(); ++d)
    if (have.dims[static_cast<size_t>(d)].pipeline != 1 ||
        !match_degree(want.dims[static_cast<size_t>(d)].degree, have.dims[static_cast<size_t>(d)].degree, generic, k))
      exact = false;
  if (!match_degree(want.replica, have.replica, generic, k) || k != degree) exact = false;
  // Or lifted over a samples split (sample_lift.h): x split on dimension 0
  // or copied where the rule states neither.
  int64_t lift = 1;
  std::optional<Lifted> how;
  if (!exact) {
    if (!generic && degree != 2) return std::nullopt;
    if (want.rank() > 0 && want.dims[0].degree == 1 && lifted_state_is(want, have, degree, have.dims[0].degree, Lifted::kSamples))
      how = Lifted::kSamples, lift = have.dims[0].degree;
    else if (want.replica == 1 && lifted_state_is(want, have, degree, have.replica, Lifted::kCopies) && all_copies(g, x))
      how = Lifted::kCopies, lift = have.replica;
    if (!how || lift < 2 || lift * degree > lift_tasks) return std::nullopt;
  }
  Match m{&rule, {-1}, {{var.name, x}}, degree, lift};
  Graph out(g.name());
  std::vector<std::vector<TensorRef>> map(g.size());
  try {
    for (const Node& n : g.nodes()) {
      std::vector<TensorRef> ins;
      for (const TensorRef& i : n.inputs) ins.push_back(map[static_cast<size_t>(i.node)][static_cast<size_t>(i.output)]);
      if (n.id == consumer) {
        // Per target node, its outputs (a Split has several: each reader
        // takes the one it names).
        std::vector<std::vector<TensorRef>> node_outs(rule.target.size());
        std::vector<Lifted> node_lift(rule.target.size(), how.value_or(Lifted::kSamples));
        for (const Node& tn : rule.target.nodes()) {
          if (tn.op->op_class == OpClass::kSource) {
            node_outs[static_cast<size_t>(tn.id)] = {ins[static_cast<size_t>(input)]};
            continue;
          }
          std::vector<TensorRef> tins;
          std::vector<Lifted> tlift;
          for (const TensorRef& i : tn.inputs) {
            tins.push_back(node_outs[static_cast<size_t>(i.node)].at(static_cast<size_t>(i.output)));
            tlift.push_back(node_lift[static_cast<size_t>(i.node)]);
          }
          const NodeId id = out.add(*tn.op, target_attrs(tn, m, out, tins), tins);
          for (size_t o = 0; o < out.node(id).outputs.size(); ++o) node_outs[static_cast<size_t>(tn.id)].push_back({id, static_cast<int32_t>(o)});
          if (how) {
            const auto l = lift_node(tn, out, id, tlift, degree, lift);
            if (!l) return std::nullopt;
            node_lift[static_cast<size_t>(tn.id)] = *l;
          }
        }
        const TensorRef ro = rule.target.outputs()[0];
        const TensorRef t = node_outs[static_cast<size_t>(ro.node)].at(static_cast<size_t>(ro.output));
        if (!(out.shape(t) == have)) return std::nullopt;
        ins[static_cast<size_t>(input)] = t;
      }
      const NodeId id = out.add_like(g, n.id, std::move(ins));
      if (n.id == consumer) new_consumer = id;
      for (size_t o = 0; o < n.outputs.size(); ++o) map[static_cast<size_t>(n.id)].push_back({id, static_cast<int32_t>(o)});
    }
    for (const TensorRef& o : g.outputs()) out.add_output(map[static_cast<size_t>(o.node)][static_cast<size_t>(o.output)]);
  } catch (const Error&) {
    return std::nullopt;
  }
  return out;
}

}  // namespace pcgx::search
