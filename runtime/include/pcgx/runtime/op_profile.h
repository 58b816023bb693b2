#pragma once
// Measured operator times for the cost model (`pcgx optimize --profile`,
// format "pcgx.profile", see search/cost_model.h), taken from a training
// run with TrainOptions::time_kernels: per compute operator, the mean time
// of one task's kernel (forward) and gradient rule (backward) over the
// steps after the first, keyed by the operator and one task's input shard
// shapes as the cost model looks them up. Operators that share a key are
// averaged. The optimizer's update is measured too, as parameter bytes per
// second. The times are what the runtime measured as it ran: with more
// virtual devices than cores they include the sharing of those cores.
#include <cstdint>
#include <string>
#include <vector>

#include "pcgx/runtime/trainer.h"

namespace pcgx::runtime {

struct OpTime {
  std::string op;
  std::vector<std::vector<int64_t>> inputs;  // one task's input shard shapes
  double forward = 0, backward = 0;          // seconds per task
};

struct RunProfile {
  std::vector<OpTime> times;
  double update_bytes_per_second = 0;  // the optimizer's rate on one device (0: no parameters)
};

// Throws pcgx::Error when the run timed no kernel (time_kernels was off).
RunProfile profile_from_run(const Graph& g, const TrainResult& run);

// The "pcgx.profile" JSON text (format_version 1).
std::string profile_json(const RunProfile& p, const std::string& device);

}  // namespace pcgx::runtime
