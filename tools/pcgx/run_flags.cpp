// pcgx run's flags (see run_flags.h).
#include "run_flags.h"

#include "cli_common.h"
#include "pcgx/runner/plan_request.h"

namespace pcgx::cli {

void add_run_options(CLI::App* cmd, RunFlags& f) {
  runner::TrainRequest& req = f.q;
  cmd->add_option("MODEL|STRATEGY", req.target, "zoo model name, graph JSON file, ONNX model or strategy file")->required();
  cmd->add_flag("--optimize", f.optimize, "search a strategy first (with --ruleset, --search, --machine; as pcgx optimize does)");
  cmd->add_option("--devices", req.devices, "devices to train on (default: 1, or what the strategy needs)")->check(positive());
  cmd->add_option("--backend", f.backend,
                  "cpu (virtual devices, one thread each, in this process), mpi (one device per rank of mpirun -np N) or "
                  "cuda (GPUs: device d on GPU d mod the GPUs visible; one rank per GPU under mpirun); "
                  "auto: cuda when a GPU is visible, else mpi when started by mpirun, else cpu")
      ->capture_default_str();
  cmd->add_flag("--strict-fp32", f.strict_fp32, "cuda: products in strict FP32 (default: those of --precision: TF32 tensor cores for tf32, as PyTorch with allow_tf32; BF16/FP16 tensor cores for bf16/fp16)");
  cmd->add_option("--precision", f.precision, std::string(kPrecisionHelp) + " (default: the strategy's, else tf32)");
  cmd->add_option("--schedule", f.schedule, kScheduleHelp);
  cmd->add_option("--threads", f.threads,
                  "kernel threads per device (0, the default: this machine's cores divided among the devices on it); results do not depend on it");
  cmd->add_option("--steps", req.options.steps, "training steps")->capture_default_str();
  cmd->add_option("--batch", f.batch, "global batch size of a zoo model (default: the model's)")->check(positive());
  cmd->add_option("--lr", req.options.optimizer.lr, "learning rate")->capture_default_str();
  cmd->add_option("--optimizer", f.optimizer, "sgd (with --momentum) or adam")->capture_default_str();
  cmd->add_option("--momentum", req.options.optimizer.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--seed", req.options.seed, "seed of the initial weights and the synthetic task")->capture_default_str();
  cmd->add_option("--batches", req.options.batches, "distinct synthetic batches, cycled")->capture_default_str();
  cmd->add_option("--data", req.data, "train on user data: a directory with NAME.npy per model input, [N, ...] each (default: a synthetic teacher task)");
  cmd->add_option("--machine", req.machine, "machine the search and the prediction assume")->capture_default_str();
  cmd->add_option("--ruleset", req.rulesets, "ruleset for --optimize (repeatable); default: every shipped ruleset")
      ->allow_extra_args(false);  // one file per --ruleset
  f.search_flag = cmd->add_option("--search", f.search, "search algorithm for --optimize (see pcgx optimize)")->capture_default_str();
  cmd->add_option("--plan", f.plan, "train the model as a plan written by hand states it (docs/plans.md): lowered as pcgx optimize --plan "
                  "lowers it, then trained");
  cmd->add_option("--budget", f.search_budget, "search budget for --optimize")->capture_default_str();
  cmd->add_option("--bucket-mb", f.bucket_mb, "gradient buckets of this many MiB, all-reduced as they fill (PyTorch DDP's bucket_cap_mb)")->capture_default_str();
  cmd->add_option("--set", f.sets, "override a size parameter of a zoo model: key=value (repeatable)");
  cmd->add_option("--report", f.report, "run report to write (JSON)")->capture_default_str();
  cmd->add_option("--plot", f.plot, "loss curve to write (SVG)")->capture_default_str();
  cmd->add_flag("--allow-unverified", req.allow_unverified, kAllowUnverifiedHelp);
  cmd->add_flag("--reprove", req.reprove, kReproveHelp);
  cmd->add_flag("--no-report", f.no_report, "write no run report");
  cmd->add_flag("--no-plot", f.no_plot, "write no loss curve");
  cmd->add_option("--profile", req.profile, "measured operator times for the search and the prediction (pcgx.profile JSON, e.g. from --profile-out)");
  cmd->add_flag("--breakdown", req.breakdown, "time kernels, messages and the optimizer, and print the busiest device's step beside the prediction term by term");
  cmd->add_option("--profile-out", req.outputs.profile,
                  "write the kernel time of every operator measured during training, per task and shard shapes (pcgx.profile JSON, for pcgx optimize --profile)");
  cmd->add_option("--init-weights", req.init_weights,
                  "start from these weights: a safetensors file whose names are the model's Weight names (pcgx info lists them; "
                  "--save-weights writes one, PyTorch's safetensors.torch.save_file too)");
  cmd->add_option("--save-weights", req.outputs.weights, "write the trained weights to a safetensors file (float32, by Weight name)");
  cmd->add_option("--save-strategy", req.outputs.strategy, "with --optimize: write the strategy found (as pcgx optimize -o does), to run again");
  cmd->add_option("--checkpoint", req.checkpoint,
                  "write a checkpoint directory (weights.safetensors, optimizer.safetensors, state.json) every --checkpoint-every steps and after the last, "
                  "replacing the previous one whole");
  cmd->add_option("--checkpoint-every", req.checkpoint_every, "steps between checkpoints (default: only after the last step)");
  cmd->add_option("--resume", req.resume,
                  "go on from a checkpoint directory: its step is the first to run and --steps the total, so 10 steps, then --resume with --steps 20, "
                  "train as 20 steps do");
  cmd->add_option("--trace", req.outputs.trace,
                  "write the last step's measured timeline on every device: kernels, messages sent and waited for, collectives "
                  "(Chrome trace-event JSON, as pcgx simulate --trace writes; under MPI, rank 0's)");
}

runner::TrainRequest& run_request(RunFlags& f, runner::BackendKind backend) {
  name_flags({{"TrainOptions.steps", "--steps"}, {"TrainOptions.batches", "--batches"}, {"TrainOptions.bucket_bytes", "--bucket-mb"},
              {"TrainRequest.devices", "--devices"}, {"TrainRequest.threads", "--threads"}, {"TrainRequest.machine", "--machine"},
              {"TrainRequest.checkpoint_every", "--checkpoint-every"}, {"TrainRequest.checkpoint", "--checkpoint"},
              {"TrainRequest.init_weights", "--init-weights"}, {"TrainRequest.resume", "--resume"}, {"TrainRequest.search", "--optimize"},
              {"ModelParams.batch", "--batch"}, {"ModelParams", "--batch/--set"}, {"OptimizerOptions.lr", "--lr"},
              {"OptimizerOptions.momentum", "--momentum"}, {"SearchOptions.budget", "--budget"},
              {"OptimizeRequest.allow_unverified", "--allow-unverified"}, {"TrainRequest.schedule", "--schedule"},
              {"OptimizeRequest.recompute_operators", "the plan's recompute_operators"},
              {"TrainOutputs.strategy", "--save-strategy"}, {"TrainRequest.precision", "--precision"},
              {"SearchOptions.plan", "--plan"}, {"PipelineOptions.stages", "the plan's pipeline.stages (on --devices)"},
              {"PipelineOptions.micro_batches", "the plan's pipeline.micro_batches"}});
  runner::TrainRequest& q = f.q;
  q.backend = backend, q.tf32 = !f.strict_fp32, q.threads = static_cast<int>(f.threads);
  q.sizes = parse_sets(f.sets);
  if (f.batch > 0) q.sizes["batch"] = f.batch;
  q.options.optimizer.kind = parse_optimizer(f.optimizer);
  if (!f.precision.empty()) q.precision = parse_precision(f.precision);
  if (!f.schedule.empty()) {
    ScheduleFlag s = parse_schedule(f.schedule);
    q.schedule = s.kind, q.schedule_programs = std::move(s.programs);
  }
  q.options.bucket_bytes = f.bucket_mb * 1024 * 1024;
  if (f.optimize || !f.plan.empty()) {
    search::SearchOptions s;
    s.algorithm = parse_algorithm(f.search), s.budget = f.search_budget;
    if (!f.plan.empty()) runner::lower_plan_with(s, std::make_shared<const search::UserPlan>(search::load_plan(f.plan)), f.search_flag->count() > 0);
    q.search = s;
  }
  if (!f.no_report) q.outputs.report = f.report;
  if (!f.no_plot) q.outputs.plot = f.plot;
  return q;
}

}  // namespace pcgx::cli
