// pcgx simulate: the execution simulator on a strategy file (search/simulator.h).
#include <iostream>

#include "cli_common.h"
#include "plan_flags.h"
#include "print_estimate.h"
#include "print_simulation.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/runner/simulate.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/trace.h"

namespace pcgx::cli {

void add_simulate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate",
                                 "Simulate one training iteration of a strategy task by task (FlexFlow's execution simulator): "
                                 "overlap, link contention and gradient buckets beside the backward pass");
  static std::string strategy, trace, profile, efficiency, precision, recompute, zero, schedule, optimizer, persistence, attention, overlap,
      param_gather, grad_reduce, grad_precision, cross_entropy, dropout_add, reduce_scatter;
  static double bucket_mb = 25;
  static int64_t show = 8;
  static int32_t recompute_layers = 0;
  static PlanFlags pf;
  cmd->add_option("STRATEGY|MODEL", strategy, "strategy file (pcgx optimize -o), or with --plan a zoo model name or graph JSON file")->required();
  cmd->add_option("--plan", pf.plan, "simulate MODEL as a plan written by hand states it (docs/plans.md), lowered as pcgx optimize --plan "
                                     "lowers it; needs --machine");
  add_plan_model_options(cmd, pf);
  cmd->add_option("--trace", trace, "write the timeline as Chrome trace-event JSON (open in ui.perfetto.dev or chrome://tracing)");
  cmd->add_option("--profile", profile, "measured operator times (pcgx.profile JSON) instead of the roofline");
  cmd->add_option("--efficiency", efficiency, "operator efficiency table (default data/cost/efficiency.json)");
  cmd->add_option("--bucket-mb", bucket_mb, "gradient buckets of this many MiB (PyTorch DDP's bucket_cap_mb)")->capture_default_str();
  cmd->add_option("--precision", precision, std::string(kPrecisionHelp) + " (default: the strategy's)");
  cmd->add_option("--recompute", recompute, std::string(kRecomputeHelp) + " (default: the strategy's)");
  cmd->add_option("--recompute-layers", recompute_layers, std::string(kRecomputeLayersHelp) + " (default: the strategy's)")->check(positive());
  cmd->add_option("--zero", zero, std::string(kZeroHelp) + " (default: the strategy's; stated, every weight at it, whatever weight groups the strategy has)");
  cmd->add_option("--zero-persistence-threshold", persistence, std::string(kPersistenceHelp) + " (default: the strategy's)");
  cmd->add_option("--optimizer", optimizer, std::string(kOptimizerStateHelp) + " (default: the strategy's)");
  cmd->add_option("--attention", attention, std::string(kAttentionHelp) + " (default: the strategy's)");
  cmd->add_option("--cross-entropy", cross_entropy, std::string(kCrossEntropyHelp) + " (default: the strategy's)");
  cmd->add_option("--dropout-add", dropout_add, std::string(kDropoutAddHelp) + " (default: the strategy's)");
  cmd->add_option("--overlap-grad-input", overlap, std::string(kOverlapGradInputHelp) + ": on or off (default: the strategy's)");
  cmd->add_option("--overlap-param-gather", param_gather, std::string(kOverlapParamGatherHelp) + ": on or off (default: the strategy's)");
  cmd->add_option("--grad-precision", grad_precision, std::string(kGradPrecisionHelp) + " (default: the strategy's)");
  cmd->add_option("--overlap-grad-reduce", grad_reduce, std::string(kOverlapGradReduceHelp) + ": on or off (default: the strategy's)");
  cmd->add_option("--reduce-scatter", reduce_scatter, std::string(kReduceScatterHelp) + ": on or off (default: the strategy's)");
  cmd->add_option("--schedule", schedule, kScheduleHelp);
  cmd->add_option("--show", show, "devices and critical-path tasks to list")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->callback([] {
    if (!(bucket_mb > 0) || bucket_mb > 1e6) throw Error("--bucket-mb: must be a positive number of MiB (at most 1e6)");
    if (!trace.empty()) check_output_path(trace);
    if (pf.plan.empty() && (!pf.machine.empty() || pf.devices > 0 || !pf.sets.empty() || !pf.per_device_batch))
      throw Error("--machine, --devices, --set and --global-batch go with --plan (a strategy file states its own)");
    name_flags({{"Machine.device.peak_flops_by_precision", "--precision"}, {"SimulateRequest.schedule", "--schedule"},
                {"SimulateRequest.recompute_layers", "--recompute-layers"}, {"SimulateRequest.recompute", "--recompute"},
                {"SimulateRequest.zero_persistence_threshold", "--zero-persistence-threshold"}, {"SimulateRequest.reduce_scatter", "--reduce-scatter"}});
    runner::SimulateRequest q;
    if (pf.plan.empty()) {
      q.strategy = search::load_strategy(strategy);
    } else {
      pf.model = strategy;
      std::shared_ptr<const search::UserPlan> plan;
      q.plan = plan_request(pf, plan);
      strategy = pf.plan;
    }
    if (!schedule.empty()) {
      ScheduleFlag sf = parse_schedule(schedule);
      q.schedule = sf.kind, q.programs = std::move(sf.programs);
    }
    if (!precision.empty()) q.precision = parse_precision(precision);
    if (!recompute.empty()) q.recompute = parse_recompute(recompute, false);
    if (recompute_layers != 0) q.recompute_layers = recompute_layers;
    if (!zero.empty()) q.zero = parse_zero(zero, false);
    if (!persistence.empty()) q.zero_persistence_threshold = parse_persistence_threshold(persistence, false);
    if (!optimizer.empty()) q.optimizer = parse_optimizer_state(optimizer);
    if (!attention.empty()) q.attention = parse_attention(attention);
    if (!cross_entropy.empty()) q.cross_entropy = parse_cross_entropy(cross_entropy);
    if (!dropout_add.empty()) q.dropout_add = parse_dropout_add(dropout_add);
    if (!overlap.empty()) q.overlap_grad_input = parse_on_off(overlap, "--overlap-grad-input");
    if (!param_gather.empty()) q.overlap_param_gather = parse_on_off(param_gather, "--overlap-param-gather");
    if (!grad_precision.empty()) q.grad_precision = parse_grad_precision(grad_precision);
    if (!grad_reduce.empty()) q.overlap_grad_reduce = parse_on_off(grad_reduce, "--overlap-grad-reduce");
    if (!reduce_scatter.empty()) q.reduce_scatter = parse_on_off(reduce_scatter, "--reduce-scatter");
    if (!efficiency.empty()) q.efficiency = search::load_efficiency(efficiency);
    if (!profile.empty()) q.profile = load_profile(profile);
    q.bucket_bytes = bucket_mb * 1024 * 1024;
    const runner::SimulateReport rep = runner::simulate(std::move(q));
    print_simulation(std::cout, rep, strategy, show);
    if (!trace.empty()) {
      write_text_file_atomic(trace, search::simulation_trace_json(*rep.sim));
      std::cerr << "wrote " << trace << "\n";
    }
  });
}

}  // namespace pcgx::cli
