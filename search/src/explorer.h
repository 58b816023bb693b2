#pragma once
// The inner loop shared by the best-first and exhaustive searches
// (internal; see unity_search.h): neighbours of a PCG under a rule library.
#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/substitution.h"

namespace pcgx::search {

struct Candidate {
  Graph graph;
  double cost = 0;
  std::vector<std::string> applied;
  uint64_t hash = 0;
  // The step that made this candidate from its parent, for repeat(): a
  // rule at one match, or (with `intro`) an introducer at input `input` of
  // an operator of kind `op` and then the rule at that operator. Null rule
  // for seeds.
  struct Step {
    const Rule* rule = nullptr;
    int64_t degree = 2;
    const Rule* intro = nullptr;
    const OpDef* op = nullptr;
    int input = 0;
  } step;
};

class Explorer {
 public:
  // `max_nodes` > 0 bounds the space: neighbours with more nodes are
  // dropped before they are costed (the exhaustive search needs a finite
  // space; introducers can grow a graph without end). `fixed` (optional,
  // outliving the explorer): names of compute operators no step rewrites
  // (a plan's stated operators): no match includes one, no introducer
  // partitions one's input and no merge of common subexpressions drops
  // one, so each keeps its node, inputs' layouts and task grid.
  Explorer(const RuleLibrary& rules, const MachineMapper& mapper, std::vector<int64_t> degrees, size_t max_nodes = 0,
           const std::set<std::string>* fixed = nullptr)
      : rules_(rules), mapper_(mapper), degrees_(std::move(degrees)), max_nodes_(max_nodes), fixed_(fixed) {}

  // Merges common subexpressions and applies simplifiers until neither
  // changes anything; records the simplifiers' ids.
  Graph simplify(Graph g, std::vector<std::string>* applied = nullptr) const;
  Candidate make(Graph g, std::vector<std::string> applied) const;
  // Every new neighbour of `c` (one rule application, then simplification)
  // whose hash `seen` does not hold yet; `seen` gains them. Thread-parallel.
  std::vector<Candidate> expand(const Candidate& c, std::unordered_set<uint64_t>& seen) const;
  // Applies c's step again, at its best place each round, while that makes
  // the PCG faster: a model of repeated layers (sixteen identical Linears)
  // needs the same rewrite once per layer, which one exploration at a time
  // would spend the whole budget on. Returns c itself when no round helps.
  // The graphs it costs join `seen`.
  Candidate repeat(const Candidate& c, std::unordered_set<uint64_t>& seen) const;

  // One neighbour of `g` drawn at random among expand()'s steps (a rule at
  // one match, or an introducer and a rule), simplified and not costed;
  // nothing when the drawn step does not apply there. `draw` picks the
  // step. The step's ids are appended to `applied`.
  std::optional<Graph> random_neighbour(const Graph& g, uint64_t draw, std::vector<std::string>& applied) const;

  mutable std::atomic<int64_t> evaluated{0};

 private:
  // Lifted matches (substitution.h) are taken where they fit the devices,
  // in a graph that already splits some activation other than by samples
  // (a tensor- or sequence-parallel plan inside data parallelism, where
  // the rules then split further). In a graph split by samples alone, the
  // lifted rules would re-derive model parallelism inside data
  // parallelism that the search reaches from the unsplit model and the
  // expert's seed; on the CNNs and the MLP they found no faster plan and
  // doubled the search time.
  int64_t lift_tasks(const Graph& g) const;
  // An introducer at input `input` of `node`, then one of `followers`.
  struct Intro {
    NodeId node;
    int input;
    const Rule* rule;
    int64_t degree;
    const std::vector<const Rule*>* followers;  // the rules that may match after it
  };
  // Every step from `g`: single-rule matches and introductions.
  struct Steps {
    std::vector<Match> matches;
    std::vector<Intro> intros;
    std::deque<std::vector<const Rule*>> follower_lists;  // stable addresses
  };
  void steps(const Graph& g, Steps& out) const;

  // Simplifies and costs a neighbour made by `step`, unless `seen`
  // (guarded by mu) has it.
  std::optional<Candidate> settle(Graph h, std::vector<std::string> applied, const Candidate::Step& step,
                                  std::unordered_set<uint64_t>& seen, std::mutex& mu) const;

  // Whether node `n` of `g` is fixed, or match `m` in `g` includes one.
  bool fixed(const Graph& g, NodeId n) const;
  bool touches_fixed(const Graph& g, const Match& m) const;
  // How many fixed operators `g` holds: a merge of common subexpressions
  // that would drop one of two alike is not made.
  size_t fixed_count(const Graph& g) const;

  const RuleLibrary& rules_;
  const MachineMapper& mapper_;
  std::vector<int64_t> degrees_;
  size_t max_nodes_;
  const std::set<std::string>* fixed_;
};

}  // namespace pcgx::search
