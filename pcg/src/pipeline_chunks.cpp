// Nodes into pipeline chunks (see pipeline_chunks.h).
#include "pcgx/pcg/pipeline_chunks.h"

#include <algorithm>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/step_communication.h"

namespace pcgx {

std::vector<int64_t> pipeline_chunks(const Graph& g, const std::vector<std::vector<int64_t>>& task_devices, int64_t devices,
                                     const PipelineShape& p) {
  const int64_t S = p.stages;
  if (S < 1 || devices % S != 0)
    throw Error("pipeline: " + std::to_string(S) + " stages do not divide the " + std::to_string(devices) + " devices");
  const int64_t per = devices / S;
  std::vector<int64_t> chunk(g.size(), -1);
  int64_t run = -1, at = -2;  // (-1: an interlaced chunk's stage)
  // What is computed from weights alone (a weight's layout, run once per
  // step where its reader wants it) goes with its reader, as the rest.
  const SourceLayouts layouts = source_layouts(g);
  for (const Node& n : g.nodes()) {
    const auto& dev = task_devices[static_cast<size_t>(n.id)];
    if (dev.empty() || layouts.is_layout(g, n.id)) continue;
    const auto [lo, hi] = std::minmax_element(dev.begin(), dev.end());
    if (*lo < 0 || *hi >= devices)
      throw Error("pipeline: " + describe(n) + " runs a task on device " + std::to_string(*lo < 0 ? *lo : *hi) + " of " +
                  std::to_string(devices));
    // An operator on the devices of several stages is in an interlaced
    // chunk (stage -1), which the shape must have there.
    const int64_t stage = *hi / per != *lo / per ? -1 : *lo / per;
    if (stage < 0 && p.interlaced.empty())
      throw Error("pipeline: " + describe(n) + " runs on devices of stages " + std::to_string(*lo / per) + " and " + std::to_string(*hi / per) +
                  " (a stage holds " + std::to_string(per) + " devices)");
    if (stage != at) {
      ++run, at = stage;
      auto where = [&](int64_t s) { return s < 0 ? std::string("every stage (interlaced)") : "stage " + std::to_string(s); };
      if (run >= p.chunks() || p.stage_of(run) != stage)
        throw Error("pipeline: " + describe(n) + " starts chunk " + std::to_string(run) + " of the model on " + where(stage) + ", where " +
                    std::to_string(S) + " stages of " + std::to_string(p.virtual_stages) + " virtual stages" +
                    (p.interlaced.empty() ? std::string() : " and " + std::to_string(p.interlaced.size()) + " interlaced chunks") + " put chunk " +
                    std::to_string(run) + (run >= p.chunks() ? " nowhere (too many chunks)" : " on " + where(p.stage_of(run))));
    }
    chunk[static_cast<size_t>(n.id)] = run;
  }
  std::vector<std::vector<NodeId>> readers(g.size());
  for (const Node& n : g.nodes())
    for (const TensorRef& t : n.inputs) readers[static_cast<size_t>(t.node)].push_back(n.id);
  for (size_t k = g.size(); k-- > 0;) {
    if (chunk[k] >= 0) continue;
    for (NodeId r : readers[k]) {
      const int64_t c = chunk[static_cast<size_t>(r)];
      if (c >= 0 && (chunk[k] < 0 || c < chunk[k])) chunk[k] = c;
    }
  }
  for (const Node& n : g.nodes()) {
    int64_t& c = chunk[static_cast<size_t>(n.id)];
    if (c >= 0) continue;
    for (const TensorRef& t : n.inputs) c = std::max(c, chunk[static_cast<size_t>(t.node)]);
    c = std::max<int64_t>(c, 0);
  }
  return chunk;
}

std::vector<int64_t> pipeline_chunks(const Graph& g, std::span<const MachineView> views, int64_t devices, const PipelineShape& p) {
  const Placement place(g, views, devices);
  const std::vector<NodeRun> runs = node_runs(place, source_layouts(g), RunDetail::kKinds);
  std::vector<std::vector<int64_t>> tasks(g.size());
  for (const Node& n : g.nodes())
    if (runs[static_cast<size_t>(n.id)].kind == NodeRun::Kind::kTasks) tasks[static_cast<size_t>(n.id)] = place.task_devices(n.id);
  return pipeline_chunks(g, tasks, devices, p);
}

}  // namespace pcgx
