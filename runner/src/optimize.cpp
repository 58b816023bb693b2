#include "pcgx/runner/optimize.h"

#include <algorithm>
#include <memory>

#include "pcgx/pcg/error.h"
#include "pcgx/runner/model_source.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/simulator.h"

namespace pcgx::runner {

Ruleset load_search_ruleset(const std::string& path, bool allow_unverified, std::optional<std::string>* why) {
  Ruleset r = load_ruleset(path);
  if (const auto reason = unverified_reason(r)) {
    if (!allow_unverified)
      throw Error(path + ": not a verified ruleset: " + *reason + " (OptimizeRequest.allow_unverified to search with it anyway)");
    if (why) *why = *reason;
  }
  return r;
}

OptimizeReport optimize(const OptimizeRequest& q) {
  search::validate(q.search);
  if (q.pipeline && q.search.algorithm == search::Algorithm::kExhaustive)
    throw FieldError("OptimizeRequest.pipeline", "stages are searched with unity, data-parallel, expert or sequential, not exhaustive");
  OptimizeReport out;
  Ruleset rs;
  if (search::uses_rules(q.search.algorithm)) {
    out.ruleset = q.ruleset.empty() ? default_ruleset_path() : q.ruleset;
    rs = load_search_ruleset(out.ruleset, q.allow_unverified, &out.unverified);
  }
  const search::RuleLibrary rules(rs);
  out.rules = rules.size();
  out.cost = std::make_shared<const search::CostModel>(q.machine, q.efficiency ? *q.efficiency : search::default_efficiency(), q.profile, q.comm,
                                                      q.precision);
  const search::CostModel& cm = *out.cost;
  const search::MachineMapper mapper(cm);
  out.pipelined = q.pipeline.has_value();
  if (q.pipeline) out.result = search::optimize_pipeline(q.model, rules, cm, q.search, *q.pipeline);
  else out.result.search = search::optimize(q.model, rules, mapper, q.search);
  const search::SearchResult& r = out.result.search;
  if (!out.pipelined && !search::predicts_by_simulation(q.search.algorithm) && r.strategy.estimate.feasible)
    out.simulated = search::Simulator(r.strategy.graph, r.strategy.views, cm).time();
  if (!out.pipelined && r.strategy.estimate.feasible) {
    const auto mem = search::memory_breakdown(Placement(r.strategy.graph, r.strategy.views, q.machine.num_devices()), q.precision);
    out.busiest_memory = *std::max_element(mem.begin(), mem.end(), [](const auto& a, const auto& b) { return a.total() < b.total(); });
  }
  out.data_parallel = mapper.map(search::best_data_parallel(q.model, mapper));
  out.file = {q.model.name(), q.machine, q.machine.num_devices(), std::string(search::name(q.search.algorithm)), r.applied, r.strategy};
  out.file.precision = q.precision;
  if (out.pipelined) out.file.search += "+pipeline", out.file.pipeline_stages = out.result.stages, out.file.micro_batches = out.result.micro_batches;
  return out;
}

}  // namespace pcgx::runner
