// pcgx eval: a model's loss (and accuracy) over a data set with given
// weights, forward only (runner/evaluate.h).
#include <iomanip>
#include <iostream>

#include "cli_common.h"
#include "pcgx/runner/evaluate.h"

namespace pcgx::cli {

void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "A model's loss (and accuracy, for a classifier) over a data set with given weights, without training");
  static runner::EvalRequest q;
  static std::string backend = "auto", precision;
  static std::vector<std::string> sets;
  static int64_t batch = 0, threads = 0;
  cmd->add_option("MODEL|STRATEGY", q.target, "zoo model name, graph JSON file, or strategy file (pcgx optimize -o)")->required();
  cmd->add_option("--weights", q.weights, "the weights: a safetensors file by Weight name (pcgx run --save-weights)")->required();
  cmd->add_option("--data", q.data,
                  "a directory with NAME.npy per model input, [N, ...] each (as pcgx run --data); default: the synthetic teacher "
                  "task of --seed with --batches batches");
  cmd->add_option("--devices", q.devices, "devices (default: 1, or what the strategy needs); a model on several runs data parallel")
      ->check(positive());
  cmd->add_option("--backend", backend, "auto, cpu, mpi or cuda, as pcgx run")->capture_default_str();
  cmd->add_option("--threads", threads, "kernel threads per device (0: this machine's cores divided among the devices)");
  cmd->add_option("--batch", batch, "global batch size of a zoo model (default: the model's)")->check(positive());
  cmd->add_option("--set", sets, "override a size parameter of a zoo model: key=value (repeatable)");
  cmd->add_option("--seed", q.seed, "seed of the synthetic task (without --data)")->capture_default_str();
  cmd->add_option("--batches", q.batches, "batches of the synthetic task (without --data)")->capture_default_str();
  cmd->add_option("--machine", q.machine, "machine whose views lay a model out data parallel")->capture_default_str();
  cmd->add_option("--precision", precision, std::string(kPrecisionHelp) + " (default: the strategy's, else tf32)");
  cmd->callback([] {
    name_flags({{"EvalRequest.batches", "--batches"}, {"EvalRequest.devices", "--devices"}, {"EvalRequest.sizes", "--batch/--set"}});
    ChosenBackend chosen = choose_backend(backend);
    const QuietRank quiet(chosen.world && chosen.world->rank() != 0);
    q.backend = chosen.kind;
    q.threads = static_cast<int>(threads);
    q.sizes = parse_sets(sets);
    if (batch > 0) q.sizes["batch"] = batch;
    if (!precision.empty()) q.precision = parse_precision(precision);
    const runner::EvalReport r = runner::evaluate(q, chosen.world.get());
    std::cout << "model                 " << r.model << " (" << r.layout << ")\n"
              << "devices               " << r.devices << " (" << (chosen.gpu ? "cuda" : "cpu")
              << (chosen.world ? ", MPI: one rank each)" : ", in-process)") << "\n"
              << (is_mixed(r.precision) ? std::string("precision             ") + name(r.precision) + "\n" : std::string())
              << "data                  " << r.result.data << "\n"
              << "samples               " << r.result.samples << " in " << r.result.batches << " batch"
              << (r.result.batches == 1 ? "" : "es") << "\n"
              << std::setprecision(8) << "loss                  " << r.result.loss << "\n";
    if (r.result.classification) std::cout << std::fixed << std::setprecision(4) << "accuracy              " << r.result.accuracy << "\n";
  });
}

}  // namespace pcgx::cli
