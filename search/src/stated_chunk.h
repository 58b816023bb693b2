#pragma once
// A written plan's pipeline chunk (pipeline.cpp): lowered as the plan
// states it on one stage's devices, then cut into the step's
// micro-batches and mapped there. Its conversions between operators are
// searched as a plan of one stage's are (layout_search.h), on the chunk
// before it is cut (a conversion over micro-slices is not rebuilt there),
// and kept only where the chunk cut into its micro-batches, mapped and
// priced again, is faster: the choice is judged as the pipeline runs it.
#include <cstdint>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/search/layout_search.h"
#include "pcgx/search/machine_mapping.h"

namespace pcgx::search {

struct SlicedChunk {
  Graph graph;                       // the chunk in its micro-batches (pipeline.h's pipelined)
  Strategy mapped;                   // graph on the stage's devices (views from 0)
  std::vector<LayoutChoice> relaid;  // the conversions rewritten, each priced on the chunk's whole batch; empty: as lowered
};

// `found`: the chunk as lowered (optimize with Algorithm::kPlan), its
// views the stated devices where the plan places operators (`placed`:
// those views are kept, the rest mapped by `on`, and the chunk priced by
// simulation, as such a plan is). `last`: the model's last chunk (its
// outputs gathered back from their micro-batches). With `layout_search`
// false, or nothing cheaper found, the chunk as lowered.
SlicedChunk slice_stated_chunk(const Strategy& found, int64_t micro_batches, bool last, const MachineMapper& on, bool placed,
                               bool layout_search);

}  // namespace pcgx::search
