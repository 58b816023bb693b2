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
#include "pcgx/search/pipeline.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/rulesets/ruleset.h"

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

// search::optimize_pipeline with no rules: `algorithm` (with
// `tensor_degree` where it states one) on `devices` devices of `machine`.
inline search::PipelineResult pipeline_plan(const Graph& g, const std::string& machine, int devices, search::Algorithm algorithm,
                                            search::PipelineOptions po, int64_t tensor_degree = 0) {
  static const Ruleset empty;
  static const search::RuleLibrary rules(empty);
  search::SearchOptions o;
  o.algorithm = algorithm, o.tensor_degree = tensor_degree;
  const search::CostModel cm(search::find_machine(machine).with_devices(devices), search::default_efficiency());
  return search::optimize_pipeline(g, rules, cm, o, po);
}

// A pipeline search's strategy, ready for runtime::train.
inline MappedPlan plan_of(const search::PipelineResult& r, int devices) {
  return {r.search.strategy.graph, {r.search.strategy.views.begin(), r.search.strategy.views.end()}, devices};
}

}  // namespace pcgx::testing
