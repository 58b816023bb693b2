// pcgx eval: a model's loss (and accuracy) over a data set with given
// weights, forward only (runtime/evaluate.h).
#include <iomanip>
#include <iostream>
#include <optional>

#include "cli_common.h"
#include "pcgx/pcg/error.h"
#include "pcgx/runner/backend_choice.h"
#include "pcgx/runtime/dataset.h"
#include "pcgx/runtime/evaluate.h"
#include "pcgx/runtime/execution_plan.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/mpi.h"
#include "pcgx/runtime/safetensors.h"
#include "pcgx/runtime/train_state.h"
#include "pcgx/runtime/trainer.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/strategy_json.h"

namespace pcgx::cli {

void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "A model's loss (and accuracy, for a classifier) over a data set with given weights, without training");
  static std::string target, weights, data, backend = "auto", machine_name = "cpu-host";
  static std::vector<std::string> sets;
  static int64_t devices = 0, batch = 0, seed = 1, batches = 8, threads = 0;
  cmd->add_option("MODEL|STRATEGY", target, "zoo model name, graph JSON file, or strategy file (pcgx optimize -o)")->required();
  cmd->add_option("--weights", weights, "the weights: a safetensors file by Weight name (pcgx run --save-weights)")->required();
  cmd->add_option("--data", data,
                  "a directory with NAME.npy per model input, [N, ...] each (as pcgx run --data); default: the synthetic teacher "
                  "task of --seed with --batches batches");
  cmd->add_option("--devices", devices, "devices (default: 1, or what the strategy needs); a model on several runs data parallel")
      ->check(positive());
  cmd->add_option("--backend", backend, "auto, cpu, mpi or cuda, as pcgx run")->capture_default_str();
  cmd->add_option("--threads", threads, "kernel threads per device (0: this machine's cores divided among the devices)");
  cmd->add_option("--batch", batch, "global batch size of a zoo model (default: the model's)")->check(positive());
  cmd->add_option("--set", sets, "override a size parameter of a zoo model: key=value (repeatable)");
  cmd->add_option("--seed", seed, "seed of the synthetic task (without --data)")->capture_default_str();
  cmd->add_option("--batches", batches, "batches of the synthetic task (without --data)")->capture_default_str();
  cmd->add_option("--machine", machine_name, "machine whose views lay a model out data parallel")->capture_default_str();
  cmd->callback([] {
    ChosenBackend chosen = choose_backend(backend);
    const runner::BackendKind kind = chosen.kind;
    const bool gpu = chosen.gpu;
    std::unique_ptr<runtime::MpiWorld> world = std::move(chosen.world);
    const QuietRank quiet(world && world->rank() != 0);
    if (batches < 1) throw Error("--batches: must be at least 1");
    if (world) {
      if (devices != 0 && devices != world->size())
        throw Error("--devices: " + std::to_string(devices) + " given, but there are " + std::to_string(world->size()) + " MPI ranks");
      devices = world->size();
    }
    Graph graph;
    std::vector<MachineView> views;
    std::string layout = "unpartitioned";
    if (is_strategy_file(target)) {
      if (batch > 0 || !sets.empty()) throw Error("--batch/--set: a strategy fixes the model's sizes (" + target + ")");
      search::StrategyFile f = search::load_strategy(target);
      graph = std::move(f.strategy.graph);
      views.assign(f.strategy.views.begin(), f.strategy.views.end());
      const int need = runtime::devices_needed(graph, views);
      if (devices == 0) devices = need;
      if (devices < need) throw Error("--devices: " + target + " needs " + std::to_string(need) + " devices, " + std::to_string(devices) + " given");
      layout = f.search + " (" + target + ")";
    } else {
      std::vector<std::string> model_sets = sets;
      if (batch > 0) model_sets.push_back("batch=" + std::to_string(batch));
      graph = load_model(target, model_sets);
      if (devices == 0) devices = 1;
      if (devices > 1) {
        const search::CostModel cm(search::find_machine(machine_name).with_devices(devices), search::default_efficiency());
        const search::Strategy s = search::MachineMapper(cm).map(search::data_parallel(graph, devices));
        graph = s.graph;
        views.assign(s.views.begin(), s.views.end());
        layout = "data parallel";
      }
    }
    if (!world && devices > runtime::kMaxInProcessDevices)
      throw Error("--devices: more than the " + std::to_string(runtime::kMaxInProcessDevices) + " devices the in-process runtime runs");
    const runtime::NamedTensors w = runtime::read_safetensors(weights);
    {
      std::vector<NodeId> weight_nodes;
      for (const Node& n : graph.nodes())
        if (n.op->is_weight) weight_nodes.push_back(n.id);
      runtime::check_weights(w, graph, weight_nodes, weights);
    }
    std::unique_ptr<runtime::NpyDataset> dataset;
    runtime::EvalOptions o;
    o.weights = &w, o.seed = static_cast<uint64_t>(seed), o.batches = batches;
    if (!data.empty()) o.data = (dataset = std::make_unique<runtime::NpyDataset>(graph, data)).get();
    o.backend = runner::backend_factory({kind, world != nullptr, true});
    o.threads = threads > 0 ? static_cast<int>(threads) : runtime::default_kernel_threads(world ? runtime::mpi_local_ranks(world->size())
                                                                                               : static_cast<int>(devices));
    const runtime::EvalResult r =
        world ? runtime::evaluate(graph, views, *world, o) : runtime::evaluate(graph, views, static_cast<int>(devices), o);
    std::cout << "model                 " << graph.name() << " (" << layout << ")\n"
              << "devices               " << devices << " (" << (gpu ? "cuda" : "cpu") << (world ? ", MPI: one rank each)" : ", in-process)") << "\n"
              << "data                  " << r.data << "\n"
              << "samples               " << r.samples << " in " << r.batches << " batch" << (r.batches == 1 ? "" : "es") << "\n"
              << std::setprecision(8) << "loss                  " << r.loss << "\n";
    if (r.classification) std::cout << std::fixed << std::setprecision(4) << "accuracy              " << r.accuracy << "\n";
  });
}

}  // namespace pcgx::cli
