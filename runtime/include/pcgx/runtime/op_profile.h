#pragma once
// Measured operator times for the cost model (`pcgx optimize --profile`,
// format "pcgx.profile", see pcg/profile.h), taken from a training
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

#include "pcgx/pcg/profile.h"
#include "pcgx/runtime/trainer.h"

namespace pcgx::runtime {

// Throws pcgx::Error when the run timed no kernel (time_kernels was off).
Profile profile_from_run(const Graph& g, const TrainResult& run);

}  // namespace pcgx::runtime
