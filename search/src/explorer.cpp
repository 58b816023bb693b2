// Neighbours of a PCG (see explorer.h).
#include "explorer.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <mutex>
#include <map>
#include <optional>

#include "pcgx/search/common_subexpressions.h"
#include "pcgx/search/graph_hash.h"

namespace pcgx::search {
namespace {

constexpr size_t kMatchesPerRule = 64;
constexpr int kSimplifySteps = 1000;

}  // namespace

Graph Explorer::simplify(Graph g, std::vector<std::string>* applied) const {
  for (int step = 0; step < kSimplifySteps; ++step) {
    if (auto merged = merge_common_subexpressions(g)) g = std::move(*merged);
    const auto by_op = nodes_by_op(g);
    const auto consumers = g.consumers();
    MatchOptions o;
    o.limit = 4;
    o.by_op = &by_op;
    bool changed = false;
    for (const Rule* r : rules_.simplifiers()) {
      for (const Match& m : find_matches(g, *r, consumers, o)) {
        if (auto h = apply_match(g, m)) {
          g = std::move(*h);
          if (applied) applied->push_back(r->id);
          changed = true;
          break;
        }
      }
      if (changed) break;
    }
    if (!changed) break;
  }
  return g;
}

Candidate Explorer::make(Graph g, std::vector<std::string> applied) const {
  Candidate c;
  c.graph = simplify(std::move(g), &applied);
  c.applied = std::move(applied);
  c.hash = graph_hash(c.graph);
  c.cost = mapper_.time(c.graph);
  ++evaluated;
  return c;
}

std::vector<Candidate> Explorer::expand(const Candidate& c, std::unordered_set<uint64_t>& seen) const {
  const Graph& g = c.graph;
  const auto by_op = nodes_by_op(g);
  const auto consumers = g.consumers();
  MatchOptions o;
  o.limit = kMatchesPerRule;
  o.by_op = &by_op;
  o.free_degrees = degrees_;
  std::vector<Match> matches;
  for (const auto& [op, nodes] : by_op)
    for (const Rule* r : rules_.rooted_at(op))
      for (Match& m : find_matches(g, *r, consumers, o)) matches.push_back(std::move(m));

  // Two-rule steps: an introducer at one input of a compute operator, then
  // a rule matching at that operator.
  struct Intro {
    NodeId node;
    int input;
    const Rule* rule;
    int64_t degree;
  };
  std::vector<Intro> intros;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || rules_.rooted_at(n.op).empty()) continue;
    for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i)
      for (const Rule* r : rules_.introducers())
        for (int64_t d : degrees_) intros.push_back({n.id, i, r, d});
  }

  std::mutex mu;
  std::vector<std::vector<Candidate>> out(matches.size() + intros.size());
  auto finish = [&](Graph h, std::vector<std::string> applied, std::vector<Candidate>& into) {
    Graph s = simplify(std::move(h), &applied);
    if (max_nodes_ > 0 && s.size() > max_nodes_) return;
    const uint64_t hash = graph_hash(s);
    {
      std::lock_guard lock(mu);
      if (!seen.insert(hash).second) return;
    }
    Candidate n;
    n.graph = std::move(s);
    n.applied = std::move(applied);
    n.hash = hash;
    n.cost = mapper_.time(n.graph);
    ++evaluated;
    into.push_back(std::move(n));
  };
  auto label = [](const Match& m) { return m.rule->id + (m.degree != 2 ? "@k" + std::to_string(m.degree) : ""); };
  tbb::parallel_for(size_t{0}, matches.size() + intros.size(), [&](size_t i) {
    if (i < matches.size()) {
      auto h = apply_match(g, matches[i]);
      if (!h) return;
      std::vector<std::string> applied = c.applied;
      applied.push_back(label(matches[i]));
      finish(std::move(*h), std::move(applied), out[i]);
      return;
    }
    const Intro& in = intros[i - matches.size()];
    NodeId at = -1;
    auto g1 = introduce(g, *in.rule, in.node, in.input, in.degree, at);
    if (!g1) return;
    const std::map<const OpDef*, std::vector<NodeId>> only{{g.node(in.node).op, {at}}};
    const auto cons = g1->consumers();
    MatchOptions o1;
    o1.limit = kMatchesPerRule;
    o1.by_op = &only;
    o1.free_degrees = {in.degree};
    for (const Rule* r : rules_.rooted_at(g.node(in.node).op)) {
      for (const Match& m : find_matches(*g1, *r, cons, o1)) {
        auto h = apply_match(*g1, m);
        if (!h) continue;
        std::vector<std::string> applied = c.applied;
        applied.push_back(in.rule->id + "@k" + std::to_string(in.degree));
        applied.push_back(label(m));
        finish(std::move(*h), std::move(applied), out[i]);
      }
    }
  });
  std::vector<Candidate> result;
  for (auto& v : out)
    for (auto& x : v) result.push_back(std::move(x));
  return result;
}

}  // namespace pcgx::search
