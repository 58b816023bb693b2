// The flags that lower a plan (see plan_flags.h).
#include "plan_flags.h"

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/runner/model_source.h"
#include "pcgx/runner/plan_request.h"
#include "pcgx/search/cost_model.h"

namespace pcgx::cli {

void add_plan_model_options(CLI::App* cmd, PlanFlags& f) {
  cmd->add_option("--machine", f.machine, "machine name (data/machines) or machine JSON file");
  cmd->add_option("--devices", f.devices, "use the first N devices; default: all")->check(positive());
  cmd->add_option("--set", f.sets, "override a size parameter: key=value (repeatable)");
  cmd->add_flag("!--global-batch", f.per_device_batch, "take a zoo model's batch as the global batch (default: per device, times --devices)");
}

runner::OptimizeRequest plan_request(const PlanFlags& f, std::shared_ptr<const search::UserPlan>& plan) {
  if (f.machine.empty()) throw Error("--machine is required with a plan (the devices it partitions over)");
  name_flags({{"SearchOptions.plan", "PLAN"}, {"PipelineOptions.stages", "the plan's pipeline.stages"},
              {"PipelineOptions.micro_batches", "the plan's pipeline.micro_batches"},
              {"PipelineOptions.virtual_stages", "the plan's pipeline.virtual_stages"}, {"OptimizeRequest.zero", "the plan's zero"}});
  runner::OptimizeRequest q;
  Machine m = search::find_machine(f.machine);
  if (f.devices > 0) m = m.with_devices(f.devices);
  plan = std::make_shared<const search::UserPlan>(search::load_plan(f.plan));
  runner::lower_plan_with(q.search, plan, false);
  const ModelParams sizes = parse_sets(f.sets);
  q.model = runner::load_model(f.model, f.per_device_batch ? runner::with_batch_per_device(f.model, sizes, m.num_devices()) : sizes).graph;
  q.machine = m;
  runner::adopt_plan_settings(q, {});  // as optimize --plan with no recipe flags: the plan's, else the defaults
  return q;
}

}  // namespace pcgx::cli
