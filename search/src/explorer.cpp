// Neighbours of a PCG (see explorer.h).
#include "explorer.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <mutex>
#include <map>
#include <memory>
#include <optional>

#include "pcgx/search/common_subexpressions.h"
#include "pcgx/search/graph_hash.h"

namespace pcgx::search {
namespace {

constexpr size_t kMatchesPerRule = 64;
constexpr int kSimplifySteps = 1000;
constexpr int kMaxRepeats = 256;

std::string label(const Match& m) { return m.rule->id + (m.degree != 2 ? "@k" + std::to_string(m.degree) : ""); }

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

std::optional<Candidate> Explorer::settle(Graph h, std::vector<std::string> applied, std::unordered_set<uint64_t>& seen,
                                          std::mutex& mu) const {
  Graph s = simplify(std::move(h), &applied);
  if (max_nodes_ > 0 && s.size() > max_nodes_) return std::nullopt;
  const uint64_t hash = graph_hash(s);
  {
    std::lock_guard lock(mu);
    if (!seen.insert(hash).second) return std::nullopt;
  }
  Candidate n;
  n.graph = std::move(s);
  n.applied = std::move(applied);
  n.hash = hash;
  n.cost = mapper_.time(n.graph);
  ++evaluated;
  return n;
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
    if (auto n = settle(std::move(h), std::move(applied), seen, mu)) into.push_back(std::move(*n));
  };
  tbb::parallel_for(size_t{0}, matches.size() + intros.size(), [&](size_t i) {
    if (i < matches.size()) {
      auto h = apply_match(g, matches[i]);
      if (!h) return;
      std::vector<std::string> applied = c.applied;
      applied.push_back(label(matches[i]));
      finish(std::move(*h), std::move(applied), out[i]);
      for (Candidate& n : out[i]) n.step = {matches[i].rule, matches[i].degree};
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
        const size_t before = out[i].size();
        finish(std::move(*h), std::move(applied), out[i]);
        if (out[i].size() > before) out[i].back().step = {m.rule, m.degree, in.rule, g.node(in.node).op, in.input};
      }
    }
  });
  std::vector<Candidate> result;
  for (auto& v : out)
    for (auto& x : v) result.push_back(std::move(x));
  return result;
}

Candidate Explorer::repeat(const Candidate& c, std::unordered_set<uint64_t>& seen) const {
  const Candidate::Step& step = c.step;
  if (!step.rule) return c;
  Candidate best = c;
  for (int round = 0; round < kMaxRepeats; ++round) {
    const Graph& g = best.graph;
    // Every place the step applies: (graph after the introducer, match).
    std::vector<std::pair<std::shared_ptr<const Graph>, Match>> places;
    MatchOptions o;
    o.limit = kMatchesPerRule;
    o.free_degrees = {step.degree};
    const auto by_op = nodes_by_op(g);
    if (!step.intro) {
      const auto consumers = g.consumers();
      o.by_op = &by_op;
      auto shared = std::shared_ptr<const Graph>(&g, [](const Graph*) {});
      for (Match& m : find_matches(g, *step.rule, consumers, o))
        if (m.degree == step.degree) places.emplace_back(shared, std::move(m));
    } else if (auto it = by_op.find(step.op); it != by_op.end()) {
      for (NodeId n : it->second) {
        NodeId at = -1;
        auto g1 = introduce(g, *step.intro, n, step.input, step.degree, at);
        if (!g1) continue;
        auto shared = std::make_shared<const Graph>(std::move(*g1));
        const std::map<const OpDef*, std::vector<NodeId>> only{{step.op, {at}}};
        o.by_op = &only;
        for (Match& m : find_matches(*shared, *step.rule, shared->consumers(), o))
          if (m.degree == step.degree) places.emplace_back(shared, std::move(m));
      }
    }
    std::vector<std::optional<Candidate>> next(places.size());
    std::mutex mu;
    tbb::parallel_for(size_t{0}, places.size(), [&](size_t i) {
      auto h = apply_match(*places[i].first, places[i].second);
      if (!h) return;
      std::vector<std::string> applied = best.applied;
      if (step.intro) applied.push_back(step.intro->id + "@k" + std::to_string(step.degree));
      applied.push_back(label(places[i].second));
      next[i] = settle(std::move(*h), std::move(applied), seen, mu);
    });
    std::optional<Candidate> better;
    for (auto& n : next)  // in place order: the first of equally fast ones
      if (n && n->cost < best.cost && (!better || n->cost < better->cost)) better = std::move(n);
    if (better) better->step = step;
    if (!better) break;
    best = std::move(*better);
  }
  return best;
}

}  // namespace pcgx::search
