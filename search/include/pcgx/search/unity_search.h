#pragma once
// Unity's joint optimization (Unity, Sections 4-6; docs/design.md "Search"):
// substitution selection by best-first search over PCGs, each candidate
// costed by the machine-mapping DP (machine_mapping.h); and the two
// searches built from its machinery, `sequential` and `exhaustive`. Each is
// one algorithm behind search.h's optimize().
//
// `unity` first runs the algebraic rules alone on the whole model (as
// `sequential` does) and starts the joint search below from the result, so
// rewrites that span graph-splitting pieces are not lost; the model's own
// baselines remain candidates.
//
// Best-first search. Start from each seed PCG in turn (the model, and for
// `unity` also the data-parallel and expert baselines, which lie in its
// search space anyway), each with a share of the budget. Repeatedly take the cheapest unexplored candidate,
// apply every rule of the library at every match (a degree-generic rule
// whose source fixes no degree is tried with every candidate degree),
// also apply two-rule steps (an introducer such as x => Combine(Repartition
// x) at one operator input, then a rule at that operator: the shipped rules
// state parallelization relative to an already partitioned input),
// simplify (rule_library.h), and keep each new PCG whose predicted time is
// below alpha x the best so far. Stops after `budget` candidates have been
// explored or when none is left. When an exploration sets a new best, the
// step that made it (one rule at one match, or an introducer and a rule at
// one operator input) is applied again at its best place, round after
// round, while the PCG gets faster, and the result joins the candidates:
// repeated layers need the same rewrite once each, and one exploration per
// layer would spend the budget on the first few (a 16-layer MLP reached
// data parallelism's time at budget 12 without it, 1.90x faster with it).
// These rounds are costed but not counted against the budget.
//
// Graph splitting. A model with more than 2k compute operators is cut into
// sequential pieces of at least k, at tensors every later operator reaches
// only through them, preferring cuts that block the fewest rule matches.
// Each piece is searched once per boundary layout (unpartitioned, or the
// sample dimension split by all devices or by one eighth of them; replica
// degree 1), with
// the same layout on both sides; a chain DP then picks one layout per
// piece, paying for the parallel operators that change layout between
// pieces. Identical pieces (the layers of a transformer) are searched once.
//
// What it preserves: every candidate computes the model's outputs (each
// step is a verified rule or a layout change that is an identity).
#include <cstdint>
#include <vector>

#include "pcgx/search/search.h"

namespace pcgx::search {

// Algorithm::kUnity: the best-first search above from the model, its
// algebraic rewrite and the baselines, the result chosen as
// options.rank says.
SearchResult unity_search(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options);

// Algorithm::kUnity with a plan (user_plan.h): the operators its rules
// select run as it states, fixed (no step rewrites them), and the best-first
// search above explores the rest from the plan lowered as stated (the rest
// as one task each) and from the plan with the rest split by samples over
// every device (where that lowers). No graph splitting and no baselines
// (they ignore the plan). Throws pcgx::Error where a stated operator would
// not run as stated in the result (a guard: the explorer never rewrites
// one).
SearchResult plan_search(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options);

// Algorithm::kSequential: the algebraic rules alone, then the parallel ones
// from the best algebraic PCG (TASO then FlexFlow, as Unity's evaluation
// compares).
SearchResult sequential_search(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options);

// Algorithm::kExhaustive: every PCG reachable from the model and the
// baselines by steps of the unity search (one rule, or an introducer and a
// rule, then simplification) that has at most options.exhaustive_max_nodes
// nodes, by default the model's nodes plus one per input or weight plus one
// (room for the data-parallel strategy: a parallel operator on every source
// and a Reduce of the loss). Without a bound the space is infinite
// (introducers grow a graph without end), and each extra node multiplies
// it: for a 2-layer MLP on 2 devices the default 12 holds 117 PCGs, 13
// about 5,000. It visits the space breadth-first and throws FieldError
// (SearchOptions.exhaustive_limit) if it holds more than
// options.exhaustive_limit PCGs.
SearchResult exhaustive_search(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options);

// The pieces graph splitting cuts `g` into (node ids of g per piece, in
// order), for tests and reports.
std::vector<std::vector<NodeId>> split_points(const Graph& g, const RuleLibrary& rules, int64_t min_ops);

}  // namespace pcgx::search
