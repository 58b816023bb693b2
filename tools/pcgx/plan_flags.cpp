// The flags that lower a plan (see plan_flags.h).
#include "plan_flags.h"

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/runner/plan_request.h"
#include "pcgx/runner/request_sources.h"

namespace pcgx::cli {

void add_plan_model_options(CLI::App* cmd, PlanFlags& f) {
  cmd->add_option("--machine", f.machine, "machine name (data/machines) or machine JSON file");
  cmd->add_option("--devices", f.devices, "use the first N devices; default: all")->check(positive());
  cmd->add_option("--set", f.sets, "override a size parameter: key=value (repeatable)");
  cmd->add_flag("!--global-batch", f.per_device_batch, "take a zoo model's batch as the global batch (default: per device, times --devices)");
  cmd->add_option("--ruleset", f.rulesets, "where the plan's rewrites are looked up (repeatable); default: every shipped ruleset")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--allow-unverified", f.allow_unverified, kAllowUnverifiedHelp);
}

runner::OptimizeRequest plan_request(const PlanFlags& f, std::shared_ptr<const search::UserPlan>& plan) {
  if (f.machine.empty()) throw Error("--machine is required with a plan (the devices it partitions over)");
  name_flags({{"SearchOptions.plan", "PLAN"}, {"PipelineOptions.stages", "the plan's pipeline.stages"},
              {"PipelineOptions.micro_batches", "the plan's pipeline.micro_batches"},
              {"PipelineOptions.virtual_stages", "the plan's pipeline.virtual_stages"}, {"PipelineOptions.interlaced", "the plan's pipeline.interlaced"}, {"OptimizeRequest.zero", "the plan's zero"}, {"OptimizeRequest.zero_weights", "the plan's zero_weights"},
              {"OptimizeRequest.recompute_operators", "the plan's recompute_operators"},
              {"TrainingRecipe.overlap_param_gather", "the plan's overlap_param_gather"},
              {"OptimizeRequest.reduce_scatter", "the plan's reduce_scatter"},
              {"OptimizeRequest.allow_unverified", "--allow-unverified"}});
  runner::OptimizeRequest q;
  q.rulesets = f.rulesets, q.allow_unverified = f.allow_unverified;
  plan = runner::load_sources({f.model, parse_sets(f.sets), f.per_device_batch, f.machine, f.devices, f.plan, false}, q);
  runner::adopt_plan_settings(q, {});  // as optimize --plan with no recipe flags: the plan's, else the defaults
  return q;
}

}  // namespace pcgx::cli
