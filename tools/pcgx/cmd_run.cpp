// pcgx run: train a model or a strategy with the runtime (runtime/), after
// an optional search (search/).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <unistd.h>

#include "cli_common.h"
#include "print_estimate.h"
#include "pcgx/runner/backend_choice.h"
#include "pcgx/runner/step_terms.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/runtime/dataset.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/mpi.h"
#include "pcgx/runtime/op_profile.h"
#include "pcgx/runtime/run_report.h"
#include "pcgx/runtime/safetensors.h"
#include "pcgx/runtime/train_state.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/unity_search.h"

namespace pcgx::cli {
namespace {


void print_progress(const runtime::StepReport& r, int64_t batch, bool tty, std::chrono::steady_clock::time_point& last) {
  const auto now = std::chrono::steady_clock::now();
  const bool final = r.step == r.steps;
  if (!final && now - last < std::chrono::milliseconds(tty ? 100 : 1000)) return;
  last = now;
  const int width = 30;
  const auto done = static_cast<int>(width * r.step / r.steps);
  std::string bar(static_cast<size_t>(done), '#');
  bar.resize(width, '.');
  char line[160];
  std::snprintf(line, sizeof line, "  [%s] step %lld/%lld  loss %.6g  %.1f samples/s", bar.c_str(), static_cast<long long>(r.step),
                static_cast<long long>(r.steps), r.loss, static_cast<double>(batch) / std::max(r.seconds, 1e-9));
  std::cerr << (tty ? "\r\033[K" : "") << line << (tty && !final ? "" : "\n") << std::flush;
}


}  // namespace

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Train a model (or a strategy file from `pcgx optimize`) on N devices with the runtime");
  static std::string target, backend = "auto", machine_name = "cpu-host", ruleset_path = std::string(PCGX_RULESETS_DIR) + "/unity-v1.json",
                     search_kind = "unity", report = "run-report.json", plot = "loss.svg", optimizer = "sgd", data, profile_out, profile_in, trace,
                     init_weights, save_weights, checkpoint_dir, resume_dir;
  static std::vector<std::string> sets;
  static int64_t threads = 0, devices = 0, steps = 50, batch = 0, seed = 1, batches = 8, budget = 12, checkpoint_every = 0;
  static double lr = 0.01, momentum = 0.9, bucket_mb = 25;
  static bool optimize = false, breakdown = false, no_report = false, no_plot = false, allow_unverified = false, strict_fp32 = false;
  cmd->add_option("MODEL|STRATEGY", target, "zoo model name, graph JSON file, or strategy file")->required();
  cmd->add_flag("--optimize", optimize, "search a strategy first (with --ruleset, --search, --machine)");
  cmd->add_option("--devices", devices, "devices to train on (default: 1, or what the strategy needs)")->check(positive());
  cmd->add_option("--backend", backend,
                  "cpu (virtual devices, one thread each, in this process), mpi (one device per rank of mpirun -np N) or "
                  "cuda (GPUs: device d on GPU d mod the GPUs visible; one rank per GPU under mpirun); "
                  "auto: cuda when a GPU is visible, else mpi when started by mpirun, else cpu")
      ->capture_default_str();
  cmd->add_flag("--strict-fp32", strict_fp32, "cuda: products in strict FP32 (default: TF32 tensor cores, as PyTorch with allow_tf32)");
  cmd->add_option("--threads", threads,
                  "kernel threads per device (0, the default: this machine's cores divided among the devices on it); "
                  "results do not depend on it");
  cmd->add_option("--steps", steps, "training steps")->capture_default_str();
  cmd->add_option("--batch", batch, "global batch size of a zoo model (default: the model's)")->check(positive());
  cmd->add_option("--lr", lr, "learning rate")->capture_default_str();
  cmd->add_option("--optimizer", optimizer, "sgd (with --momentum) or adam")->capture_default_str();
  cmd->add_option("--momentum", momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--seed", seed, "seed of the initial weights and the synthetic task")->capture_default_str();
  cmd->add_option("--batches", batches, "distinct synthetic batches, cycled")->capture_default_str();
  cmd->add_option("--data", data, "train on user data: a directory with NAME.npy per model input, [N, ...] each (default: a synthetic teacher task)");
  cmd->add_option("--machine", machine_name, "machine the search and the prediction assume")->capture_default_str();
  cmd->add_option("--ruleset", ruleset_path, "ruleset for --optimize")->capture_default_str();
  cmd->add_option("--search", search_kind, "search algorithm for --optimize (see pcgx optimize)")->capture_default_str();
  cmd->add_option("--budget", budget, "search budget for --optimize")->capture_default_str();
  cmd->add_option("--bucket-mb", bucket_mb, "gradient buckets of this many MiB, all-reduced as they fill (PyTorch DDP's bucket_cap_mb)")
      ->capture_default_str();
  cmd->add_option("--set", sets, "override a size parameter of a zoo model: key=value (repeatable)");
  cmd->add_option("--report", report, "run report to write (JSON)")->capture_default_str();
  cmd->add_option("--plot", plot, "loss curve to write (SVG)")->capture_default_str();
  cmd->add_flag("--allow-unverified", allow_unverified, kAllowUnverifiedHelp);
  cmd->add_flag("--no-report", no_report, "write no run report");
  cmd->add_flag("--no-plot", no_plot, "write no loss curve");
  cmd->add_option("--profile", profile_in, "measured operator times for the search and the prediction (pcgx.profile JSON, e.g. from --profile-out)");
  cmd->add_flag("--breakdown", breakdown,
               "time kernels, messages and the optimizer, and print the busiest device's step beside the prediction term by term");
  cmd->add_option("--profile-out", profile_out,
                  "write the kernel time of every operator measured during training, per task and shard shapes "
                  "(pcgx.profile JSON, for pcgx optimize --profile)");
  cmd->add_option("--init-weights", init_weights,
                  "start from these weights: a safetensors file whose names are the model's Weight names (pcgx info lists them; "
                  "--save-weights writes one, PyTorch's safetensors.torch.save_file too)");
  cmd->add_option("--save-weights", save_weights, "write the trained weights to a safetensors file (float32, by Weight name)");
  cmd->add_option("--checkpoint", checkpoint_dir,
                  "write a checkpoint directory (weights.safetensors, optimizer.safetensors, state.json) every --checkpoint-every "
                  "steps and after the last, replacing the previous one whole");
  cmd->add_option("--checkpoint-every", checkpoint_every, "steps between checkpoints (default: only after the last step)");
  cmd->add_option("--resume", resume_dir,
                  "go on from a checkpoint directory: its step is the first to run and --steps the total, so 10 steps, then "
                  "--resume with --steps 20, train as 20 steps do");
  cmd->add_option("--trace", trace,
                  "write the last step's measured timeline on every device: kernels, messages sent and waited for, collectives "
                  "(Chrome trace-event JSON, as pcgx simulate --trace writes; under MPI, rank 0's)");
  cmd->callback([] {
    ChosenBackend chosen = choose_backend(backend);
    const runner::BackendKind kind = chosen.kind;
    const bool gpu = chosen.gpu;
    std::unique_ptr<runtime::MpiWorld> world = std::move(chosen.world);
    const bool rank0 = !world || world->rank() == 0;
    QuietRank quiet(!rank0);
    bool training = false;  // past this point an error on one rank must end them all
    try {
    if (world) {
      if (devices != 0 && devices != world->size())
        throw Error("--devices: " + std::to_string(devices) + " given, but there are " + std::to_string(world->size()) +
                    " MPI ranks (one device per rank: use mpirun -np " + std::to_string(devices) + ")");
      devices = world->size();
    }
    if (steps < 1) throw Error("--steps: must be at least 1");
    if (budget < 1) throw Error("--budget: must be at least 1");
    if (devices < 0) throw Error("--devices: must be positive");
    if (batches < 1) throw Error("--batches: must be at least 1");
    if (batch < 0) throw Error("--batch: must be positive");
    if (threads < 0) throw Error("--threads: must be positive");
    runtime::TrainOptions o;
    o.backend = runner::backend_factory({kind, world != nullptr, !strict_fp32});
    o.steps = steps, o.seed = static_cast<uint64_t>(seed), o.batches = batches;
    o.optimizer.kind = optimizer, o.optimizer.lr = lr, o.optimizer.momentum = momentum;
    runtime::validate(o.optimizer);
    // The outputs are written after training: a path that cannot be
    // written fails now, not after the work.
    if (rank0) {
      if (!no_report) check_output_path(report);
      if (!no_plot) check_output_path(plot);
      if (!profile_out.empty()) check_output_path(profile_out);
      if (!trace.empty()) check_output_path(trace);
    }
    if (!(bucket_mb > 0) || !std::isfinite(bucket_mb)) throw Error("--bucket-mb: must be a positive number");
    if (checkpoint_every < 0) throw Error("--checkpoint-every: must be positive");
    if (checkpoint_every > 0 && checkpoint_dir.empty()) throw Error("--checkpoint-every: needs --checkpoint DIR");
    if (!init_weights.empty() && !resume_dir.empty()) throw Error("--init-weights: a resumed run takes its weights from --resume");
    if (rank0 && !save_weights.empty()) check_output_path(save_weights);
    if (!checkpoint_dir.empty()) {
      const std::filesystem::path parent = std::filesystem::path(checkpoint_dir).parent_path();
      if (!parent.empty() && !std::filesystem::is_directory(parent)) throw Error("--checkpoint: " + parent.string() + ": no such directory");
    }
    // Read before any search: a bad file fails fast.
    static runtime::NamedTensors given;
    static runtime::TrainState resumed;
    if (!init_weights.empty()) given = runtime::read_safetensors(init_weights), o.initial_weights = &given;
    if (!resume_dir.empty()) resumed = runtime::read_checkpoint(resume_dir), o.resume = &resumed;
    o.bucket_bytes = bucket_mb * 1024 * 1024;

    runtime::RunSummary s;
    s.backend = runner::backend_name(kind);
    Graph graph;
    std::vector<MachineView> views;
    std::unique_ptr<search::MachineMapper> mapper;
    std::unique_ptr<search::CostModel> cost;
    search::Estimate predicted;
    Machine machine = search::find_machine(machine_name);
    std::string devices_from = "--devices";  // or the strategy file, when it decided
    if (is_strategy_file(target)) {
      if (optimize) throw Error("--optimize: " + target + " is already a strategy");
      if (batch > 0 || !sets.empty()) throw Error("--batch/--set: a strategy fixes the model's sizes (" + target + ")");
      search::StrategyFile f = search::load_strategy(target);
      graph = std::move(f.strategy.graph);
      views.assign(f.strategy.views.begin(), f.strategy.views.end());
      s.model = f.model, s.strategy = f.search + " (" + target + ")";
      machine = f.machine;
      if (f.pipeline_stages > 0)
        std::cerr << "note: " << target << " is pipelined (" << f.pipeline_stages << " stages, " << f.micro_batches
                  << " micro-batches); the CPU runtime runs each stage on its devices but processes the micro-batches as one batch, "
                     "without 1F1B overlap\n";
      const int need = runtime::devices_needed(graph, views);
      if (devices == 0) devices = need, devices_from = target;
      if (devices < need)
        throw Error("--devices: " + target + " needs " + std::to_string(need) + " devices, " + std::to_string(devices) + " given");
    } else {
      std::vector<std::string> model_sets = sets;
      if (batch > 0) model_sets.push_back("batch=" + std::to_string(batch));
      std::map<std::string, Tensor<float>> onnx_weights;
      graph = load_model(target, model_sets, &onnx_weights);
      // An ONNX model trains from its initializers unless told otherwise.
      if (!onnx_weights.empty() && !o.initial_weights && !o.resume) given = std::move(onnx_weights), o.initial_weights = &given;
      s.model = graph.name();
      if (devices == 0) devices = 1;
      s.strategy = "unpartitioned";
    }
    if (devices > machine.num_devices())
      throw Error("--devices: " + std::to_string(devices) + " exceeds the " + std::to_string(machine.num_devices()) + " devices of machine " +
                  machine.name + " (choose another --machine)");
    if (!world && devices > runtime::kMaxInProcessDevices)
      throw Error(devices_from + ": " + std::to_string(devices) + " devices, more than the " +
                  std::to_string(runtime::kMaxInProcessDevices) + " the in-process runtime runs (one thread each): run it on MPI ranks (--backend mpi)");
    std::unique_ptr<runtime::NpyDataset> dataset;  // read before any search, so a bad file fails fast
    if (!data.empty()) o.data = (dataset = std::make_unique<runtime::NpyDataset>(graph, data)).get();
    search::CommOptions comm;
    comm.bucket_bytes = o.bucket_bytes;
    cost = std::make_unique<search::CostModel>(machine.with_devices(devices), search::default_efficiency(),
                                               profile_in.empty() ? Profile{} : load_profile(profile_in), comm);
    mapper = std::make_unique<search::MachineMapper>(*cost);
    if (optimize) {
      // Under MPI rank 0 searches and sends the strategy (or its error) to
      // the others, so every rank runs the same plan.
      std::string shared;
      if (rank0) {
        try {
          Ruleset rs;
          if (search_kind == "unity" || search_kind == "sequential" || search_kind == "exhaustive") rs = load_search_ruleset(ruleset_path, allow_unverified);
          const search::RuleLibrary rules(rs);
          search::SearchOptions so;
          so.algorithm = search_kind, so.budget = budget;
          std::cerr << "searching a strategy for " << graph.name() << " on " << devices << " devices of " << machine.name
                    << " (--search " << search_kind << ")\n";
          search::SearchResult r = search::optimize(graph, rules, *mapper, so);
          std::cerr << "  found in " << std::fixed << std::setprecision(2) << r.seconds << " s: " << r.applied.size()
                    << " substitutions, predicted " << r.strategy.estimate.time * 1e3 << " ms per step\n" << std::defaultfloat;
          if (world) shared = search::strategy_to_json({graph.name(), machine.with_devices(devices), devices, search_kind, r.applied, r.strategy});
          graph = std::move(r.strategy.graph);
          views.assign(r.strategy.views.begin(), r.strategy.views.end());
        } catch (const Error& e) {
          if (!world) throw;
          shared = std::string("error: ") + e.what();
        }
      }
      if (world) {
        world->broadcast_text(shared);
        if (shared.rfind("error: ", 0) == 0) throw Error(shared.substr(7));
        if (!rank0) {
          search::StrategyFile f = search::strategy_from_json(shared, "the strategy from rank 0");
          graph = std::move(f.strategy.graph);
          views.assign(f.strategy.views.begin(), f.strategy.views.end());
        }
      }
      s.strategy = search_kind;
    }
    {
      // The prediction for what runs: the mapping the runtime uses.
      const search::Strategy st = mapper->map(graph);
      predicted = st.estimate;
      if (st.estimate.feasible) s.predicted_step_seconds = st.estimate.time;
      s.predicted_step_bytes = step_bytes(graph, views, devices);
    }
    for (const Node& n : graph.nodes())
      if (n.op->op_class == OpClass::kSource && !n.op->is_weight && n.outputs[0].rank() > 0) {
        s.batch = std::max(s.batch, n.outputs[0].dims[0].size);
      }
    {  // given weights and checkpoints checked against the model, naming the file
      std::vector<NodeId> weight_nodes;
      for (const Node& n : graph.nodes())
        if (n.op->is_weight) weight_nodes.push_back(n.id);
      if (o.initial_weights) runtime::check_weights(*o.initial_weights, graph, weight_nodes, init_weights);
      if (o.resume) runtime::check_state(*o.resume, graph, weight_nodes, optimizer, resume_dir);
    }
    const bool tty = isatty(2);
    auto last = std::chrono::steady_clock::now() - std::chrono::hours(1);
    o.progress = [&](const runtime::StepReport& r) { print_progress(r, s.batch, tty, last); };
    const int local = world ? runtime::mpi_local_ranks(world->size()) : static_cast<int>(devices);
    o.threads = threads > 0 ? static_cast<int>(threads) : runtime::default_kernel_threads(local);
    std::cerr << "training " << s.model << " (" << s.strategy << ") on " << devices << (world ? " MPI rank" : gpu ? " cuda device" : " cpu device")
              << (devices == 1 ? "" : "s")
              << ": " << steps << " steps, batch " << s.batch << ", " << optimizer << " lr " << lr << ", "
              << o.threads << " kernel thread" << (o.threads == 1 ? "" : "s") << " each\n";
    o.time_kernels = !profile_out.empty() || breakdown;
    if (!trace.empty()) o.trace_step = steps - 1;
    if (!checkpoint_dir.empty()) {
      o.checkpoint_every = checkpoint_every > 0 ? checkpoint_every : steps;
      o.checkpoint = [model = s.model](const runtime::TrainState& st) {
        runtime::write_checkpoint(checkpoint_dir, st, model);
        std::cerr << "\nwrote checkpoint " << checkpoint_dir << " (step " << st.step << ")\n";
      };
    }
    s.options = o;
    training = true;
    s.result = world ? runtime::train(graph, views, *world, o) : runtime::train(graph, views, static_cast<int>(devices), o);
    training = false;
    if (!rank0) return;
    s.options.progress = nullptr;
    if (!s.result.backend_remarks.empty()) std::cerr << "note: the " << s.result.backend << " backend " << s.result.backend_remarks << "\n";

    const auto& L = s.result.losses;
    std::cout << "model                 " << s.model << "\n"
              << "strategy              " << s.strategy << "\n"
              << "devices               " << devices << (gpu ? " (cuda" : " (cpu") << (world ? ", MPI: one rank each)" : ", in-process)") << "\n"
              << "loss                  " << L.front() << " -> " << L.back() << " ("
              << (o.resume ? "steps " + std::to_string(o.resume->step + 1) + "-" + std::to_string(steps) + ", resumed" : std::to_string(steps) + " steps")
              << ")\n"
              << "data                  " << s.result.data << "\n"
              << std::fixed << std::setprecision(3) << "time per step         " << s.mean_step_seconds() * 1e3 << " ms measured"
              << (s.result.step_seconds.size() > 1 ? " (mean after the first step)" : "") << "\n";
    if (s.predicted_step_seconds > 0) {
      std::cout << "                      " << s.predicted_step_seconds * 1e3 << " ms predicted on " << machine.name << " (ratio measured/predicted "
                << std::setprecision(2) << s.mean_step_seconds() / s.predicted_step_seconds << ")\n";
      print_terms(std::cout, predicted);
      print_profile_coverage(std::cout, *cost, graph);
      if (breakdown) {
        const runner::StepTerms t = runner::step_terms(predicted, s.result);
        std::cout << std::setprecision(3) << "step by term (ms)     predicted  measured on device " << t.device << "\n";
        for (const runner::StepTerm& x : t.terms)
          std::cout << "  " << std::left << std::setw(20) << x.name << std::right << std::setw(9) << x.predicted * 1e3 << std::setw(10)
                    << x.measured * 1e3 << "\n";
      }
    }
    std::cout << std::setprecision(1) << "throughput            " << s.samples_per_second() << " samples/s\n"
              << "between devices       " << human_bytes(s.step_bytes()) << " per step measured, " << human_bytes(s.predicted_step_bytes)
              << " predicted (" << human_bytes(static_cast<double>(s.result.bytes_sent)) << " in all)\n";
    // A diverged run writes nothing; the outputs are written all or none.
    if (!std::isfinite(L.back())) throw Error("training diverged (loss " + std::to_string(L.back()) + "); lower --lr");
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!no_report) outputs.emplace_back(report, runtime::run_report_json(s));
    if (!no_plot) outputs.emplace_back(plot, runtime::loss_curve_svg(s));
    size_t profiled = 0;
    if (!profile_out.empty()) {
      Profile prof = runtime::profile_from_run(graph, s.result);
      const std::string device = std::string(gpu ? "cuda" : "cpu") + " (" + std::to_string(devices) + (world ? " MPI ranks, " : " in-process devices, ") +
                                 std::to_string(o.threads) + " kernel thread" + (o.threads == 1 ? "" : "s") + " each)";
      prof.device = device;
      profiled = prof.entries.size();
      outputs.emplace_back(profile_out, profile_to_json(prof));
    }
    if (!trace.empty()) outputs.emplace_back(trace, runtime::step_trace_json(graph, s.result.trace));
    if (!save_weights.empty()) outputs.emplace_back(save_weights, runtime::safetensors_bytes(s.result.parameters, {{"format", "pt"}}));
    write_text_files_atomic(outputs);
    if (!no_report) std::cerr << "wrote " << report << "\n";
    if (!no_plot) std::cerr << "wrote " << plot << "\n";
    if (!save_weights.empty()) std::cerr << "wrote " << save_weights << " (" << s.result.parameters.size() << " weights)\n";
    if (!profile_out.empty())
    {
      int64_t stalled = 0;
      for (const runtime::DeviceTime& d : s.result.device_times) stalled += d.stalled;
      std::cerr << "wrote " << profile_out << " (" << profiled << " operator shapes and the optimizer timed over " << s.result.timed_steps
                << " step" << (s.result.timed_steps == 1 ? "" : "s");
      if (stalled > 0) std::cerr << "; " << stalled << " device step" << (stalled == 1 ? "" : "s") << " that stalled left out";
      std::cerr << ")\n";
    }
    if (!trace.empty())
      std::cerr << "wrote " << trace << " (step " << steps << ": " << std::fixed << std::setprecision(3) << s.result.trace.seconds() * 1e3
                << " ms on " << s.result.trace.devices.size() << " device" << (s.result.trace.devices.size() == 1 ? "" : "s") << ")\n"
                << std::defaultfloat;
    } catch (const Error& e) {
      if (world && training) {
        quiet.restore();
        std::cerr << "error: rank " << world->rank() << ": " << one_line(e.what()) << "\n";
        world->abort(2);
      }
      if (world) {
        // Before training every rank fails alike (arguments, files, the
        // search's broadcast result). mpirun ends the job at the first
        // non-zero exit and may drop what a rank prints after that, so
        // rank 0 says why before any rank can leave (the sum is collective).
        if (rank0) std::cerr << "error: " << one_line(e.what()) << std::endl;
        world->sum(0);
        throw CLI::RuntimeError(2);
      }
      throw;
    }
  });
}

}  // namespace pcgx::cli
