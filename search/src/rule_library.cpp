// Preparing a ruleset for the search (see rule_library.h).
#include "pcgx/search/rule_library.h"

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

bool keep(const Rule& r, RuleFilter f) {  // in the index
  const Shape a = count(r.source), b = count(r.target);
  if (a.compute + a.parallel == 0) return false;  // bare source
  if (a.compute == 0 && b.compute == 0 && b.parallel >= a.parallel) return false;
  if (f == RuleFilter::kAlgebraic) return a.parallel == 0 && b.parallel == 0;
  if (f == RuleFilter::kParallel) return a.parallel + b.parallel > 0;
  return true;
}

bool introducer(const Rule& r, RuleFilter f) {
  const Shape a = count(r.source), b = count(r.target);
  return f != RuleFilter::kAlgebraic && a.compute + a.parallel == 0 && b.compute == 0 && b.parallel > 0 &&
         r.source.outputs().size() == 1;
}

}  // namespace

RuleLibrary::RuleLibrary(const Ruleset& rules, RuleFilter filter) {
  for (const Rule& r : rules.rules) {
    for (const Rule& d : {r, reversed(r)}) {
      std::vector<Rule> forms{d};
      for (int to : {2, 4})
        if (auto a = adapt_rank(d, to)) forms.push_back(std::move(*a));
      for (Rule& x : forms) {
        if (keep(x, filter)) rules_.push_back(x);
        else if (introducer(x, filter)) bare_.push_back(x);
      }
    }
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
  by_root_.clear();
  simplifiers_.clear();
  introducers_.clear();
  for (const Rule& r : bare_) introducers_.push_back(&r);
  for (const Rule& r : rules_) {
    for (const TensorRef& o : r.source.outputs()) {
      const Node& root = r.source.node(o.node);
      if (root.op->op_class == OpClass::kSource) continue;
      by_root_[root.op].push_back(&r);
      break;
    }
    const Shape a = count(r.source), b = count(r.target);
    if (a.compute == 0 && b.compute == 0 && b.parallel < a.parallel) simplifiers_.push_back(&r);
  }
}

const std::vector<const Rule*>& RuleLibrary::rooted_at(const OpDef* op) const {
  auto it = by_root_.find(op);
  return it == by_root_.end() ? none_ : it->second;
}

}  // namespace pcgx::search
