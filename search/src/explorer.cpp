// Neighbours of a PCG (see explorer.h).
#include "explorer.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <span>

#include "pcgx/search/applied_rule.h"
#include "pcgx/search/common_subexpressions.h"
#include "pcgx/search/graph_hash.h"

namespace pcgx::search {
namespace {

constexpr size_t kMatchesPerRule = 64;
constexpr int kSimplifySteps = 1000;

// Whether some node of the root's operator (`nodes`) is fed as the rule's
// root is: a match needs one, and most rules are ruled out by it without
// reading their graphs.
bool fed_somewhere(const Graph& g, const RuleRoot& root, const std::vector<NodeId>& nodes) {
  return std::any_of(nodes.begin(), nodes.end(), [&](NodeId n) { return feeders_missed(g, root, n) == 0; });
}
constexpr int kMaxRepeats = 256;

std::string intro_label(const Rule& intro, int64_t degree) { return intro.id + "@k" + std::to_string(degree); }

// The first half of a two-rule step: `g` with introducer `intro` at input
// `input` of `node`, and the matches of `rules` at that node.
struct Introduced {
  Graph graph;
  std::vector<Match> matches;
};

std::optional<Introduced> introduce_and_match(const Graph& g, const Rule& intro, NodeId node, int input, int64_t degree,
                                              std::span<const Rule* const> rules, int64_t lift_tasks) {
  NodeId at = -1;
  auto g1 = introduce(g, intro, node, input, degree, at, lift_tasks);
  if (!g1) return std::nullopt;
  Introduced out{std::move(*g1), {}};
  const std::map<const OpDef*, std::vector<NodeId>> only{{g.node(node).op, {at}}};
  const auto consumers = out.graph.consumers();
  MatchOptions o;
  o.limit = kMatchesPerRule;
  o.by_op = &only;
  o.free_degrees = {degree};
  o.lift_tasks = lift_tasks;
  for (const Rule* r : rules)
    for (Match& m : find_matches(out.graph, *r, consumers, o)) out.matches.push_back(std::move(m));
  return out;
}

}  // namespace

int64_t Explorer::lift_tasks(const Graph& g) const {
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute) continue;
    for (const ParallelTensorShape& s : n.outputs)
      for (size_t d = 1; d < s.dims.size(); ++d)
        if (s.dims[d].degree > 1) return mapper_.cost().devices();
  }
  return 0;
}

bool Explorer::fixed(const Graph& g, NodeId n) const {
  if (!fixed_ || fixed_->empty()) return false;
  const Node& node = g.node(n);
  return node.op->op_class == OpClass::kCompute && fixed_->count(node.name) > 0;
}

size_t Explorer::fixed_count(const Graph& g) const {
  if (!fixed_ || fixed_->empty()) return 0;
  size_t n = 0;
  for (const Node& node : g.nodes()) n += fixed(g, node.id);
  return n;
}

bool Explorer::touches_fixed(const Graph& g, const Match& m) const {
  if (!fixed_ || fixed_->empty()) return false;
  return std::any_of(m.nodes.begin(), m.nodes.end(), [&](NodeId n) { return n >= 0 && fixed(g, n); });
}

Graph Explorer::simplify(Graph g, std::vector<std::string>* applied) const {
  for (int step = 0; step < kSimplifySteps; ++step) {
    if (auto merged = merge_common_subexpressions(g); merged && fixed_count(*merged) == fixed_count(g)) g = std::move(*merged);
    const auto by_op = nodes_by_op(g);
    const auto consumers = g.consumers();
    MatchOptions o;
    o.limit = 4;
    o.by_op = &by_op;
    o.lift_tasks = lift_tasks(g);
    bool changed = false;
    const auto& simplifiers = rules_.simplifiers();
    for (size_t i = 0; i < simplifiers.size() && !changed; ++i) {
      if (const auto& root = rules_.simplifier_roots()[i]) {
        const auto at = by_op.find(root->op);
        if (at == by_op.end() || !fed_somewhere(g, *root, at->second)) continue;
      }
      const Rule* r = simplifiers[i];
      for (const Match& m : find_matches(g, *r, consumers, o)) {
        if (touches_fixed(g, m)) continue;
        if (auto h = apply_match(g, m)) {
          g = std::move(*h);
          if (applied) applied->push_back(r->id);
          changed = true;
          break;
        }
      }
    }
    if (!changed) break;
  }
  return g;
}

std::optional<Candidate> Explorer::settle(Graph h, std::vector<std::string> applied, const Candidate::Step& step,
                                          std::unordered_set<uint64_t>& seen, std::mutex& mu) const {
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
  n.step = step;
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

void Explorer::steps(const Graph& g, Steps& out) const {
  const auto by_op = nodes_by_op(g);
  const auto consumers = g.consumers();
  MatchOptions o;
  o.limit = kMatchesPerRule;
  o.by_op = &by_op;
  o.free_degrees = degrees_;
  o.lift_tasks = lift_tasks(g);
  for (const auto& [op, nodes] : by_op)
    for (const RuleRoot& root : rules_.roots_at(op)) {
      if (!fed_somewhere(g, root, nodes)) continue;
      for (Match& m : find_matches(g, *root.rule, consumers, o))
        if (!touches_fixed(g, m)) out.matches.push_back(std::move(m));
    }

  // Two-rule steps: an introducer at one input of a compute operator, then
  // a rule matching at that operator.
  std::vector<std::vector<std::pair<const Rule*, std::pair<const OpDef*, int>>>> needs_at;  // per input
  std::vector<RootNeed> each;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || rules_.roots_at(n.op).empty() || fixed(g, n.id)) continue;
    needs_at.resize(std::max(needs_at.size(), n.inputs.size()));
    for (auto& v : needs_at) v.clear();
    for (const RuleRoot& x : rules_.roots_at(n.op))
      if (root_needs(g, x, n.id, each))
        for (size_t i = 0; i < each.size(); ++i)
          if (each[i]) needs_at[i].emplace_back(x.rule, *each[i]);
    for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
      const auto& needs = needs_at[static_cast<size_t>(i)];
      if (needs.empty()) continue;
      for (const Rule* r : rules_.introducers()) {
        const TensorRef t = r->target.outputs()[0];
        const std::pair<const OpDef*, int> made{r->target.node(t.node).op, t.output};
        std::vector<const Rule*> followers;
        for (const auto& [x, need] : needs)
          if (!need.first || need == made) followers.push_back(x);
        if (followers.empty()) continue;
        const auto* list = &out.follower_lists.emplace_back(std::move(followers));
        for (int64_t d : degrees_) out.intros.push_back({n.id, i, r, d, list});
      }
    }
  }
}

std::optional<Graph> Explorer::random_neighbour(const Graph& g, uint64_t draw, std::vector<std::string>& applied) const {
  Steps st;
  steps(g, st);
  const size_t total = st.matches.size() + st.intros.size();
  if (total == 0) return std::nullopt;
  const size_t i = static_cast<size_t>(draw % total);
  std::optional<Graph> h;
  if (i < st.matches.size()) {
    h = apply_match(g, st.matches[i]);
    if (h) applied.push_back(applied_label(g, st.matches[i]));
  } else {
    const Intro& in = st.intros[i - st.matches.size()];
    auto g1 = introduce_and_match(g, *in.rule, in.node, in.input, in.degree, *in.followers, lift_tasks(g));
    if (g1) std::erase_if(g1->matches, [&](const Match& m) { return touches_fixed(g1->graph, m); });
    if (!g1 || g1->matches.empty()) return std::nullopt;
    const Match& m = g1->matches[static_cast<size_t>((draw / total) % g1->matches.size())];
    h = apply_match(g1->graph, m);
    if (h) applied.push_back(intro_label(*in.rule, in.degree)), applied.push_back(applied_label(g1->graph, m));
  }
  if (!h) return std::nullopt;
  return simplify(std::move(*h), &applied);
}

std::vector<Candidate> Explorer::expand(const Candidate& c, std::unordered_set<uint64_t>& seen) const {
  const Graph& g = c.graph;
  Steps st;
  steps(g, st);
  const std::vector<Match>& matches = st.matches;
  const std::vector<Intro>& intros = st.intros;

  std::mutex mu;
  std::vector<std::vector<Candidate>> out(matches.size() + intros.size());
  auto finish = [&](Graph h, std::vector<std::string> applied, const Candidate::Step& step, std::vector<Candidate>& into) {
    if (auto n = settle(std::move(h), std::move(applied), step, seen, mu)) into.push_back(std::move(*n));
  };
  tbb::parallel_for(size_t{0}, matches.size() + intros.size(), [&](size_t i) {
    if (i < matches.size()) {
      auto h = apply_match(g, matches[i]);
      if (!h) return;
      std::vector<std::string> applied = c.applied;
      applied.push_back(applied_label(g, matches[i]));
      finish(std::move(*h), std::move(applied), {matches[i].rule, matches[i].degree}, out[i]);
      return;
    }
    const Intro& in = intros[i - matches.size()];
    const OpDef* op = g.node(in.node).op;
    const auto g1 = introduce_and_match(g, *in.rule, in.node, in.input, in.degree, *in.followers, lift_tasks(g));
    if (!g1) return;
    for (const Match& m : g1->matches) {
      if (touches_fixed(g1->graph, m)) continue;
      auto h = apply_match(g1->graph, m);
      if (!h) continue;
      std::vector<std::string> applied = c.applied;
      applied.push_back(intro_label(*in.rule, in.degree));
      applied.push_back(applied_label(g1->graph, m));
      finish(std::move(*h), std::move(applied), {m.rule, m.degree, in.rule, op, in.input}, out[i]);
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
    // Every place the step applies: the graph it applies to (g, or g after
    // the introducer) and the match.
    std::deque<Graph> introduced;
    std::vector<std::pair<const Graph*, Match>> places;
    const auto by_op = nodes_by_op(g);
    if (!step.intro) {
      const auto consumers = g.consumers();
      MatchOptions o;
      o.limit = kMatchesPerRule;
      o.by_op = &by_op;
      o.lift_tasks = lift_tasks(g);
      o.free_degrees = {step.degree};
      for (Match& m : find_matches(g, *step.rule, consumers, o))
        if (m.degree == step.degree && !touches_fixed(g, m)) places.emplace_back(&g, std::move(m));
    } else if (auto it = by_op.find(step.op); it != by_op.end()) {
      const TensorRef t = step.intro->target.outputs()[0];
      for (NodeId n : it->second) {
        if (fixed(g, n)) continue;
        const auto need = root_needs(g, *step.rule, n, step.input);
        if (!need || (need->first && *need != std::make_pair(step.intro->target.node(t.node).op, t.output))) continue;
        auto g1 = introduce_and_match(g, *step.intro, n, step.input, step.degree, std::span(&step.rule, 1), lift_tasks(g));
        if (!g1) continue;
        const Graph* at = &introduced.emplace_back(std::move(g1->graph));
        for (Match& m : g1->matches)
          if (m.degree == step.degree && !touches_fixed(*at, m)) places.emplace_back(at, std::move(m));
      }
    }
    std::vector<std::optional<Candidate>> next(places.size());
    std::mutex mu;
    tbb::parallel_for(size_t{0}, places.size(), [&](size_t i) {
      auto h = apply_match(*places[i].first, places[i].second);
      if (!h) return;
      std::vector<std::string> applied = best.applied;
      if (step.intro) applied.push_back(intro_label(*step.intro, step.degree));
      applied.push_back(applied_label(*places[i].first, places[i].second));
      next[i] = settle(std::move(*h), std::move(applied), step, seen, mu);
    });
    std::optional<Candidate> better;
    for (auto& n : next)  // in place order: the first of equally fast ones
      if (n && n->cost < best.cost && (!better || n->cost < better->cost)) better = std::move(n);
    if (!better) break;
    best = std::move(*better);
  }
  return best;
}

}  // namespace pcgx::search
