#pragma once
// Which pipeline chunk (pipeline_schedule.h) each node of a placed,
// pipelined graph belongs to: one rule for the simulator, which runs a
// chunk's body per schedule step, and the runtime, which runs a chunk's
// nodes in that step.
//
// Stage s holds devices [s D / S, (s + 1) D / S). The operators that run
// tasks, in graph order, fall into runs on one stage each: run c is chunk
// c, which must be on stage c mod S (at most S v runs); with interlaced
// chunks (pipeline_schedule.h), an operator on the devices of more than one
// stage is in an interlaced chunk, which the shape must have there, and
// the staged chunks are counted without them. Every other node (a
// source's layout included: what is computed from weights alone, an
// input's slices)
// goes with the first chunk that reads what it writes (a layout change
// between two stages runs on the receiving stage), else with the last
// chunk it reads from, else chunk 0.
#include <cstdint>
#include <span>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/pcg/pipeline_schedule.h"

namespace pcgx {

// `task_devices`: per node, the devices its tasks run on (empty: a node
// that runs none). Throws pcgx::Error naming the operator when one runs
// on two stages (without interlaced chunks) or starts a chunk on the wrong
// stage, or when the stages
// do not divide the devices.
std::vector<int64_t> pipeline_chunks(const Graph& g, const std::vector<std::vector<int64_t>>& task_devices, int64_t devices,
                                     const PipelineShape& p);
// The same for g under machine views `views`: the devices of the tasks of
// every node the runtime runs as tasks (step_communication.h's node_runs),
// the stages splitting `devices` (the devices the strategy uses).
std::vector<int64_t> pipeline_chunks(const Graph& g, std::span<const MachineView> views, int64_t devices, const PipelineShape& p);

}  // namespace pcgx
