#pragma once
// pcgx simulate's driver: a strategy (a file, or a plan lowered for a model
// as optimize lowers it) simulated task by task (search/simulator.h), its
// recipe and pipeline schedule optionally overridden. Front ends print the
// report.
#include <memory>
#include <optional>
#include <vector>

#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/profile.h"
#include "pcgx/pcg/training_recipe.h"
#include "pcgx/runner/optimize.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"

namespace pcgx::runner {

struct SimulateRequest {
  // What to simulate: a strategy, or (when set) a request lowering a plan.
  search::StrategyFile strategy;
  std::optional<OptimizeRequest> plan;
  // Overrides of the strategy's own (none: its).
  std::optional<PipelineSchedule> schedule;
  std::vector<std::vector<PipelineStep>> programs;  // with schedule explicit
  std::optional<Precision> precision;
  std::optional<Recompute> recompute;
  std::optional<int32_t> recompute_layers;  // with full recomputation (the strategy's or `recompute`)
  std::optional<ZeroStage> zero;
  std::optional<int64_t> zero_persistence_threshold;  // at ZeRO stage 3 (the strategy's or `zero`)
  std::optional<OptimizerState> optimizer;
  std::optional<AttentionKernel> attention;  // the strategy's unless said
  std::optional<CrossEntropyKernel> cross_entropy;  // the strategy's unless said
  std::optional<DropoutAddKernel> dropout_add;      // the strategy's unless said
  std::optional<bool> overlap_grad_input;    // the strategy's unless said
  std::optional<bool> overlap_param_gather;  // the strategy's unless said
  std::optional<bool> overlap_grad_reduce;   // the strategy's unless said
  std::optional<GradPrecision> grad_precision;  // the strategy's unless said
  std::optional<bool> reduce_scatter;        // the strategy's unless said (false: at ZeRO 1 only)
  search::Efficiency efficiency = search::default_efficiency();
  Profile profile;
  double bucket_bytes = 25.0 * 1024 * 1024;
};

// The simulated strategy; the cost model and the simulator refer to `file`.
struct SimulateReport {
  std::unique_ptr<search::StrategyFile> file;
  Machine machine;
  std::unique_ptr<search::CostModel> cost;
  std::unique_ptr<search::Simulator> sim;
  search::SimulationSummary summary;
  // The stages run in another order than the strategy was priced with
  // (SimulateRequest::schedule): its estimate is the old order's.
  bool reordered = false;
  // Then, where the strategy keeps its chunks' times (StrategyFile::chunks)
  // and the recipe is its own: the step those chunks take in the new order,
  // priced as the search prices a plan stating that order
  // (search/pipeline_timing.h).
  std::optional<double> repriced;
};

// Throws FieldError naming SimulateRequest.schedule for a schedule the
// strategy cannot run (not pipelined, the wrong steps, a deadlock).
SimulateReport simulate(SimulateRequest q);

}  // namespace pcgx::runner
