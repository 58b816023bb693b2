#pragma once
// The substitution engine: find a rule's source pattern in a PCG and replace
// it with the rule's target (docs/design.md, "Search"). A rule is data; this file
// knows nothing of any one rule.
//
// What a match means. The pattern's Input/Weight nodes are variables: each
// binds one tensor of the graph, of any sizes, with the same rank and dtype
// and the same parallel state (degree of every dimension, replica degree).
// The rule's sizes do not matter (rules are checked at several sizes when
// verified); its degrees do: a rule proved for degree 2 matches degree 2
// only, unless its proof record says `degree_generic`, in which case every
// degree 2^a of the rule (inputs, replicas, parallel operators) stands for
// k^a for one k >= 2 per match. Operators match with equal attributes, except
// that a Split's sizes need only be proportional to the rule's, and that a
// value attribute its proof record lists in `value_generic` (a norm's
// epsilon, a dropout's rate and seed: the proof holds for any value,
// verifier/src/value_generic.h) matches any value, the same graph value
// wherever the rule has the same value, and the target takes the graph's
// (Match::values). GPT's 37 dropouts, each with its own seed, thus match
// one rule.
//
// Lifted matches. A data-parallel graph runs the same computation once per
// block of samples, so a rule stated without a split of dimension 0 also
// matches there: each variable binds either a tensor split L more ways on
// dimension 0 (outermost) where the rule states none, or L equal copies
// where the rule states replica 1, one L per match (Match::lift). Such a
// match is taken only where no operator of either side mixes the blocks of
// samples: each compute operator reading a split tensor has a registry
// parallel kind splitting it and its outputs on dimension 0 (copying the
// copies), the parallel operators are Repartition, Combine, Replicate,
// Reduce or AllReduce, and every operator's outputs have the rule's state
// with the L added (search/src/sample_lift.h states the argument). Rules
// then compose with data parallelism: a rule proved on unsplit tensors
// splits the sequence of a layer whose samples are already split (the
// shipped rules state one split at a time).
//
// A match is applicable when no node it replaces is read from outside it
// except through the rule's outputs. Applying it rebuilds the graph with the
// target in place; shapes and degrees are inferred again, and an application
// whose target is not legal there (or whose outputs change parallel shape)
// is refused.
//
// What it preserves: the values of every graph output, whenever the rule
// holds (a test applies every shipped rule at every match in the tiny zoo
// models and compares the reference interpreter before and after).
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/rulesets/ruleset.h"

namespace pcgx::search {

// A value attribute of a value-generic rule (ProofRecord::value_generic)
// as a match found it: the rule's value stands for the graph's, in the
// rule's target too.
struct ValueBinding {
  const OpDef* op = nullptr;
  std::string attr;
  AttrValue rule_value, graph_value;
};

struct Match {
  const Rule* rule = nullptr;
  std::vector<NodeId> nodes;               // per node of rule->source: the graph node (-1 for variables)
  std::map<std::string, TensorRef> vars;   // rule input name -> graph tensor
  int64_t degree = 2;                      // what the rule's degree 2 stands for
  int64_t lift = 1;                        // the samples split it is lifted over (1: none; see below)
  std::vector<ValueBinding> values;        // value-generic attributes (above)
};

// A rule read right to left (rules are equalities; the search uses both
// directions). The id gains a "~" suffix.
Rule reversed(const Rule& rule);

struct MatchOptions {
  size_t limit = SIZE_MAX;
  // Degrees a degree-generic rule's 2 may stand for when the match itself
  // binds none (its source has no parallel state, e.g. Linear(x, W) read as
  // the source of a data-parallel rewrite): one match per degree.
  std::vector<int64_t> free_degrees;
  // Graph nodes per operator (nodes_by_op), to avoid scanning the graph.
  const std::map<const OpDef*, std::vector<NodeId>>* by_op = nullptr;
  // Lifted matches (above) where the samples split times the match's
  // degree is at most this many tasks (the devices: a lifted rule that
  // splits further must fit); 0: the rule's parallel states exactly.
  int64_t lift_tasks = 0;
};

std::map<const OpDef*, std::vector<NodeId>> nodes_by_op(const Graph& g);

// Every applicable match of `rule` in `g`, at most `limit`.
std::vector<Match> find_matches(const Graph& g, const Rule& rule, size_t limit = SIZE_MAX);
// The same with `g.consumers()` computed once by the caller.
std::vector<Match> find_matches(const Graph& g, const Rule& rule,
                                const std::vector<std::vector<std::pair<NodeId, int>>>& consumers,
                                size_t limit = SIZE_MAX);
std::vector<Match> find_matches(const Graph& g, const Rule& rule,
                                const std::vector<std::vector<std::pair<NodeId, int>>>& consumers,
                                const MatchOptions& options);

// A necessary condition, cheap to test, for `rule` to match with its first
// root at `node` once input `input` of `node` reads a new node (an
// introducer's, see below): the root's operator and attributes, and the
// operator feeding each other input. Nothing when it cannot; otherwise
// what must feed `input`: an operator and its output, or (nullptr, 0) for
// anything (a variable in the rule). The search skips the introductions
// no rule can follow.
using RootNeed = std::optional<std::pair<const OpDef*, int>>;
RootNeed root_needs(const Graph& g, const Rule& rule, NodeId node, int input);
// The same for every input of `node` at once (the root's operator and
// attributes tested once, not once per input): needs[i] is what must feed
// input i, empty where another input already rules the rule out. False
// when no input can be changed for the rule to match.
bool root_needs(const Graph& g, const Rule& rule, NodeId node, std::vector<RootNeed>& needs);

// What a rule's first computed output (its root) asks of the node it
// matches at, copied out of the rule's graph: the search tries thousands of
// rules at each node, and reading this array instead of each rule's graph
// is most of what trying a rule costs. feeders[i]: the operator and output
// feeding input i (nullptr: a variable, anything); only the first
// kRootFeeders inputs are kept, the rest taken as anything.
inline constexpr size_t kRootFeeders = 4;
struct RuleRoot {
  const Rule* rule = nullptr;
  const Node* node = nullptr;  // in rule->source
  const OpDef* op = nullptr;   // node->op
  int output = 0;
  size_t arity = 0;
  std::array<std::pair<const OpDef*, int>, kRootFeeders> feeders{};
};
// Nothing when every output of the rule's source is a variable.
std::optional<RuleRoot> rule_root(const Rule& rule);
// How many of node's inputs are fed otherwise than the root asks (a
// necessary condition for a match at `node` is 0; for one after changing
// one input, at most 1); SIZE_MAX when the operator or arity differs.
size_t feeders_missed(const Graph& g, const RuleRoot& root, NodeId node, int* at = nullptr);
// root_needs from the copied root.
bool root_needs(const Graph& g, const RuleRoot& root, NodeId node, std::vector<RootNeed>& needs);

// Rules whose source is a bare tensor (x => Combine(Repartition(x))) match
// everywhere; the search uses them only at one operator's input, as the
// first half of a two-rule step. This rewrites input `input` of node
// `consumer` (its other readers keep x), with the rule's degree 2 standing
// for `degree`; nothing when x's parallel state is not the rule's (or,
// with `lift_tasks`, the rule's lifted as a match may be, see above). The
// consumer's id in the result is stored in `new_consumer`.
std::optional<Graph> introduce(const Graph& g, const Rule& rule, NodeId consumer, int input, int64_t degree,
                               NodeId& new_consumer, int64_t lift_tasks = 0);

// `g` with the match replaced by the rule's target, or nothing when the
// target is not legal at that place.
std::optional<Graph> apply_match(const Graph& g, const Match& m);

}  // namespace pcgx::search
