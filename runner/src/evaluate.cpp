#include "pcgx/runner/evaluate.h"

#include <memory>

#include "pcgx/pcg/error.h"
#include "pcgx/runner/model_source.h"
#include "pcgx/runtime/dataset.h"
#include "pcgx/runtime/execution_plan.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/safetensors.h"
#include "pcgx/runtime/train_state.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/strategy_json.h"

namespace pcgx::runner {

EvalReport evaluate(const EvalRequest& req, runtime::MpiWorld* world) {
  if (req.batches < 1) throw FieldError("EvalRequest.batches", "must be at least 1");
  int64_t devices = req.devices;
  if (world) {
    if (devices != 0 && devices != world->size())
      throw FieldError("EvalRequest.devices", std::to_string(devices) + " given, but there are " + std::to_string(world->size()) + " MPI ranks");
    devices = world->size();
  }
  EvalReport report;
  Graph graph;
  std::vector<MachineView> views;
  report.layout = "unpartitioned";
  if (is_strategy_file(req.target)) {
    if (!req.sizes.empty()) throw FieldError("EvalRequest.sizes", "a strategy fixes the model's sizes (" + req.target + ")");
    search::StrategyFile f = search::load_strategy(req.target);
    report.precision = f.recipe.precision;
    graph = std::move(f.strategy.graph);
    views.assign(f.strategy.views.begin(), f.strategy.views.end());
    const int need = runtime::devices_needed(graph, views);
    if (devices == 0) devices = need;
    if (devices < need)
      throw FieldError("EvalRequest.devices", req.target + " needs " + std::to_string(need) + " devices, " + std::to_string(devices) + " given");
    report.layout = f.search + " (" + req.target + ")";
  } else {
    graph = load_model(req.target, req.sizes).graph;
    if (devices == 0) devices = 1;
    if (devices > 1) {
      const search::CostModel cm(search::find_machine(req.machine).with_devices(devices), search::default_efficiency());
      const search::Strategy s = search::MachineMapper(cm).map(search::data_parallel(graph, devices));
      graph = s.graph;
      views.assign(s.views.begin(), s.views.end());
      report.layout = "data parallel";
    }
  }
  if (!world && devices > runtime::kMaxInProcessDevices)
    throw FieldError("EvalRequest.devices", "more than the " + std::to_string(runtime::kMaxInProcessDevices) + " devices the in-process runtime runs");
  const runtime::NamedTensors w = runtime::read_safetensors(req.weights);
  std::vector<NodeId> weight_nodes;
  for (const Node& n : graph.nodes())
    if (n.op->is_weight) weight_nodes.push_back(n.id);
  runtime::check_weights(w, graph, weight_nodes, req.weights);
  std::unique_ptr<runtime::NpyDataset> dataset;
  runtime::EvalOptions o;
  if (req.precision) report.precision = *req.precision;
  o.weights = &w, o.seed = req.seed, o.batches = req.batches, o.precision = report.precision;
  if (!req.data.empty()) o.data = (dataset = std::make_unique<runtime::NpyDataset>(graph, req.data)).get();
  o.backend = backend_factory({req.backend, world != nullptr, report.precision});
  o.threads = req.threads > 0 ? req.threads
                              : runtime::default_kernel_threads(world ? runtime::mpi_local_ranks(world->size()) : static_cast<int>(devices));
  report.result = world ? runtime::evaluate(graph, views, *world, o) : runtime::evaluate(graph, views, static_cast<int>(devices), o);
  report.model = graph.name();
  report.devices = devices;
  return report;
}

}  // namespace pcgx::runner
