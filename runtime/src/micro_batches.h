#pragma once
// make_plan's part for micro-batches (execution_plan.h): each node's
// StepPhase, the plan's micro-batch count, and the layout changes of
// pipelined tensors cut down to one micro-batch's slices.
#include "pcgx/runtime/execution_plan.h"

namespace pcgx::runtime {

// Fills plan.phase and plan.micro_batches and rewrites the pieces of
// pipelined layout changes; throws pcgx::Error naming the node for a plan
// whose micro-batches cannot run one at a time.
void plan_micro_batches(ExecutionPlan& plan);

}  // namespace pcgx::runtime
