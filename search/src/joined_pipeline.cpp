// A pipelined plan's chunks joined into one PCG (joined_pipeline.h).
#include "joined_pipeline.h"

#include <algorithm>

#include "pcgx/pcg/pipeline_chunks.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/search/machine_mapping.h"

namespace pcgx::search {

JoinedPlan join_chunks(const std::string& name, std::span<const JoinedChunk> chunks) {
  std::vector<JoinPart> parts;
  for (const JoinedChunk& c : chunks) parts.push_back({c.graph, c.piece});
  std::vector<JoinOrigin> origin;
  JoinedPlan out;
  out.graph = join_pieces(name, parts, &origin);
  out.views.resize(out.graph.size());
  for (const Node& n : out.graph.nodes()) {
    if (is_source(n)) continue;
    const JoinOrigin o = origin[static_cast<size_t>(n.id)];
    const JoinedChunk& c = chunks[static_cast<size_t>(o.part)];
    MachineView view = (*c.views)[static_cast<size_t>(o.node)];
    view.start = c.first_device + std::max<int64_t>(view.start, 0);
    out.views[static_cast<size_t>(n.id)] = view;
  }
  return out;
}

JoinedPeak joined_peak(const JoinedPlan& plan, int64_t devices, const TrainingRecipe& recipe, const PipelineShape& shape) {
  std::vector<int64_t> chunk;  // per node (pcg/pipeline_chunks.h); one chunk: none
  if (shape.chunks() > 1) chunk = pipeline_chunks(plan.graph, std::span<const MachineView>(plan.views), devices, shape);
  const Placement place(plan.graph, plan.views, devices);
  const std::vector<DeviceMemory> held = memory_breakdown(place, recipe, shape, chunk);
  JoinedPeak peak;
  for (size_t d = 0; d < held.size(); ++d)
    if (held[d].total() > peak.bytes) peak.bytes = held[d].total(), peak.device = static_cast<int64_t>(d);
  return peak;
}

}  // namespace pcgx::search
