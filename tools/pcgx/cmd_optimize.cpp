// pcgx optimize: flags into a runner::OptimizeRequest, the report printed.
#include <iostream>
#include <unistd.h>

#include "cli_common.h"
#include "pipeline_flags.h"
#include "print_reports.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"  // write_text_file_atomic
#include "pcgx/runner/optimize.h"
#include "pcgx/runner/plan_request.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::cli {
namespace {

struct Flags {
  std::string model, machine, ruleset, algorithm = "unity", rank = "simulation", out, dot, profile, efficiency, precision = "tf32",
      recompute = "auto", zero = "auto", plan;
  std::vector<std::string> sets;
  int64_t devices = 0;
  int32_t recompute_layers = 0;  // 0: not stated
  double bucket_mb = 25;
  bool quiet = false, per_device_batch = true, allow_unverified = false, reprove = false;
  PipelineFlags pipe;
  search::SearchOptions search;
  CLI::Option *search_flag = nullptr, *precision_flag = nullptr, *recompute_flag = nullptr, *zero_flag = nullptr;
};

runner::OptimizeRequest request(Flags& f) {
  name_flags({{"SearchOptions.budget", "--budget"}, {"SearchOptions.alpha", "--alpha"}, {"SearchOptions.split_min_ops", "--split"},
              {"SearchOptions.exhaustive_limit", "--limit"}, {"SearchOptions.exhaustive_max_nodes", "--max-nodes"}, {"SearchOptions.proposals", "--proposals"},
              {"SearchOptions.evaluations", "--evaluations"}, {"PipelineOptions.stages", "--stages"}, {"PipelineOptions.micro_batches", "--micro-batches"},
              {"PipelineOptions.virtual_stages", "--virtual-stages"}, {"OptimizeRequest.pipeline", "--pipeline"}, {"OptimizeRequest.zero", "--zero"},
              {"OptimizeRequest.allow_unverified", "--allow-unverified"}, {"Machine.device.peak_flops_by_precision", "--precision"},
              {"CommOptions.bucket_bytes", "--bucket-mb"}, {"SearchOptions.tensor_degree", "--tensor-parallel"}, {"SearchOptions.algorithm", "--search"},
              {"SearchOptions.sequence_parallel", "--sequence-parallel"}, {"OptimizeRequest.micro_batch_size", "--micro-batch-size"},
              {"SearchOptions.plan", "--plan"}, {"OptimizeRequest.recompute_layers", "--recompute-layers"},
              {"OptimizeRequest.recompute", "--recompute"}});
  runner::OptimizeRequest q;
  Machine m = search::find_machine(f.machine);
  if (f.devices > 0) m = m.with_devices(f.devices);
  q.search = f.search;
  q.search.algorithm = parse_algorithm(f.algorithm), q.search.rank = parse_rank(f.rank);
  if (!f.plan.empty()) runner::lower_plan_with(q.search, std::make_shared<const search::UserPlan>(search::load_plan(f.plan)), f.search_flag->count() > 0);
  apply_pipeline_flags(f.pipe, q);  // a contradiction among them before any model loads
  const ModelParams sizes = parse_sets(f.sets);
  q.model = runner::load_model(f.model, f.per_device_batch ? runner::with_batch_per_device(f.model, sizes, m.num_devices()) : sizes).graph;
  q.machine = m;
  q.ruleset = f.ruleset, q.allow_unverified = f.allow_unverified, q.reprove = f.reprove;
  q.comm.bucket_bytes = f.bucket_mb * 1024 * 1024, q.precision = parse_precision(f.precision, true);
  q.recompute = parse_recompute(f.recompute, true), q.zero = parse_zero(f.zero, true);
  if (f.recompute_layers != 0) q.recompute_layers = f.recompute_layers;
  if (!f.efficiency.empty()) q.efficiency = search::load_efficiency(f.efficiency);
  if (!f.profile.empty()) q.profile = load_profile(f.profile);
  runner::adopt_plan_settings(q, {true, f.precision_flag->count() > 0, f.recompute_flag->count() > 0, f.zero_flag->count() > 0});
  runner::validate(q);  // (a plan's mistakes among them) before any output
  return q;
}

}  // namespace

void add_optimize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("optimize", "Find the fastest parallel strategy for a model on a machine (Unity's search)");
  static Flags f;
  f.ruleset = runner::default_ruleset_path();
  search::SearchOptions& s = f.search;
  cmd->add_option("MODEL", f.model, "zoo model name or graph JSON file")->required();
  cmd->add_option("--machine", f.machine, "machine name (data/machines) or machine JSON file")->required();
  cmd->add_option("--devices", f.devices, "use the first N devices (whole nodes first); default: all")->check(positive());
  cmd->add_option("--ruleset", f.ruleset, "ruleset to apply")->capture_default_str();
  f.search_flag = cmd->add_option("--search", f.algorithm, "unity, data-parallel, expert, sequential, exhaustive, mcmc (FlexFlow's MCMC, costed by simulation), "
                  "autoddl (AutoDDL's coordinate descent over SBP signatures) or megatron (Megatron-LM's plan as stated: "
                  "--tensor-parallel, --pipeline-parallel, --virtual-stages, --micro-batch-size, layers split evenly) or plan (--plan's, as "
                  "written; the default with --plan)")->capture_default_str();
  cmd->add_option("--plan", f.plan, "a plan written by hand (pcgx.plan JSON, docs/plans.md): each operator runs as the plan's rules say, the "
                  "communication between them derived; operators no rule selects run as one task");
  cmd->add_option("-o,--output", f.out, "strategy file to write (optimized PCG + machine mapping)")->required();
  cmd->add_option("--dot", f.dot, "also draw the optimized PCG (Graphviz)");
  cmd->add_option("--budget", s.budget, "candidate PCGs explored per search (per piece and layout)")->capture_default_str();
  cmd->add_option("--alpha", s.alpha, "prune candidates slower than alpha x the best")->capture_default_str();
  cmd->add_option("--split", s.split_min_ops, "graph splitting: pieces of at least this many operators")->capture_default_str();
  cmd->add_option("--max-nodes", s.exhaustive_max_nodes, "exhaustive search: PCGs of at most this many nodes (default: model nodes + inputs and weights + 1)");
  cmd->add_option("--limit", s.exhaustive_limit, "exhaustive search: give up above this many candidate PCGs")->capture_default_str();
  cmd->add_option("--rank", f.rank,
                  "unity: choose the result among the search's best and the data-parallel and expert baselines by simulation "
                  "(each mapped, then run task by task as pcgx simulate does) or by the DP's estimate")
      ->capture_default_str();
  cmd->add_option("--proposals", s.proposals, "mcmc: proposals in all, shared by its chains")->capture_default_str()->check(positive());
  cmd->add_option("--evaluations", s.evaluations, "autoddl: PCGs costed in all, shared by its starting points")->capture_default_str()->check(positive());
  cmd->add_option("--seed", s.seed, "mcmc and autoddl: random seed")->capture_default_str();
  cmd->add_option("--tensor-parallel", s.tensor_degree, "expert and megatron: the tensor-parallel degree T, as a Megatron-LM plan states it (expert default: the fastest that fits; megatron: 1)");
  cmd->add_flag("--sequence-parallel", s.sequence_parallel, "expert and megatron: Megatron-LM's sequence parallelism in each tensor-parallel group");
  cmd->add_option("--profile", f.profile, "measured operator times (pcgx.profile JSON) instead of the roofline");
  cmd->add_option("--efficiency", f.efficiency, "operator efficiency table (default data/cost/efficiency.json)");
  cmd->add_option("--bucket-mb", f.bucket_mb, "gradient buckets of this many MiB, all-reduced beside the backward pass (PyTorch DDP's bucket_cap_mb)")
      ->capture_default_str();
  cmd->add_option("--set", f.sets, "override a size parameter: key=value (repeatable)");
  f.precision_flag = cmd->add_option("--precision", f.precision, std::string(kPrecisionHelp) + "; auto: the fastest plan over the machine's mixed precisions and tf32")
      ->capture_default_str();
  f.recompute_flag = cmd->add_option("--recompute", f.recompute, std::string(kRecomputeHelp) + "; auto: the fastest plan that fits, trying none, then selective, then full where memory limits the search")
      ->capture_default_str();
  cmd->add_option("--recompute-layers", f.recompute_layers, std::string(kRecomputeLayersHelp) +
                  " (default: every layer where --recompute full is given; with --recompute auto, where full recomputation is what fits, "
                  "the fewest layers that fit)")
      ->check(positive());
  f.zero_flag = cmd->add_option("--zero", f.zero, std::string(kZeroHelp) + "; auto: the fastest plan that fits, sharding more only where memory limits the search")
      ->capture_default_str();
  cmd->add_flag("!--global-batch", f.per_device_batch,
                "take a zoo model's batch as the global batch (default: it is per device, times --devices, as in Unity's evaluation)");
  add_pipeline_options(cmd, f.pipe);
  cmd->add_flag("-q,--quiet", f.quiet, "no per-operator table");
  cmd->add_flag("--allow-unverified", f.allow_unverified, kAllowUnverifiedHelp);
  cmd->add_flag("--reprove", f.reprove, kReproveHelp);
  cmd->callback([] {
    runner::OptimizeRequest q = request(f);
    const bool tty = isatty(2);
    auto last = std::chrono::steady_clock::now();
    q.search.progress = [&](const search::SearchProgress& p) { print_search_progress(p, tty, last); };
    std::cerr << "optimizing " << q.model.name() << " (" << q.model.size() << " nodes) on " << q.machine.num_devices() << " x "
              << q.machine.device.name << " (" << q.machine.name << ") with --search " << search::name(q.search.algorithm) << "\n";
    const runner::OptimizeReport rep = runner::optimize(q);
    if (tty) std::cerr << "\r\033[K";
    print_ruleset_notes(std::cerr, rep);
    print_optimize_report(std::cout, q, rep, f.quiet);
    search::save_strategy(rep.file, f.out);
    std::cerr << "wrote " << f.out << "\n";
    if (!f.dot.empty()) write_text_file_atomic(f.dot, search::strategy_to_dot(rep.result.search.strategy)), std::cerr << "wrote " << f.dot << "\n";
  });
}

}  // namespace pcgx::cli
