#include "pcgx/runner/step_terms.h"

#include <algorithm>

#include "pcgx/pcg/error.h"

namespace pcgx::runner {

StepTerms step_terms(const search::Estimate& e, const runtime::TrainResult& r) {
  if (r.device_times.empty() || r.timed_steps <= 0) throw Error("step_terms: the run was not timed (time_kernels)");
  StepTerms t;
  double most = -1;
  for (size_t d = 0; d < r.device_times.size(); ++d) {
    const runtime::DeviceTime& x = r.device_times[d];
    if (x.step - x.messages > most) most = x.step - x.messages, t.device = static_cast<int>(d);
  }
  const runtime::DeviceTime& m = r.device_times[static_cast<size_t>(t.device)];
  const double steps = static_cast<double>(std::max<int64_t>(m.steps, 1));
  t.predicted = e.time, t.measured = m.step / steps;
  t.terms = {{"kernels", e.compute - e.update - e.overhead, m.kernels / steps},
             {"update", e.update, m.update / steps},
             {"overhead", e.overhead, m.other() / steps},
             {"messages", e.communication, m.messages / steps}};
  return t;
}

}  // namespace pcgx::runner
