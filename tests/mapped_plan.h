#pragma once
// A PCG placed by the machine mapper on `devices` devices of a DGX-H100,
// ready for runtime::train: what the runtime tests run.
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
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

// A zoo model at batch 8, data parallel on `devices` devices.
inline MappedPlan zoo_data_parallel(const std::string& model, int devices) {
  return mapped_plan(search::data_parallel(build_model(model, {{"batch", 8}}), devices), devices);
}

// The expert's plan for a zoo model at batch 8 on 4 devices (DLRM:
// model-parallel tables, data-parallel MLPs).
inline MappedPlan zoo_expert(const std::string& model) {
  const Graph g = build_model(model, {{"batch", 8}});
  return mapped_plan(*search::expert(g, search::find_machine("dgx-h100").with_devices(4), 4, 2), 4);
}

}  // namespace pcgx::testing
