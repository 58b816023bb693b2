// pcgx simulate's driver (see simulate.h).
#include "pcgx/runner/simulate.h"

#include "pcgx/pcg/error.h"
#include "pcgx/search/gradient_sync.h"
#include "pcgx/search/pipeline_timing.h"

namespace pcgx::runner {

SimulateReport simulate(SimulateRequest q) {
  SimulateReport r;
  // A plan at stage 3 is mapped under the stated threshold, as it is then
  // priced (a threshold beside another stage is refused below).
  if (q.plan && q.zero_persistence_threshold) {
    const std::optional<ZeroStage> z = q.zero ? q.zero : q.plan->zero;
    if (!z || shards_weights(q.zero ? *z : highest_zero(*z, q.plan->zero_weights))) q.plan->zero_persistence_threshold = q.zero_persistence_threshold;
  }
  r.file = std::make_unique<search::StrategyFile>(q.plan ? optimize(*q.plan).file : std::move(q.strategy));
  search::StrategyFile& f = *r.file;
  if (q.schedule) {
    if (f.pipeline_stages <= 0) throw FieldError("SimulateRequest.schedule", "the strategy is not pipelined (it has no micro-batches)");
    r.reordered = f.schedule != *q.schedule || (*q.schedule == PipelineSchedule::kExplicit && f.programs != q.programs);
    f.schedule = *q.schedule, f.programs = std::move(q.programs);
    try {
      check(*search::pipeline_shape(f));
    } catch (const Error& e) {
      throw FieldError("SimulateRequest.schedule", e.what());
    }
  }
  r.machine = f.machine.with_devices(f.devices);
  search::CommOptions comm;
  comm.bucket_bytes = q.bucket_bytes;
  TrainingRecipe recipe = f.recipe;
  if (q.precision) recipe.precision = *q.precision;
  // A stated policy is the whole of it: full means every layer unless the
  // count is stated too (as optimize reads them).
  if (q.recompute) {
    // operators: the strategy's (the operators it names); another policy names none.
    if (q.recompute == Recompute::kOperators && f.recipe.recompute != Recompute::kOperators)
      throw FieldError("SimulateRequest.recompute", std::string("operators: the strategy names no operators to recompute (it was searched with ") +
                                                        name(f.recipe.recompute) + "); optimize with --recompute operators --recompute-operators NAMES");
    recipe.recompute = *q.recompute, recipe.recompute_layers = kAllLayers;
    if (recipe.recompute != Recompute::kOperators) recipe.recompute_operators.clear();
  }
  if (q.recompute == Recompute::kFullSelective && !q.recompute_layers)
    throw FieldError("SimulateRequest.recompute_layers", kFullSelectiveNeedsLayers);
  if (q.recompute_layers) {
    if (!recomputes_layers(recipe.recompute))
      throw FieldError("SimulateRequest.recompute_layers", std::string("applies to full recomputation (or full+selective, full+gathers), and the plan is priced with ") +
                                                               name(recipe.recompute));
    if (*q.recompute_layers < 1) throw FieldError("SimulateRequest.recompute_layers", "must be at least 1");
    recipe.recompute_layers = *q.recompute_layers;
  }
  if (q.zero) recipe.zero = *q.zero, recipe.zero_weights.clear();  // every weight at the stage stated
  if (!shards_weights(highest_zero(recipe))) recipe.zero_persistence_threshold = 0;  // the strategy's, at stage 3 only
  if (q.zero_persistence_threshold) {
    if (!shards_weights(highest_zero(recipe)))
      throw FieldError("SimulateRequest.zero_persistence_threshold", std::string("applies to ZeRO stage 3, and the plan is priced at stage ") +
                                                                          name(recipe.zero));
    if (*q.zero_persistence_threshold < 0) throw FieldError("SimulateRequest.zero_persistence_threshold", "must not be negative");
    recipe.zero_persistence_threshold = *q.zero_persistence_threshold;
  }
  if (q.optimizer) recipe.optimizer = *q.optimizer;
  if (q.attention) recipe.attention = *q.attention;
  if (q.cross_entropy) recipe.cross_entropy = *q.cross_entropy;
  if (q.dropout_add) recipe.dropout_add = *q.dropout_add;
  if (q.overlap_grad_input) recipe.overlap_grad_input = *q.overlap_grad_input;
  if (q.overlap_param_gather) recipe.overlap_param_gather = *q.overlap_param_gather;
  if (q.overlap_grad_reduce) recipe.overlap_grad_reduce = *q.overlap_grad_reduce;
  if (q.grad_precision) recipe.grad_precision = *q.grad_precision;
  if (q.reduce_scatter) {
    if (!*q.reduce_scatter && highest_zero(recipe) != ZeroStage::k1)
      throw FieldError("SimulateRequest.reduce_scatter", std::string("off applies to ZeRO stage 1, and the plan is priced at stage ") + name(highest_zero(recipe)));
    recipe.reduce_scatter = *q.reduce_scatter;
  }
  r.cost = std::make_unique<search::CostModel>(r.machine, q.efficiency, q.profile, comm, recipe);
  std::vector<MachineView> views(f.strategy.views.begin(), f.strategy.views.end());
  r.sim = std::make_unique<search::Simulator>(f.strategy.graph, views, *r.cost, search::pipeline_shape(f));
  if (r.reordered && !f.chunks.empty() && recipe == f.recipe)
    r.repriced = search::scheduled_time(*search::pipeline_shape(f), f.chunks, search::gathers_beside_forward(*r.cost)).time;
  r.summary = r.sim->summary();
  return r;
}

}  // namespace pcgx::runner
