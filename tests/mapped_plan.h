#pragma once
// A PCG placed by the machine mapper on `devices` devices of a DGX-H100,
// ready for runtime::train: what the runtime tests run.
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/search/machine_mapping.h"

namespace pcgx::testing {

struct MappedPlan {
  Graph graph;
  std::vector<MachineView> views;
  int devices = 1;
};

inline MappedPlan mapped_plan(const Graph& g, int devices) {
  const search::CostModel cm(search::find_machine("dgx-h100").with_devices(devices), search::default_efficiency());
  const search::Strategy s = search::MachineMapper(cm).map(g);
  return {s.graph, {s.views.begin(), s.views.end()}, devices};
}

}  // namespace pcgx::testing
