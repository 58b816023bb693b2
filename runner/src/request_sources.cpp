// A request's model, machine and plan from what names them (see request_sources.h).
#include "pcgx/runner/request_sources.h"

#include "pcgx/runner/model_source.h"
#include "pcgx/runner/plan_request.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::runner {

std::shared_ptr<const search::UserPlan> load_sources(const RequestSources& s, OptimizeRequest& q) {
  Machine m = search::find_machine(s.machine);
  if (s.devices > 0) m = m.with_devices(s.devices);
  std::shared_ptr<const search::UserPlan> plan;
  if (!s.plan.empty()) {
    plan = std::make_shared<const search::UserPlan>(search::load_plan(s.plan));
    lower_plan_with(q.search, plan, s.algorithm_stated);
  }
  q.model = load_model(s.model, s.per_device_batch ? with_batch_per_device(s.model, s.sizes, m.num_devices()) : s.sizes).graph;
  q.machine = m;
  return plan;
}

}  // namespace pcgx::runner
