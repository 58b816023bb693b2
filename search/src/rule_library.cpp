// Preparing a ruleset for the search (see rule_library.h).
#include "pcgx/search/rule_library.h"

#include <iterator>
#include <set>

#include <tbb/parallel_for.h>

#include "pcgx/rulesets/rule_form.h"
#include "pcgx/search/rank_adapt.h"
#include "pcgx/search/substitution.h"

namespace pcgx::search {
namespace {

struct Shape {
  int compute = 0, parallel = 0;
};
Shape count(const Graph& g) {
  Shape s;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class == OpClass::kCompute) ++s.compute;
    if (n.op->op_class == OpClass::kParallel) ++s.parallel;
  }
  return s;
}

// `g` with node `skip` (one input, one output) left out, its readers
// reading its input instead.
Graph without(const Graph& g, NodeId skip) {
  Graph out(g.name());
  std::vector<std::vector<TensorRef>> at(g.size());
  for (const Node& n : g.nodes()) {
    std::vector<TensorRef> ins;
    for (const TensorRef& t : n.inputs) ins.push_back(at[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]);
    if (n.id == skip) {
      at[static_cast<size_t>(n.id)] = {ins.at(0)};
      continue;
    }
    const NodeId id = out.add_like(g, n.id, std::move(ins));
    for (size_t o = 0; o < n.outputs.size(); ++o) at[static_cast<size_t>(n.id)].push_back({id, static_cast<int32_t>(o)});
  }
  for (const TensorRef& t : g.outputs()) out.add_output(at[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]);
  return out;
}

// The target is the source with one more single-input operator somewhere
// (Relu(x) -> Relu(Relu(x)), the reverse of an idempotence): applying it
// only grows the graph, and the search explored twice the graphs with such
// rules in its library.
bool inflating(const Rule& r, const Shape& a, const Shape& b) {
  if (b.compute != a.compute + 1 || b.parallel != a.parallel) return false;
  const std::string source = graph_text(r.source);
  for (const Node& n : r.target.nodes())
    if (n.op->op_class == OpClass::kCompute && n.inputs.size() == 1 && n.outputs.size() == 1 &&
        graph_text(without(r.target, n.id)) == source)
      return true;
  return false;
}

bool keep(const Rule& r, RuleFilter f) {  // in the index
  const Shape a = count(r.source), b = count(r.target);
  if (a.compute + a.parallel == 0) return false;  // bare source
  if (inflating(r, a, b)) return false;
  if (a.compute == 0 && b.compute == 0 && b.parallel >= a.parallel) return false;
  if (f == RuleFilter::kAlgebraic) return is_algebraic(r);
  if (f == RuleFilter::kParallel) return a.parallel + b.parallel > 0;
  return true;
}

bool introducer(const Rule& r, RuleFilter f) {
  const Shape a = count(r.source), b = count(r.target);
  return f != RuleFilter::kAlgebraic && a.compute + a.parallel == 0 && b.compute == 0 && b.parallel > 0 &&
         r.source.outputs().size() == 1;
}

}  // namespace

bool is_algebraic(const Rule& r) { return count(r.source).parallel == 0 && count(r.target).parallel == 0; }

RuleLibrary::RuleLibrary(const Ruleset& rules, RuleFilter filter) : RuleLibrary(std::span<const Ruleset>(&rules, 1), filter) {}

RuleLibrary::RuleLibrary(std::span<const Ruleset> rulesets, RuleFilter filter) {
  std::vector<const Rule*> all;
  for (const Ruleset& rules : rulesets)
    for (const Rule& r : rules.rules) all.push_back(&r);
  // Each rule's forms are built on every core (the search waits for them),
  // then laid out in the rulesets' order, as one thread would.
  std::vector<std::string> keys(rulesets.size() > 1 ? all.size() : 0);
  tbb::parallel_for(size_t{0}, keys.size(), [&](size_t i) {
    const Rule& r = *all[i];
    keys[i] = rule_content(r) + (r.proof && r.proof->degree_generic ? "|generic" : "");
    if (r.proof)
      for (const std::string& v : r.proof->value_generic) keys[i] += "|" + v;
  });
  // A rule stated alike in two rulesets is kept once, unless their proofs
  // claim different generality (a generic copy must not be hidden by a
  // specific one).
  std::set<std::string> stated;
  std::vector<const Rule*> kept;
  for (size_t i = 0; i < all.size(); ++i)
    if (keys.empty() || stated.insert(std::move(keys[i])).second) kept.push_back(all[i]);
  std::vector<std::vector<Rule>> indexed(kept.size()), bare(kept.size());
  tbb::parallel_for(size_t{0}, kept.size(), [&](size_t i) {
    const Rule& r = *kept[i];
    for (const Rule& d : {r, reversed(r)}) {
      std::vector<Rule> forms{d};
      for (int to : {2, 4})
        if (auto a = adapt_rank(d, to)) forms.push_back(std::move(*a));
      for (Rule& x : forms) {
        if (keep(x, filter)) indexed[i].push_back(std::move(x));
        else if (introducer(x, filter)) bare[i].push_back(std::move(x));
      }
    }
  });
  for (size_t i = 0; i < kept.size(); ++i) {
    std::move(indexed[i].begin(), indexed[i].end(), std::back_inserter(rules_));
    std::move(bare[i].begin(), bare[i].end(), std::back_inserter(bare_));
  }
  index();
}

RuleLibrary RuleLibrary::filtered(RuleFilter f) const {
  RuleLibrary out;
  for (const Rule& r : rules_)
    if (keep(r, f)) out.rules_.push_back(r);
  for (const Rule& r : bare_)
    if (introducer(r, f)) out.bare_.push_back(r);
  out.index();
  return out;
}

void RuleLibrary::index() {
  roots_.clear();
  simplifiers_.clear();
  simplifier_roots_.clear();
  introducers_.clear();
  for (const Rule& r : bare_) introducers_.push_back(&r);
  for (const Rule& r : rules_) {
    const auto root = rule_root(r);
    if (root) roots_[root->op].push_back(*root);
    const Shape a = count(r.source), b = count(r.target);
    if (a.compute == 0 && b.compute == 0 && b.parallel < a.parallel) simplifiers_.push_back(&r), simplifier_roots_.push_back(root);
  }
}

const std::vector<RuleRoot>& RuleLibrary::roots_at(const OpDef* op) const {
  auto it = roots_.find(op);
  return it == roots_.end() ? no_roots_ : it->second;
}

}  // namespace pcgx::search
