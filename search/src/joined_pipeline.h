#pragma once
// A pipelined plan's chunks joined into one PCG, as the strategy stores it
// and the simulator and the runtime run it (pipeline.cpp).
#include <span>
#include <string>
#include <vector>

#include "graph_splitting.h"
#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/training_recipe.h"

namespace pcgx::search {

// One chunk of a plan: its searched graph, the piece it maps back with, its
// views from device 0 of its stage, and the stage's first device.
struct JoinedChunk {
  const Graph* graph;
  const PieceGraph* piece;
  const std::vector<MachineView>* views;
  int64_t first_device = 0;
};

struct JoinedPlan {
  Graph graph;
  std::vector<MachineView> views;  // each chunk's offset to its stage's devices
};

// The chunks joined in order (join_pieces), each node's view offset to its
// chunk's devices.
JoinedPlan join_chunks(const std::string& name, std::span<const JoinedChunk> chunks);

// The most any device keeps of the joined plan under `shape`'s schedule
// (memory_breakdown's count, what the simulator counts and the runtime
// holds), and the device that keeps it.
struct JoinedPeak {
  double bytes = 0;
  int64_t device = 0;
};
JoinedPeak joined_peak(const JoinedPlan& plan, int64_t devices, const TrainingRecipe& recipe, const PipelineShape& shape);

}  // namespace pcgx::search
