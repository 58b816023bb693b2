#include "pcgx/runner/optimize.h"

#include "recipe_refinements.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_chunks.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/rulesets/ruleset_trust.h"
#include "pcgx/runner/model_source.h"
#include "pcgx/runner/plan_request.h"
#include "pcgx/search/user_plan.h"
#include "pcgx/verifier/audit.h"
#include "pcgx/runtime/execution_plan.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/simulator.h"

namespace pcgx::runner {

Ruleset load_search_ruleset(const std::string& path, bool allow_unverified, std::optional<std::string>* why, std::string* trust,
                            bool reprove) {
  Ruleset r = load_ruleset(path);
  // Why it is not trusted: an error, or with allow_unverified the report's warning.
  auto refused = [&](const std::string& reason) {
    if (!allow_unverified)
      throw Error(path + ": not a verified ruleset: " + reason + " (OptimizeRequest.allow_unverified to search with it anyway)");
    if (why) *why = reason;
    return r;
  };
  if (const auto reason = unverified_reason(r)) return refused(*reason);
  if (reprove) {
    const verify::AuditResult a = verify::audit_ruleset(r, verify::load_axioms(verify::axiom_search_path()), verify::ProverOptions{}, 0);
    for (size_t i = 0; i < r.rules.size(); ++i)
      if (a.rules[i].verdict != "ok")
        return refused("rule " + r.rules[i].id + " fails its re-proof: " + a.rules[i].verdict + ": " + a.rules[i].detail);
    if (trust) *trust = "every rule re-proved (" + std::to_string(r.rules.size()) + " rules, pcgx audit's checks)";
    return r;
  }
  // Proof records say "proved"; unless pcgx shipped these exact rules,
  // every rule must also hold when evaluated (ruleset_trust.h).
  const RulesetTrust t = establish_trust(r, default_trust_cache());
  if (t.refuted) return refused("rule " + *t.refuted + " (its numeric check refutes it)");
  if (trust) *trust = t.describe();
  return r;
}

namespace {

// The request's kernels, overlaps and gradient precision, which every recipe it tries shares.
void take_kernels_and_overlaps(TrainingRecipe& recipe, const OptimizeRequest& q) {
  recipe.attention = q.attention, recipe.cross_entropy = q.cross_entropy, recipe.dropout_add = q.dropout_add;
  recipe.overlap_grad_input = q.overlap_grad_input, recipe.overlap_param_gather = q.overlap_param_gather;
  recipe.overlap_grad_reduce = q.overlap_grad_reduce, recipe.grad_precision = q.grad_precision;
  recipe.reduce_scatter = q.reduce_scatter;
}

std::string gib(double bytes) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << bytes / 1073741824.0 << " GiB";
  return o.str();
}

// Why no recipe gave a plan: the closest miss, and what would lower it.
std::string no_plan(const OptimizeRequest& q, const std::vector<RecipeTried>& tried, const std::string& last, bool accumulated) {
  const RecipeTried* closest = nullptr;
  for (const RecipeTried& t : tried)
    if (t.smallest_need > 0 && (!closest || t.smallest_need < closest->smallest_need)) closest = &t;
  if (!closest) return last;
  const TrainingRecipe& r = closest->recipe;
  std::string why = "the smallest plan found needs " + gib(closest->smallest_need) + " on a device of " +
                    gib(q.machine.device.memory_capacity) + " (precision " + name(r.precision) + ", recompute " + describe_recompute(r.recompute, r.recompute_layers) +
                    ", ZeRO " + name(r.zero) + ")";
  std::vector<std::string> would;
  if (!is_mixed(r.precision)) would.push_back("mixed precision (bf16, fp16)");
  if (!recomputes_layers(r.recompute)) would.push_back("full recomputation");
  else if (r.recompute_layers != kAllLayers) would.push_back("recomputing more layers");
  // (ZeRO shards over a weight's data-parallel group: one device has none.)
  const bool several = q.machine.num_devices() > 1;
  if (several && !shards_gradients(r.zero) && (!q.pipeline || (q.pipeline->stages == 1 && q.pipeline->virtual_stages == 1))) would.push_back("ZeRO stage 2");
  else if (several && !shards_optimizer(r.zero)) would.push_back("ZeRO stage 1");
  if (several && shards_weights(r.zero) && r.zero_persistence_threshold > 0) would.push_back("a lower ZeRO persistence threshold (fewer blocks kept whole)");
  if (accumulated) would.push_back("more micro-batches of gradient accumulation (PipelineOptions.micro_batches 16)");
  else if (!q.pipeline || (q.pipeline->stages == 1 && q.pipeline->micro_batches != 0))
    would.push_back("gradient accumulation over micro-batches");
  would.push_back("more devices");
  if (several && !q.pipeline) would.push_back("pipeline stages");
  std::string list;
  for (size_t i = 0; i < would.size(); ++i) list += (i == 0 ? "" : i + 1 == would.size() ? " or " : ", ") + would[i];
  return why + "; " + list + " would lower it";
}

}  // namespace

void validate(const OptimizeRequest& q) {
  search::validate(q.search);
  if (q.recompute == Recompute::kOperators && q.recompute_operators.empty())
    throw FieldError("OptimizeRequest.recompute_operators", kOperatorsNeedNames);
  if (q.recompute != Recompute::kOperators && !q.recompute_operators.empty())
    throw FieldError("OptimizeRequest.recompute_operators", "applies to recompute operators (OptimizeRequest.recompute)");
  if (q.recompute == Recompute::kFullSelective && !q.recompute_layers)
    throw FieldError("OptimizeRequest.recompute_layers", kFullSelectiveNeedsLayers);
  if (q.recompute_layers) {
    if (*q.recompute_layers < 1) throw FieldError("OptimizeRequest.recompute_layers", "must be at least 1");
    if (!q.recompute || !recomputes_layers(*q.recompute))
      throw FieldError("OptimizeRequest.recompute_layers", "applies to full recomputation (OptimizeRequest.recompute full, full+selective or full+gathers)");
  }
  if (q.zero_persistence_threshold) {
    if (*q.zero_persistence_threshold < 0) throw FieldError("OptimizeRequest.zero_persistence_threshold", "must not be negative");
    if (q.zero && !shards_weights(highest_zero(*q.zero, q.zero_weights)))
      throw FieldError("OptimizeRequest.zero_persistence_threshold",
                       std::string("applies to ZeRO stage 3 (OptimizeRequest.zero, or a weight group's in OptimizeRequest.zero_weights), not ") +
                           name(*q.zero) + (q.zero_weights.empty() ? "" : " with no group at 3"));
  }
  // Against the stated stage, or, open, against one another (groups at 0
  // and at a sharded stage mix with no plan stage).
  if (const auto why = zero_weights_problem(q.zero, q.zero_weights)) throw FieldError("OptimizeRequest.zero_weights", *why);
  if (!q.reduce_scatter && q.zero && highest_zero(*q.zero, q.zero_weights) != ZeroStage::k1)
    throw FieldError("OptimizeRequest.reduce_scatter", std::string("off applies to ZeRO stage 1 (every weight at 1), not ") + name(highest_zero(*q.zero, q.zero_weights)) +
                                                           (shards_gradients(highest_zero(*q.zero, q.zero_weights)) ? ", which shards the gradients and reduce-scatters them"
                                                                                                                     : ", which all-reduces the gradients anyway"));
  // One stage accumulating over micro-batches (PipelineOptions::stages 1)
  // may shard the gradients: each micro-batch's are reduce-scattered
  // (training_recipe.h's syncs_every_micro_batch).
  if (const ZeroStage most = highest_zero(q.zero.value_or(ZeroStage::k0), q.zero_weights);
      q.pipeline && shards_gradients(most) && !(q.pipeline->stages == 1 && q.pipeline->virtual_stages == 1))
    throw FieldError(q.zero && shards_gradients(*q.zero) ? "OptimizeRequest.zero" : "OptimizeRequest.zero_weights",
                     std::string("ZeRO stage ") + name(most) +
                         " with pipeline stages: a pipelined plan shards at most the optimizer state (stage 1), as "
                         "DeepSpeed's pipeline engine allows; stages 2 and 3 accumulate over micro-batches on one stage");
  if (!(q.comm.bucket_bytes > 0) || !std::isfinite(q.comm.bucket_bytes)) throw FieldError("CommOptions.bucket_bytes", "must be a positive number");
  if (q.pipeline && q.search.algorithm == search::Algorithm::kExhaustive)
    throw FieldError("OptimizeRequest.pipeline", "stages are searched with unity, data-parallel, expert or sequential, not exhaustive");
  if (q.search.plan && (q.search.algorithm == search::Algorithm::kPlan || q.search.algorithm == search::Algorithm::kUnity)) {
    if (q.pipeline && (q.pipeline->stages == 0 || q.pipeline->micro_batches == 0))
      throw FieldError(q.pipeline->stages == 0 ? "PipelineOptions.stages" : "PipelineOptions.micro_batches",
                       "a written plan is pipelined with its stages and micro-batches stated (in the plan, or both flags)");
    if (q.pipeline) search::check_interlaced(*q.pipeline, q.search.algorithm);
    // Every rule selects some operator of the whole model (on the devices of one stage).
    const int64_t stages = q.pipeline ? std::max<int64_t>(q.pipeline->stages, 1) : 1;
    if (q.machine.num_devices() % stages != 0)
      throw FieldError("PipelineOptions.stages", std::to_string(stages) + " stages do not divide the " + std::to_string(q.machine.num_devices()) + " devices");
    std::vector<NodeId> image;
    const Graph lowered = search::lower_plan(q.model, *q.search.plan, plan_rule_devices(q), true, &image);
    std::vector<MachineView> views(lowered.size());  // the devices it states (within a stage), checked before any search
    search::assign_plan_devices(q.model, *q.search.plan, plan_rule_devices(q), lowered, image, views);
    // Where the plan's chunks end: its own field, named in its file.
    const auto& stated = q.search.plan->pipeline;
    const bool boundaries = q.pipeline && stated && !stated->boundaries.empty() && q.pipeline->boundaries == stated->boundaries;
    const bool layout = q.pipeline && stated && !stated->layout.empty() && q.pipeline->layout == stated->layout;
    if (boundaries || layout) {
      try {
        search::check_boundaries(q.model, *q.pipeline);
      } catch (const FieldError& e) {
        if (boundaries && e.field() == "PipelineOptions.boundaries") throw Error(q.search.plan->source + ": pipeline.boundaries: " + e.reason());
        if (layout && e.field() == "PipelineOptions.layout") throw Error(q.search.plan->source + ": pipeline.layout: " + e.reason());
        throw;
      }
    }
  }
}

int64_t plan_rule_devices(const OptimizeRequest& q) {
  const int64_t stages = q.pipeline ? std::max<int64_t>(q.pipeline->stages, 1) : 1;
  return q.pipeline && !q.pipeline->interlaced.empty() ? q.machine.num_devices() : q.machine.num_devices() / stages;
}

namespace {

// The recipes searched at one precision (OptimizeReport::tried), into `out`
// (its rule fields set). Throws where no recipe gave any plan to report.
OptimizeReport search_recipes(const OptimizeRequest& q, Precision precision, const search::RuleLibrary& rules, OptimizeReport out) {
  const search::Efficiency eff = q.efficiency ? *q.efficiency : search::default_efficiency();
  // One stage accumulating over micro-batches (PipelineOptions::stages 1)
  // may shard the gradients: each micro-batch's are reduce-scattered
  // (training_recipe.h's syncs_every_micro_batch).
  const bool one_stage = q.pipeline && q.pipeline->stages == 1 && q.pipeline->virtual_stages == 1;
  std::vector<Recompute> policies(std::begin(kRecomputes), std::end(kRecomputes));
  // Megatron-LM's plan with sequence parallelism keeps what Megatron-LM
  // keeps: never the gathered inputs, each gathered again in backward
  // whatever the recomputation (training_recipe.h's gathers), so its
  // least recomputation is gathers, not none, and its full recomputation
  // full+gathers (the layers a count leaves whole gather again too).
  if (megatron_regathers(q))
    for (Recompute& p : policies) p = with_regathers(p);
  if (q.recompute) policies = {*q.recompute};
  std::vector<ZeroStage> stages(std::begin(kZeroStages), std::end(kZeroStages));
  if (q.zero) stages = {*q.zero};
  else if (q.machine.num_devices() == 1) stages = {ZeroStage::k0};  // no replica to shard over
  else if (one_stage) stages = {ZeroStage::k0, ZeroStage::k1, ZeroStage::k2, ZeroStage::k3};
  else if (q.pipeline) stages = {ZeroStage::k0, ZeroStage::k1};
  // Weights at stated stages: only the plan stages they mix with.
  std::erase_if(stages, [&](ZeroStage z) { return zero_weights_problem(z, q.zero_weights).has_value(); });
  if (stages.empty()) throw FieldError("OptimizeRequest.zero_weights", "weights at a sharded ZeRO stage need more than one device to shard over");
  const bool one_recipe = policies.size() == 1 && stages.size() == 1;
  std::string last_reason;
  bool found = false, settled = false;
  bool chosen_pipelined = q.pipeline.has_value();  // the result kept so far
  bool constrained = false, first = true;           // memory left the first recipe no plan
  for (const Recompute policy : policies) {
    // Under one policy, once a search finds a feasible plan the later ZeRO
    // stages re-price (map) that plan instead of searching again: a stage
    // shards more to fit, and what it does to a plan that already fits is
    // its own time (a shorter update, other collectives), which re-pricing
    // gives. A search per recipe took Inception-v3 at 192 devices 12
    // searches, about 17 minutes.
    std::optional<search::SearchResult> fitted;
    auto recipe_of = [&](ZeroStage stage) {
      TrainingRecipe recipe{precision, policy, stage, recomputes_layers(policy) ? q.recompute_layers.value_or(kAllLayers) : kAllLayers,
                            q.optimizer};
      if (policy == Recompute::kOperators) recipe.recompute_operators = q.recompute_operators;
      recipe.zero_weights = q.zero_weights;
      if (shards_weights(highest_zero(recipe))) recipe.zero_persistence_threshold = q.zero_persistence_threshold.value_or(0);
      take_kernels_and_overlaps(recipe, q);
      return recipe;
    };
    // The stages after the one that fitted, re-priced all at once (each an
    // independent mapping: seconds at 3,072 devices), taken in order.
    std::vector<std::optional<Repriced>> repriced(stages.size());
    for (size_t si = 0; si < stages.size(); ++si) {
      const TrainingRecipe recipe = recipe_of(stages[si]);
      const auto cost = std::make_shared<const search::CostModel>(q.machine, eff, q.profile, q.comm, recipe);
      const search::MachineMapper mapper(*cost);
      search::PipelineResult result;
      RecipeTried tried{recipe};
      // The cost model that priced the result, and its mapping's smallest
      // refused need: this one's where it searched, else the re-pricing's.
      std::shared_ptr<const search::CostModel> priced_by = cost;
      double smallest_need = 0;
      if (fitted && !q.pipeline) {
        if (!repriced[si]) {
          std::vector<TrainingRecipe> rest;
          for (size_t j = si; j < stages.size(); ++j) rest.push_back(recipe_of(stages[j]));
          std::vector<Repriced> done = reprice_all(q, eff, fitted->strategy.graph, rest);
          for (size_t j = 0; j < done.size(); ++j) repriced[si + j] = std::move(done[j]);
        }
        Repriced& r = *repriced[si];
        result.search = *fitted;
        result.search.strategy = std::move(r.strategy);
        priced_by = std::move(r.cost), smallest_need = r.tried.smallest_need;
        tried.searched = false;
      } else if (q.pipeline) {
        try {
          result = search::optimize_pipeline(q.model, rules, *cost, q.search, *q.pipeline);
        } catch (const Error& e) {
          if (one_recipe) throw;  // the one recipe asked for: its reason as before
          last_reason = e.what();
          out.tried.push_back(tried);
          continue;
        }
      } else {
        result.search = search::optimize(q.model, rules, mapper, q.search);
      }
      const search::Estimate& e = result.search.strategy.estimate;
      if (tried.searched) smallest_need = mapper.memory_refusals().smallest_need;
      tried.feasible = e.feasible, tried.time = e.time, tried.smallest_need = smallest_need;
      if (q.pipeline && result.stages == 1) tried.micro_batches = result.micro_batches;  // (gradient accumulation)
      // A plan priced by simulation (stated devices) is refused by its own
      // memory, which the mapping's refusals do not see.
      const bool over = search::predicts_by_simulation(q.search) && !e.feasible && e.max_memory() > q.machine.device.memory_capacity;
      if (over) tried.smallest_need = e.max_memory();
      if (!e.feasible) last_reason = e.infeasible;
      out.tried.push_back(tried);
      if (first) constrained = !e.feasible && (mapper.memory_refusals().count > 0 || over);
      first = false;
      // (Not where the search's own figure is a simulation: a re-priced
      // plan's would be the DP's, not comparable.)
      if (e.feasible && !fitted && !q.pipeline && !search::predicts_by_simulation(q.search)) fitted = result.search;
      const bool better = e.feasible && (!found || faster(e.time, out.result.search.strategy.estimate.time));
      if (better || (!found && !out.cost)) out.result = std::move(result), out.cost = priced_by, chosen_pipelined = q.pipeline.has_value();
      found = found || e.feasible;
      // Memory did not constrain this search: sharding or recomputing more
      // would only add time.
      if (tried.searched && e.feasible && (q.pipeline || mapper.memory_refusals().count == 0)) {
        settled = true;
        break;
      }
    }
    // A plan fits without (more) recomputation: recomputing would only add
    // compute to the plans that fit.
    if (settled || (found && !q.pipeline)) break;
  }
  if (found && !q.recompute && !search::predicts_by_simulation(q.search)) {
    if (!chosen_pipelined) {
      fewest_recomputed_layers(q, eff, out);
      // (Not for Megatron-LM's plan with sequence parallelism: a choice of
      // operators keeps the gathered copies of what it does not name.)
      if (q.recompute_kinds && !megatron_regathers(q)) cheapest_recomputed_operators(q, eff, out);
    }
    else if (!q.search.plan) fewest_recomputed_layers_pipelined(q, eff, rules, out);
  }
  if (found && !chosen_pipelined && !q.zero_persistence_threshold && !search::predicts_by_simulation(q.search))
    fastest_persistence_threshold(q, eff, out);
  // The plan found re-priced under a recipe no search ran under: searched
  // under it once more (and, a new plan taken, its threshold chosen again).
  if (found && !chosen_pipelined && !search::predicts_by_simulation(q.search) && search_chosen_recipe(q, eff, rules, out) &&
      !q.zero_persistence_threshold)
    fastest_persistence_threshold(q, eff, out);
  if (found && !chosen_pipelined && !q.zero && q.zero_weights.empty() && !search::predicts_by_simulation(q.search))
    fastest_zero_groups(q, eff, out);
  // Memory left the first recipe (the cheapest) no plan: accumulating gradients
  // over micro-batches (a one-stage pipeline), whose activations are one
  // micro-batch's, is the other way to fit. Per ZeRO stage one pipeline
  // search tries 1, 2, 4 and 8 micro-batches and keeps the fastest that
  // fits (the fewest: the same FLOPs, fewer launches); a count of one is
  // the plan searched above. Only plans the runtime can run one
  // micro-batch at a time compete (not those whose BatchNorm statistics
  // would sum the micro-batches); the search time must be the DP's, as
  // the other recipes' (not mcmc's simulations), and exhaustive search
  // does not pipeline; nor does a plan's search of its unstated operators.
  const search::Algorithm alg = q.search.algorithm;
  if (constrained && !q.pipeline && q.accumulate && alg != search::Algorithm::kExhaustive && alg != search::Algorithm::kPlan &&
      !q.search.plan && !search::predicts_by_simulation(q.search)) {
    int64_t fewest = 0;  // micro-batches of the stages before that fit
    for (const ZeroStage stage : stages) {
      // ZeRO 2 reduce-scatters every micro-batch's gradients (3 gathers its
      // weights too): at best as fast as stage 1 over as many
      // micro-batches, so where a stage before it fitted, it is searched
      // with fewer micro-batches only.
      if (syncs_every_micro_batch(stage) && fewest == 2) break;
      search::PipelineOptions accumulation{1, 0};
      if (syncs_every_micro_batch(stage)) accumulation.fewer_than = fewest;
      TrainingRecipe recipe{precision, policies.front(), stage,
                            recomputes_layers(policies.front()) ? q.recompute_layers.value_or(kAllLayers) : kAllLayers, q.optimizer};
      if (policies.front() == Recompute::kOperators) recipe.recompute_operators = q.recompute_operators;
      recipe.zero_weights = q.zero_weights;
      if (shards_weights(highest_zero(recipe))) recipe.zero_persistence_threshold = q.zero_persistence_threshold.value_or(0);
      take_kernels_and_overlaps(recipe, q);
      auto cost = std::make_shared<const search::CostModel>(q.machine, eff, q.profile, q.comm, recipe);
      search::PipelineResult result;
      try {
        result = search::optimize_pipeline(q.model, rules, *cost, q.search, accumulation);
        const search::Strategy& st = result.search.strategy;
        runtime::make_plan(st.graph, std::vector<MachineView>(st.views.begin(), st.views.end()), static_cast<int>(q.machine.num_devices()));
      } catch (const Error&) {  // no count fits, or the runtime cannot run it
        out.accumulation_failed = true;
        continue;
      }
      const search::Estimate& e = result.search.strategy.estimate;
      if (!e.feasible || result.micro_batches == 1) continue;
      fewest = fewest == 0 ? result.micro_batches : std::min(fewest, result.micro_batches);
      out.tried.push_back({recipe, true, e.time, 0, result.micro_batches});
      if (!found || faster(e.time, out.result.search.strategy.estimate.time)) out.result = std::move(result), out.cost = cost, chosen_pipelined = true;
      found = true;
    }
  }
  if (found && chosen_pipelined && !q.zero_persistence_threshold && !q.search.plan && !search::predicts_by_simulation(q.search))
    fastest_persistence_threshold_pipelined(q, eff, rules, out);
  if (found && chosen_pipelined && !q.zero && q.zero_weights.empty() && !q.search.plan && !search::predicts_by_simulation(q.search))
    fastest_zero_groups_pipelined(q, eff, rules, out);
  out.pipelined = chosen_pipelined;
  if (!found) {
    if (!out.cost)  // every pipelined policy failed
      throw Error(no_plan(q, out.tried, last_reason, out.accumulation_failed));
    out.result.search.strategy.estimate.feasible = false;
    out.result.search.strategy.estimate.infeasible = no_plan(q, out.tried, last_reason, out.accumulation_failed);
  }
  const search::CostModel& cm = *out.cost;
  const search::MachineMapper mapper(cm);
  const search::SearchResult& r = out.result.search;

  out.data_parallel = mapper.map(search::best_data_parallel(q.model, mapper));
  // Against an accumulating plan, data parallelism accumulating over the
  // same micro-batches: the same activations held, so a like comparison.
  if (out.pipelined && out.result.stages == 1 && out.result.micro_batches > 1) {
    try {
      search::Strategy dp = mapper.map(search::pipelined(search::best_data_parallel(q.model, mapper), out.result.micro_batches, true));
      if (dp.estimate.feasible || !out.data_parallel.estimate.feasible) out.data_parallel = std::move(dp), out.data_parallel_micro_batches = out.result.micro_batches;
    } catch (const Error&) {  // a model that cannot take them (data parallelism in one batch stays the baseline)
    }
  }
  out.file = {q.model.name(), q.machine, q.machine.num_devices(), std::string(search::name(q.search.algorithm)), r.applied, r.strategy};
  out.file.recipe = cm.recipe();
  if (out.pipelined) {
    out.file.search += "+pipeline", out.file.pipeline_stages = out.result.stages, out.file.micro_batches = out.result.micro_batches,
        out.file.virtual_stages = out.result.virtual_stages, out.file.schedule = PipelineShape::default_for(out.result.virtual_stages);
    out.file.interlaced = out.result.interlaced;
    // A stated schedule (a plan's), which memory was counted with.
    if (q.pipeline && q.pipeline->schedule) out.file.schedule = *q.pipeline->schedule, out.file.programs = q.pipeline->programs;
    // The chunks' times, kept where the step was priced from them (not
    // where it was simulated: a plan stating devices), so that the same
    // chunks can be priced in another order (simulate --schedule).
    if (r.strategy.estimate.feasible && !out.result.simulated) out.file.chunks = out.result.stage;
  }
  const std::optional<PipelineShape> shape = search::pipeline_shape(out.file);
  std::vector<int64_t> chunk;  // per node, a pipelined plan's chunk (pcg/pipeline_chunks.h)
  if (shape && shape->chunks() > 1) chunk = pipeline_chunks(r.strategy.graph, std::span<const MachineView>(r.strategy.views), out.file.devices, *shape);
  // Auto's gathers or full+gathers (Megatron-LM's plan with sequence
  // parallelism) on a plan that gathers nothing again beyond what the
  // policy without them recomputes (t = 1, a model the expert does not
  // split by sequence, every gather inside a full layer) is that policy's
  // plan, and is recorded as that policy (none, full).
  if (!q.recompute && regathers(out.file.recipe.recompute)) {
    const Graph& g = r.strategy.graph;
    TrainingRecipe without = out.file.recipe;
    without.recompute = without_regathers(without.recompute);
    const SourceLayouts layouts = source_layouts(g);
    if (plan_recompute(g, layouts, out.file.recipe, chunk).recomputed == plan_recompute(g, layouts, without, chunk).recomputed)
      out.file.recipe = without;  // (out.cost, which the result's plan refers to, prices the same plan)
  }
  // The operators recomputed are those the plan found recomputes: a rule
  // that fused one away took its name, and a pipeline stage's boundary
  // (read by the next stage) is never recomputed (recompute_plan.h). Where
  // none is left, the names chose nothing: an error.
  if (auto& names = out.file.recipe.recompute_operators; !names.empty()) {
    const std::set<std::string> recomputed = recomputed_names(r.strategy.graph, out.file.recipe, chunk);
    std::erase_if(names, [&](const std::string& n) { return !recomputed.count(n); });
    if (names.empty())
      throw FieldError("OptimizeRequest.recompute_operators",
                       "none of the operators named is recomputed in the plan found (a pipeline stage's boundary, read by the next "
                       "stage, never is; nor an operator a rule fused away)");
  }
  if (r.strategy.estimate.feasible) {
    const Placement place(r.strategy.graph, r.strategy.views, q.machine.num_devices());
    out.memory = shape ? search::memory_breakdown(place, cm.recipe(), *shape, chunk) : search::memory_breakdown(place, cm.recipe());
  }
  if (!search::predicts_by_simulation(q.search) && r.strategy.estimate.feasible) {
    // Simulated already (or refused as too large) where the search ranked
    // its finalists so and the plan and its pricing are the same: seconds
    // at thousands of devices.
    const std::optional<search::SimulatedTime> ranked = shape ? std::nullopt : search::simulated_time(r.ranking, r.strategy, cm);
    if (ranked && !ranked->not_simulated.empty()) out.not_simulated = ranked->not_simulated;
    else if (ranked) out.simulated = ranked->time;
    else {
      try {
        out.simulated = search::Simulator(r.strategy.graph, r.strategy.views, cm, shape).time();
      } catch (const search::TooManyTasks& e) {  // a plan too large to run task by task: the report says so
        out.not_simulated = e.what();
      }
    }
  }
  return out;
}

// The precisions `auto` compares: the machine's mixed precision, bf16
// unless only fp16 is faster there (fp16 needs loss scaling, which the
// cost model does not price: at equal peaks, as on A100 and H100, bf16),
// then tf32.
std::vector<Precision> auto_precisions(const Machine& m) {
  std::vector<Precision> out;
  if (m.device.has_precision_table()) {
    const auto peak = [&](Precision p) { return m.device.peak_flops_by_precision[static_cast<size_t>(p)]; };
    if (peak(Precision::kFp16) > peak(Precision::kBf16)) out.push_back(Precision::kFp16);
    else if (peak(Precision::kBf16) > 0) out.push_back(Precision::kBf16);
  }
  out.push_back(Precision::kTf32);
  return out;
}

}  // namespace

namespace {

// The samples a step takes: the largest first dimension of the model's inputs.
int64_t batch_of(const Graph& model) {
  int64_t batch = 0;
  for (const Node& n : model.nodes())
    if (n.op->op_class == OpClass::kSource && !n.op->is_weight && n.outputs[0].rank() > 0) batch = std::max(batch, n.outputs[0].dims[0].size);
  return batch;
}

// Megatron-LM's plan as stated (a tensor-parallel degree given): its
// data-parallel replicas split the batch evenly, or Megatron-LM refuses
// to start; without that check the expert would split the samples fewer
// ways and leave devices idle where the user asked for all of them.
void check_megatron_replicas(const OptimizeRequest& q) {
  if (q.search.algorithm != search::Algorithm::kMegatron || q.search.tensor_degree <= 0 || q.micro_batch_size > 0) return;
  if (q.pipeline && q.pipeline->stages == 0) return;  // (refused below, naming the stages)
  const int64_t t = q.search.tensor_degree, p = q.pipeline ? q.pipeline->stages : 1;
  const int64_t devices = q.machine.num_devices();
  if (devices % (t * p) != 0) return;  // the expert's own error names it
  // Only where every input of the model leads with the same dimension (the
  // batch): an input of another kind (an imported model's mask) leaves
  // the samples to the expert.
  int64_t batch = 0;
  for (const Node& n : q.model.nodes()) {
    if (n.op->op_class != OpClass::kSource || n.op->is_weight || n.outputs[0].rank() == 0) continue;
    const int64_t first = n.outputs[0].dims[0].size;
    if (batch != 0 && first != batch) return;
    batch = first;
  }
  const int64_t replicas = devices / (t * p);
  if (batch > 0 && batch % replicas != 0)
    throw FieldError("SearchOptions.tensor_degree", std::to_string(t) + (p > 1 ? " x " + std::to_string(p) + " pipeline stages" : "") +
                                                        " on " + std::to_string(devices) + " devices leaves " + std::to_string(replicas) +
                                                        " data-parallel replicas, and the batch of " + std::to_string(batch) +
                                                        " samples does not split " + std::to_string(replicas) +
                                                        " ways (Megatron-LM needs the global batch a multiple of its data-parallel size)");
}

// Megatron-LM's micro-batch size as micro-batches (OptimizeRequest::micro_batch_size).
OptimizeRequest with_micro_batches(OptimizeRequest q) {
  if (q.micro_batch_size < 0) throw FieldError("OptimizeRequest.micro_batch_size", "must not be negative");
  check_megatron_replicas(q);
  if (q.micro_batch_size == 0) return q;
  if (q.search.algorithm != search::Algorithm::kMegatron)
    throw FieldError("OptimizeRequest.micro_batch_size", "is Megatron-LM's (SearchOptions.algorithm megatron); other searches take "
                                                         "a number of micro-batches (PipelineOptions.micro_batches)");
  if (q.pipeline && q.pipeline->stages == 0)
    throw FieldError("PipelineOptions.stages", "Megatron-LM's plan states its pipeline stages");
  const int64_t t = std::max<int64_t>(q.search.tensor_degree, 1), p = q.pipeline ? q.pipeline->stages : 1;
  const int64_t devices = q.machine.num_devices();
  if (devices % (t * p) != 0)
    throw FieldError("SearchOptions.tensor_degree", std::to_string(t) + " x " + std::to_string(p) + " pipeline stages do not divide the " +
                                                        std::to_string(devices) + " devices");
  const int64_t replicas = devices / (t * p);
  const int64_t batch = batch_of(q.model);
  if (batch % (replicas * q.micro_batch_size) != 0)
    throw FieldError("OptimizeRequest.micro_batch_size", "the batch of " + std::to_string(batch) + " samples over " + std::to_string(replicas) +
                                                             " data-parallel replicas does not divide into micro-batches of " +
                                                             std::to_string(q.micro_batch_size));
  const int64_t m = batch / (replicas * q.micro_batch_size);
  if (q.pipeline) q.pipeline->micro_batches = m;
  else if (m > 1) q.pipeline = search::PipelineOptions{1, m};
  q.accumulate = false;
  return q;
}

}  // namespace

std::string describe_rules(const OptimizeReport& r) {
  if (r.rulesets.empty()) return "";
  std::string s = std::to_string(r.rules) + " rules (both directions, ranks 2-4) from ";
  // One trust for all (the shipped ones: pinned) is said once, at the end.
  const bool same = r.trust.size() == r.rulesets.size() && std::all_of(r.trust.begin(), r.trust.end(), [&](const std::string& t) { return t == r.trust[0]; });
  for (size_t i = 0; i < r.rulesets.size(); ++i) {
    if (i) s += i + 1 == r.rulesets.size() ? " and " : ", ";
    const std::string& trust = i < r.trust.size() ? r.trust[i] : std::string{};
    s += r.rulesets[i] + (same || trust.empty() ? "" : " (" + trust + ")");
  }
  if (same && !r.trust[0].empty()) s += ": " + r.trust[0];
  return s;
}

OptimizeReport optimize(const OptimizeRequest& request) {
  OptimizeRequest q = with_micro_batches(request);
  resolve_plan_rewrites(q);
  validate(q);
  if (!q.recompute_operators.empty())  // the names the patterns stand for, as the strategy records them
    q.recompute_operators = search::recompute_operator_names(planned_model(q), q.recompute_operators, "OptimizeRequest.recompute_operators");
  if (!q.zero_weights.empty()) q.zero_weights = search::zero_weight_stages(planned_model(q), q.zero_weights, "OptimizeRequest.zero_weights");
  OptimizeReport base;
  std::vector<Ruleset> rs;
  if (search::uses_rules(q.search.algorithm)) {
    base.rulesets = q.rulesets.empty() ? default_rulesets() : q.rulesets;
    for (const std::string& path : base.rulesets) {
      std::optional<std::string> why;
      std::string& trust = base.trust.emplace_back();
      rs.push_back(load_search_ruleset(path, q.allow_unverified, &why, &trust, q.reprove));
      if (why) base.unverified.emplace_back(path, *why);
    }
  }
  const search::RuleLibrary rules(rs);
  base.rules = rules.size();
  if (q.precision) return search_recipes(q, *q.precision, rules, std::move(base));
  // Each precision's recipes; the fastest feasible plan, the first at a tie.
  std::optional<OptimizeReport> best;
  std::vector<RecipeTried> tried;
  std::string why;
  for (const Precision p : auto_precisions(q.machine)) {
    try {
      OptimizeReport r = search_recipes(q, p, rules, base);
      tried.insert(tried.end(), r.tried.begin(), r.tried.end());
      const search::Estimate& e = r.result.search.strategy.estimate;
      const bool better = !best || (e.feasible && (!best->result.search.strategy.estimate.feasible ||
                                                    e.time < best->result.search.strategy.estimate.time));
      if (better) best = std::move(r);
    } catch (const Error& e) {
      why = e.what();
    }
  }
  if (!best) throw Error(why);
  best->tried = std::move(tried);
  return std::move(*best);
}

}  // namespace pcgx::runner
