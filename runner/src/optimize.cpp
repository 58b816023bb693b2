#include "pcgx/runner/optimize.h"

#include <algorithm>
#include <iomanip>
#include <memory>
#include <sstream>

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

namespace {

std::string gib(double bytes) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << bytes / 1073741824.0 << " GiB";
  return o.str();
}

// Why no policy gave a plan: the closest miss, and what would lower it.
std::string no_plan(const OptimizeRequest& q, const std::vector<RecomputeTried>& tried, const std::string& last) {
  const RecomputeTried* closest = nullptr;
  for (const RecomputeTried& t : tried)
    if (t.smallest_need > 0 && (!closest || t.smallest_need < closest->smallest_need)) closest = &t;
  if (!closest) return last;
  std::string why = "the smallest plan found needs " + gib(closest->smallest_need) + " on a device of " +
                    gib(q.machine.device.memory_capacity) + " (precision " + name(q.precision) + ", recompute " + name(closest->recompute) + ")";
  std::vector<std::string> would;
  if (!is_mixed(q.precision)) would.push_back("mixed precision (bf16, fp16)");
  if (closest->recompute != Recompute::kFull) would.push_back("full recomputation");
  would.push_back("more devices");
  if (!q.pipeline) would.push_back("pipeline stages");
  std::string list;
  for (size_t i = 0; i < would.size(); ++i) list += (i == 0 ? "" : i + 1 == would.size() ? " or " : ", ") + would[i];
  return why + "; " + list + " would lower it";
}

}  // namespace

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
  out.pipelined = q.pipeline.has_value();
  const search::Efficiency eff = q.efficiency ? *q.efficiency : search::default_efficiency();
  std::vector<Recompute> policies(std::begin(kRecomputes), std::end(kRecomputes));
  if (q.recompute) policies = {*q.recompute};
  std::string last_reason;
  bool found = false;
  for (const Recompute policy : policies) {
    auto cost = std::make_shared<const search::CostModel>(q.machine, eff, q.profile, q.comm, TrainingRecipe{q.precision, policy});
    const search::MachineMapper mapper(*cost);
    search::PipelineResult result;
    RecomputeTried tried{policy};
    if (q.pipeline) {
      try {
        result = search::optimize_pipeline(q.model, rules, *cost, q.search, *q.pipeline);
      } catch (const Error& e) {
        if (q.recompute) throw;  // the one policy asked for: its reason as before
        last_reason = e.what();
        out.tried.push_back(tried);
        continue;
      }
    } else {
      result.search = search::optimize(q.model, rules, mapper, q.search);
    }
    const search::Estimate& e = result.search.strategy.estimate;
    tried.feasible = e.feasible, tried.time = e.time, tried.smallest_need = mapper.memory_refusals().smallest_need;
    if (!e.feasible) last_reason = e.infeasible;
    out.tried.push_back(tried);
    const bool better = e.feasible && (!found || e.time < out.result.search.strategy.estimate.time);
    if (better || (!found && !out.cost)) out.result = std::move(result), out.cost = cost;
    found = found || e.feasible;
    if (q.recompute) break;
    // Memory did not constrain this search: recomputing more only adds time.
    if (e.feasible && (q.pipeline || mapper.memory_refusals().count == 0)) break;
  }
  if (!found) {
    if (!out.cost)  // every pipelined policy failed
      throw Error(no_plan(q, out.tried, last_reason));
    out.result.search.strategy.estimate.feasible = false;
    out.result.search.strategy.estimate.infeasible = no_plan(q, out.tried, last_reason);
  }
  const search::CostModel& cm = *out.cost;
  const search::MachineMapper mapper(cm);
  const search::SearchResult& r = out.result.search;
  if (!out.pipelined && !search::predicts_by_simulation(q.search.algorithm) && r.strategy.estimate.feasible)
    out.simulated = search::Simulator(r.strategy.graph, r.strategy.views, cm).time();
  if (!out.pipelined && r.strategy.estimate.feasible) {
    const auto mem = search::memory_breakdown(Placement(r.strategy.graph, r.strategy.views, q.machine.num_devices()), cm.recipe());
    out.busiest_memory = *std::max_element(mem.begin(), mem.end(), [](const auto& a, const auto& b) { return a.total() < b.total(); });
  }
  out.data_parallel = mapper.map(search::best_data_parallel(q.model, mapper));
  out.file = {q.model.name(), q.machine, q.machine.num_devices(), std::string(search::name(q.search.algorithm)), r.applied, r.strategy};
  out.file.recipe = cm.recipe();
  if (out.pipelined) out.file.search += "+pipeline", out.file.pipeline_stages = out.result.stages, out.file.micro_batches = out.result.micro_batches;
  return out;
}

}  // namespace pcgx::runner
