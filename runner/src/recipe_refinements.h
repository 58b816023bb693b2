#pragma once
// The choices optimize makes after a recipe search by re-pricing the plan
// it found (search_recipes in optimize.cpp): the fewest layers recomputed
// whole (one stage, or per chunk of a pipeline), kinds of operators to
// recompute instead, and ZeRO 3's persistence threshold. Each plan
// re-priced is listed among the recipes tried, "(re-priced)", and taken
// where it is faster than the plan kept so far. Internal to the runner.
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "pcgx/runner/optimize.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/rule_library.h"

namespace pcgx::runner {

// Whether a plan of `time` is faster than the best so far: beyond the
// rounding of the same terms summed in another order, so that recipes
// that price alike keep the first tried (the one that shards and sends
// less: ZeRO 2 over micro-batches, its buckets all hidden, against 1).
inline bool faster(double time, double best) { return time < best * (1 - 1e-12); }

// The plan `g` mapped again under a recipe (its views chosen anew), and
// its line among the recipes tried, "(re-priced)".
struct Repriced {
  search::Strategy strategy;
  std::shared_ptr<const search::CostModel> cost;
  RecipeTried tried;
};
Repriced reprice(const OptimizeRequest& q, const search::Efficiency& eff, const Graph& g, const TrainingRecipe& recipe);
// Every recipe of `recipes` at once (each mapping is independent of the
// others: at 3,072 devices one takes seconds), in their order.
std::vector<Repriced> reprice_all(const OptimizeRequest& q, const search::Efficiency& eff, const Graph& g,
                                  const std::vector<TrainingRecipe>& recipes);

// Megatron-LM's plan with sequence parallelism (--search megatron or
// expert, sequence-parallel): Megatron-LM never keeps a gathered input, so
// the recomputation policies optimize tries for it are those that gather
// again (training_recipe.h's with_regathers: gathers, full+gathers).
inline bool megatron_regathers(const OptimizeRequest& q) {
  return (q.search.algorithm == search::Algorithm::kMegatron || q.search.algorithm == search::Algorithm::kExpert) && q.search.sequence_parallel;
}

// The names of the operators `g`'s recomputation plan under `recipe` re-runs
// (with pipeline chunks, `chunk` as plan_recompute takes it).
std::set<std::string> recomputed_names(const Graph& g, const TrainingRecipe& recipe, std::span<const int64_t> chunk = {});

// Full recomputation chosen (none and selective left no plan): the fewest
// layers recomputed that still fit, whole or with the others selective.
void fewest_recomputed_layers(const OptimizeRequest& q, const search::Efficiency& eff, OptimizeReport& out);
// The same for pipeline stages, the count being per chunk.
void fewest_recomputed_layers_pipelined(const OptimizeRequest& q, const search::Efficiency& eff, const search::RuleLibrary& rules,
                                        OptimizeReport& out);
// Full recomputation chosen: kinds of operators to recompute instead
// (recompute operators), the cheapest re-run per byte freed first.
void cheapest_recomputed_operators(const OptimizeRequest& q, const search::Efficiency& eff, OptimizeReport& out);
// At ZeRO stage 3: which weight blocks stay whole; with gradient
// accumulation (one stage), the plan found lowered again under each.
void fastest_persistence_threshold(const OptimizeRequest& q, const search::Efficiency& eff, OptimizeReport& out);
void fastest_persistence_threshold_pipelined(const OptimizeRequest& q, const search::Efficiency& eff, const search::RuleLibrary& rules,
                                             OptimizeReport& out);

// At ZeRO stage 2 or 3 chosen for the whole plan (no group stated): weight
// groups (the weights whose names differ only in their layer number,
// search's layer_pattern), the smallest first, each tried at the stages
// that shard less (1, and 2 from 3), the fastest kept where the plan,
// re-priced, still fits and is faster; one line among the recipes tried where any group
// moved. Over micro-batches (one stage), each the plan found lowered
// again, as the persistence threshold is: a group at stage 1 is
// synchronized once per step instead of in every micro-batch.
void fastest_zero_groups(const OptimizeRequest& q, const search::Efficiency& eff, OptimizeReport& out);
void fastest_zero_groups_pipelined(const OptimizeRequest& q, const search::Efficiency& eff, const search::RuleLibrary& rules,
                                   OptimizeReport& out);

// The plan kept was re-priced under a recipe no search ran under (a later
// ZeRO stage, its persistence threshold, fewer layers recomputed): one
// search more, under that recipe, whose plan is taken where it is faster
// (a stage that shards the weights favours other splits than the one the
// first recipe's search chose). Listed among the recipes tried; true
// where its plan was taken.
bool search_chosen_recipe(const OptimizeRequest& q, const search::Efficiency& eff, const search::RuleLibrary& rules, OptimizeReport& out);

}  // namespace pcgx::runner
