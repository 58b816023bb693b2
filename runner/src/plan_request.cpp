// Requests lowering a plan (see plan_request.h).
#include "pcgx/runner/plan_request.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <set>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/runner/model_source.h"
#include "pcgx/search/rule_library.h"

namespace pcgx::runner {

void lower_plan_with(search::SearchOptions& s, std::shared_ptr<const search::UserPlan> plan, bool algorithm_stated) {
  if (!algorithm_stated)
    s.algorithm = plan->unstated == search::Unstated::kSearch ? search::Algorithm::kUnity : search::Algorithm::kPlan;
  s.plan = std::move(plan);
}

void adopt_plan_settings(OptimizeRequest& q, const StatedSettings& stated) {
  if (!q.search.plan) return;
  resolve_plan_rewrites(q);
  const auto& plan = q.search.plan;
  if (plan->pipeline && !q.pipeline) {  // the plan's stages and its schedule (flags stating a pipeline win, with the default schedule)
    q.pipeline = search::PipelineOptions{plan->pipeline->stages, plan->pipeline->micro_batches, plan->pipeline->virtual_stages,
                                         plan->pipeline->schedule, plan->pipeline->programs,
                                         plan->pipeline->boundaries};
    q.pipeline->interlaced = plan->pipeline->interlaced;
    q.pipeline->layout = plan->pipeline->layout;
  }
  if (plan->precision && !stated.precision) q.precision = plan->precision;
  if (plan->recompute && !stated.recompute) {
    q.recompute = plan->recompute;
    if (plan->recompute_layers && !q.recompute_layers) q.recompute_layers = plan->recompute_layers;
  }
  // The plan's operators wherever recompute operators is the policy (its
  // own, or stated) and no flag names them: resolved here, so that a
  // pattern naming nothing is the plan's error.
  if (q.recompute == Recompute::kOperators && q.recompute_operators.empty() && !plan->recompute_operators.empty()) {
    try {
      q.recompute_operators = search::recompute_operator_names(planned_model(q), plan->recompute_operators, "recompute_operators");
    } catch (const FieldError& e) {
      throw FileError(plan->source, "recompute_operators", e.reason());
    }
  }
  if (plan->zero && !stated.zero) {
    q.zero = plan->zero;
    if (plan->zero_persistence_threshold && !q.zero_persistence_threshold) q.zero_persistence_threshold = plan->zero_persistence_threshold;
  }
  // The plan's weight groups where no flag states any: resolved here, so
  // that a pattern naming no weight, or a group at 0 beside a stated
  // sharded stage (or the reverse), is the plan's error.
  if (!plan->zero_weights.empty() && q.zero_weights.empty()) {
    try {
      q.zero_weights = search::zero_weight_stages(planned_model(q), plan->zero_weights, "zero_weights");
      if (q.zero)
        if (const auto why = zero_weights_problem(*q.zero, q.zero_weights)) throw FieldError("zero_weights", *why);
    } catch (const FieldError& e) {
      throw FileError(plan->source, "zero_weights", e.reason());
    }
  }
  if (plan->optimizer && !stated.optimizer) q.optimizer = *plan->optimizer;
  if (plan->attention && !stated.attention) q.attention = *plan->attention;
  if (plan->cross_entropy && !stated.cross_entropy) q.cross_entropy = *plan->cross_entropy;
  if (plan->dropout_add && !stated.dropout_add) q.dropout_add = *plan->dropout_add;
  if (plan->overlap_grad_input && !stated.overlap_grad_input) q.overlap_grad_input = *plan->overlap_grad_input;
  if (plan->overlap_param_gather && !stated.overlap_param_gather) q.overlap_param_gather = *plan->overlap_param_gather;
  if (plan->overlap_grad_reduce && !stated.overlap_grad_reduce) q.overlap_grad_reduce = *plan->overlap_grad_reduce;
  if (plan->grad_precision && !stated.grad_precision) q.grad_precision = *plan->grad_precision;
  if (plan->reduce_scatter && !stated.reduce_scatter) q.reduce_scatter = *plan->reduce_scatter;
}

namespace {

// The rulesets (`checked`: each trusted as a search's is,
// load_search_ruleset; else only read) and their algebraic rules.
struct Algebraic {
  std::set<std::string> ids;
  search::RuleLibrary rules;
};
Algebraic algebraic_rules(const std::vector<std::string>& paths, bool checked, bool allow_unverified = false) {
  std::vector<Ruleset> rs;
  for (const std::string& path : paths.empty() ? default_rulesets() : paths)
    rs.push_back(checked ? load_search_ruleset(path, allow_unverified, nullptr) : load_ruleset(path));
  return {search::rule_ids(rs), search::RuleLibrary(rs, search::RuleFilter::kAlgebraic)};
}

// How the model as a plan states it (plan_graph) differs from the model.
std::string planned_as(const Graph& model, const search::UserPlan& plan, const Graph& planned) {
  std::vector<std::string> parts;
  if (const size_t k = plan.rewrites.size(); k > 0)
    parts.push_back("after the " + std::to_string(k) + (k == 1 ? " rewrite" : " rewrites") +
                    " the plan states (their rules' proofs are the ruleset's: pcgx audit)");
  auto count = [](const Graph& g, const char* op) {
    return std::count_if(g.nodes().begin(), g.nodes().end(), [&](const Node& n) { return n.op->name == op; });
  };
  if (count(planned, "BatchNormApply") > count(model, "BatchNormApply"))
    parts.push_back("its BatchNorms split in their statistics form (axiom batch_norm_is_statistics_applied)");
  if (count(planned, "ClassLogSumExp") > count(model, "ClassLogSumExp"))
    parts.push_back("its loss as its blocks' log-sum-exp applied (axiom cross_entropy_is_blocks_applied)");
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return s;
}

}  // namespace

PlanCheck check_plan(const OptimizeRequest& request, bool compare_unity) {
  if (!request.search.plan) throw FieldError("SearchOptions.plan", "plan check needs a plan");
  OptimizeRequest q = request;
  resolve_plan_rewrites(q);
  validate(q);
  PlanCheck c;
  c.planned = search::plan_graph(q.model, *q.search.plan);
  c.planned_as = planned_as(q.model, *q.search.plan, c.planned);
  c.decisions = search::plan_decisions(q.model, *q.search.plan, plan_rule_devices(q));
  c.report = optimize(q);
  const search::Strategy& st = c.report.result.search.strategy;
  c.communication = search::derived_communication(Placement(st.graph, st.views, q.machine.num_devices()), *c.report.cost);
  if (compare_unity) {
    OptimizeRequest u = q;
    u.search.plan = nullptr;
    u.search.algorithm = search::Algorithm::kUnity;
    // (Its stages and micro-batches; interlaced chunks, and where they
    // end, are a plan's to state.)
    if (u.pipeline && !u.pipeline->interlaced.empty()) u.pipeline->interlaced.clear(), u.pipeline->boundaries.clear();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      c.unity = optimize(u);
    } catch (const std::exception& e) {  // the plan's check stands without it
      c.unity_error = e.what();
    }
    c.unity_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (c.unity) {
      const search::Estimate& e = c.unity->result.search.strategy.estimate;
      if (!e.feasible) {
        c.unity_error = e.infeasible.empty() ? "no feasible plan" : e.infeasible;
        c.unity.reset();
      } else {
        c.unity_simulated = search::predicts_by_simulation(q.search) && c.unity->simulated > 0;
        c.unity_time = c.unity_simulated ? c.unity->simulated : e.time;
      }
    }
  }
  return c;
}

void resolve_plan_rewrites(OptimizeRequest& q) {
  const auto& plan = q.search.plan;
  if (!plan || std::all_of(plan->rewrites.begin(), plan->rewrites.end(), [](const search::PlanRewrite& w) { return w.resolved != nullptr; }))
    return;
  auto resolved = std::make_shared<search::UserPlan>(*plan);
  const Algebraic a = algebraic_rules(q.rulesets, true, q.allow_unverified);
  search::resolve_plan_rewrites(*resolved, a.rules, a.ids);
  q.search.plan = std::move(resolved);
}

Graph planned_model(const OptimizeRequest& q) {
  return q.search.plan && !q.search.plan->rewrites.empty() ? search::apply_plan_rewrites(q.model, *q.search.plan) : q.model;
}

search::UserPlan plan_of_strategy_file(const search::StrategyFile& f, const std::string& path, const std::vector<std::string>& rulesets,
                                       search::RewritesLeftOut* left_out) {
  const auto shape = search::pipeline_shape(f);
  search::UserPlan plan = search::plan_of_strategy(f.strategy.graph, f.strategy.views, shape ? f.devices / shape->stages : 0);
  plan.description = "what " + path + " (" + f.search + ", " + std::to_string(f.devices) + " devices) runs";
  plan.precision = f.recipe.precision, plan.recompute = f.recipe.recompute, plan.zero = f.recipe.zero, plan.optimizer = f.recipe.optimizer;
  for (const WeightZero& w : f.recipe.zero_weights)
    if (w.stage != f.recipe.zero) plan.zero_weights.push_back(w);
  if (f.recipe.attention != AttentionKernel::kEager) plan.attention = f.recipe.attention;
  if (f.recipe.cross_entropy != CrossEntropyKernel::kFused) plan.cross_entropy = f.recipe.cross_entropy;
  if (f.recipe.dropout_add != DropoutAddKernel::kEager) plan.dropout_add = f.recipe.dropout_add;
  if (f.recipe.overlap_grad_input) plan.overlap_grad_input = true;
  if (f.recipe.overlap_param_gather) plan.overlap_param_gather = true;
  if (!f.recipe.overlap_grad_reduce) plan.overlap_grad_reduce = false;
  if (f.recipe.grad_precision != GradPrecision::kFp32) plan.grad_precision = f.recipe.grad_precision;
  if (zero1_all_reduces(f.recipe)) plan.reduce_scatter = false;
  if (f.recipe.recompute_layers != kAllLayers) plan.recompute_layers = f.recipe.recompute_layers;
  plan.recompute_operators = f.recipe.recompute_operators;
  if (shards_weights(highest_zero(f.recipe))) plan.zero_persistence_threshold = f.recipe.zero_persistence_threshold;  // 0 too: every block sharded
  if (shape) plan.pipeline = search::pipeline_of_strategy(f.strategy.graph, f.strategy.views, f.devices, *shape);
  if (left_out) *left_out = {};
  // (Only read, for which rules are algebraic: the plan's rewrites are
  // checked when a run resolves them.)
  if (!f.applied.empty()) {
    const Algebraic a = algebraic_rules(rulesets, false);
    plan.rewrites = search::plan_rewrites_of(f.applied, a.rules, a.ids, left_out);
  }
  return plan;
}

}  // namespace pcgx::runner
