#pragma once
// Requests that lower a plan a person wrote (search/user_plan.h,
// docs/plans.md): the plan's own settings where the front end states
// none, and `pcgx plan check`'s account of a plan.
#include <cstdint>
#include <memory>
#include <vector>

#include "pcgx/runner/optimize.h"
#include "pcgx/search/derived_communication.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::runner {

// What a front end's own options state, so that a plan's fill in only the rest.
struct StatedSettings {
  bool algorithm = false, precision = false, recompute = false, zero = false, optimizer = false, attention = false, overlap_grad_input = false,
       overlap_param_gather = false, cross_entropy = false, dropout_add = false, overlap_grad_reduce = false,
       grad_precision = false, reduce_scatter = false;
};

// Makes `s` lower `plan`: search::Algorithm::kPlan, or kUnity where the
// plan's unstated operators are searched, unless the caller stated an
// algorithm (unity searches the unstated operators; validate() refuses any
// other, naming both).
void lower_plan_with(search::SearchOptions& s, std::shared_ptr<const search::UserPlan> plan, bool algorithm_stated);

// For a request lowering its search's plan (a no-op otherwise): its
// rewrites resolved (resolve_plan_rewrites), the plan's
// precision, recomputation, ZeRO stage and optimizer where `stated` says the request
// has none, and its pipeline (stages and schedule) where the request has
// none.
void adopt_plan_settings(OptimizeRequest& q, const StatedSettings& stated);

// Resolves the rewrites of the request's plan (search::resolve_plan_rewrites)
// against its rulesets (OptimizeRequest::rulesets, or the shipped ones),
// each trusted as a search's ruleset is; a no-op for a request without
// such a plan. optimize() and check_plan() call it first.
void resolve_plan_rewrites(OptimizeRequest& q);

// The model as the request's plan rewrites it (search::apply_plan_rewrites,
// its rewrites resolved), else the model: the operators whose names a
// plan's recompute_operators may give.
Graph planned_model(const OptimizeRequest& q);

// pcgx plan check: a request lowering a plan, validated, searched and
// priced (optimize), with what each rule decides (on the devices of one
// pipeline stage) and the communication derived, costliest first.
// With `compare_unity`, unity also searches the whole model on the same
// machine, recipe and pipeline, to print beside the plan (or why it found
// nothing).
struct PlanCheck {
  // The model as the plan states it: its rewrites, and the statistics form
  // of the BatchNorms and the blocks of the loss it splits
  // (search::plan_graph), what the strategy's operators are compared with;
  // how it differs from the model, in words ("" where it does not).
  Graph planned;
  std::string planned_as;
  search::PlanDecisions decisions;
  OptimizeReport report;
  std::vector<search::DerivedMove> communication;
  std::optional<OptimizeReport> unity;
  std::string unity_error;  // when the comparison found no plan
  // Unity's time measured as the plan's is (its simulation where the plan
  // is priced by simulation, else its prediction), and the search's wall
  // time, every recipe tried.
  double unity_time = 0;
  bool unity_simulated = false;
  double unity_seconds = 0;
};
PlanCheck check_plan(const OptimizeRequest& q, bool compare_unity = false);

// The plan a strategy file amounts to (pcgx plan show): its operators'
// partitions (search::plan_of_strategy), the recipe it trains with, so that
// fed back it trains the same way, and its pipeline where it has one
// (search::pipeline_of_strategy); and the algebraic rewrites it applied
// that name where (search::plan_rewrites_of, the rules looked up in
// `rulesets`, or the shipped ones), so that it runs the same operators.
// Described as what `path` runs. `left_out`: the substitutions it applied
// that the plan does not state, by why.
search::UserPlan plan_of_strategy_file(const search::StrategyFile& f, const std::string& path, const std::vector<std::string>& rulesets = {},
                                       search::RewritesLeftOut* left_out = nullptr);

}  // namespace pcgx::runner
