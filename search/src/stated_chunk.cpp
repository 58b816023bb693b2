// A written plan's pipeline chunk cut into micro-batches, its conversions
// searched (see stated_chunk.h).
#include "stated_chunk.h"

#include <cmath>
#include <span>

#include "pcgx/search/pipeline.h"
#include "pcgx/search/simulator.h"

namespace pcgx::search {
namespace {

// `g` at `views` cut into micro-batches and mapped; a placed plan's
// stated views kept and the chunk priced by simulation.
SlicedChunk slice(const Graph& g, std::span<const MachineView> views, int64_t micro_batches, bool last, const MachineMapper& on,
                  bool placed) {
  SlicedChunk c;
  std::vector<NodeId> image;  // g's nodes in the cut graph
  c.graph = pipelined(g, micro_batches, last, &image);
  c.mapped = on.map(c.graph);
  if (placed) {
    for (size_t k = 0; k < image.size() && k < views.size(); ++k)
      if (views[k].placed()) c.mapped.views[static_cast<size_t>(image[k])] = views[k];
    c.mapped.estimate = simulated_estimate(Simulator(c.graph, c.mapped.views, on.cost()));
  }
  return c;
}

}  // namespace

SlicedChunk slice_stated_chunk(const Strategy& found, int64_t micro_batches, bool last, const MachineMapper& on, bool placed,
                               bool layout_search) {
  SlicedChunk as_lowered = slice(found.graph, found.views, micro_batches, last, on, placed);
  if (!layout_search || !std::isfinite(as_lowered.mapped.estimate.time)) return as_lowered;
  Relaid r = cheapest_layout_changes(found.graph, found.views, on.cost());
  if (r.choices.empty()) return as_lowered;
  SlicedChunk relaid = slice(r.graph, r.views, micro_batches, last, on, placed);
  if (!relaid.mapped.estimate.feasible || !(relaid.mapped.estimate.time < as_lowered.mapped.estimate.time)) return as_lowered;
  relaid.relaid = std::move(r.choices);
  return relaid;
}

}  // namespace pcgx::search
