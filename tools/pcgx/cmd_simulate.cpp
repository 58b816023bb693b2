// pcgx simulate: the execution simulator on a strategy file (search/simulator.h).
#include <algorithm>
#include <iomanip>
#include <iostream>

#include "cli_common.h"
#include "plan_flags.h"
#include "print_estimate.h"
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
  static std::string strategy, trace, profile, efficiency, precision, recompute, zero, schedule;
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
  cmd->add_option("--zero", zero, std::string(kZeroHelp) + " (default: the strategy's)");
  cmd->add_option("--schedule", schedule, kScheduleHelp);
  cmd->add_option("--show", show, "devices and critical-path tasks to list")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->callback([] {
    if (!(bucket_mb > 0) || bucket_mb > 1e6) throw Error("--bucket-mb: must be a positive number of MiB (at most 1e6)");
    if (!trace.empty()) check_output_path(trace);
    if (pf.plan.empty() && (!pf.machine.empty() || pf.devices > 0 || !pf.sets.empty() || !pf.per_device_batch))
      throw Error("--machine, --devices, --set and --global-batch go with --plan (a strategy file states its own)");
    name_flags({{"Machine.device.peak_flops_by_precision", "--precision"}, {"SimulateRequest.schedule", "--schedule"},
                {"SimulateRequest.recompute_layers", "--recompute-layers"}});
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
    if (!efficiency.empty()) q.efficiency = search::load_efficiency(efficiency);
    if (!profile.empty()) q.profile = load_profile(profile);
    q.bucket_bytes = bucket_mb * 1024 * 1024;
    const runner::SimulateReport rep = runner::simulate(std::move(q));
    const search::StrategyFile& f = *rep.file;
    const Machine& m = rep.machine;
    const search::Simulator& sim = *rep.sim;
    const search::SimulationSummary& s = rep.summary;
    const TrainingRecipe& recipe = sim.recipe();

    std::cout << "model                 " << f.model << "\n"
              << "machine               " << m.name << ", " << f.devices << " devices\n"
              << "strategy              " << f.search << " (" << strategy << ")\n"
              << "precision             " << name(recipe.precision) << "\n"
              << "recompute             " << describe_recompute(recipe.recompute, recipe.recompute_layers) << "\n"
              << "ZeRO stage            " << name(recipe.zero) << "\n";
    if (const auto p = sim.pipeline())
      std::cout << "pipeline              " << p->stages << " stage" << (p->stages == 1 ? "" : "s")
                << (p->virtual_stages > 1 ? " x " + std::to_string(p->virtual_stages) + " virtual" : std::string()) << ", "
                << p->micro_batches << " micro-batches, " << name(p->schedule) << " schedule (each micro-batch's steps simulated)\n";
    std::cout << "iteration time        " << ms(s.time) << " simulated";
    if (f.strategy.estimate.feasible && f.strategy.estimate.time > 0)
      std::cout << " (the search's estimate: " << ms(f.strategy.estimate.time) << ", ratio " << std::fixed << std::setprecision(2)
                << s.time / f.strategy.estimate.time << ")";
    std::cout << "\n  along the critical path (" << s.critical_path.size() << " tasks)\n"
              << "    compute           " << ms(s.compute) << "\n"
              << "    communication     " << ms(s.communication) << " exposed (transfers and collectives: " << ms(s.communication_total)
              << " in all, summed over links)\n"
              << "    gradient sync     " << ms(s.sync) << " exposed of " << ms(s.sync_total) << " in " << s.buckets << " bucket"
              << (s.buckets == 1 ? "" : "s") << " (" << ms(s.sync_hidden()) << " hidden)"
              << (shards_weights(sim.recipe().zero) ? ", with ZeRO 3's weight all-gathers before each use" : "") << "\n";
    if (s.gather > 0) std::cout << "    weight gather     " << ms(s.gather) << " (of communication: ZeRO's all-gather after the update)\n";
    double idle = 0, most = 0;
    for (const auto& d : s.devices) idle += d.idle, most = std::max(most, d.idle);
    const std::vector<double> mem = sim.memory();
    const double fullest = mem.empty() ? 0.0 : *std::max_element(mem.begin(), mem.end());
    std::cout << "  memory per device   " << std::fixed << std::setprecision(2) << fullest / 1073741824.0 << " GiB max of "
              << sim.capacity() / 1073741824.0 << " GiB" << (fullest > sim.capacity() ? " (over capacity)" : "")
              << (sim.pipeline() ? " (the schedule's micro-batches in flight)" : "") << "\n";
    std::cout << "  devices             " << s.devices_used << " of " << f.devices << " compute; idle " << ms(idle / static_cast<double>(s.devices.size()))
              << " mean, " << ms(most) << " most\n"
              << "  tasks               " << s.tasks << "\n";
    if (show > 0) {
      std::cout << "per device (compute, gradient sync channel, idle)\n";
      for (size_t d = 0; d < s.devices.size() && static_cast<int64_t>(d) < show; ++d)
        std::cout << "  device " << std::left << std::setw(6) << d << std::right << std::setw(12) << ms(s.devices[d].compute) << std::setw(12)
                  << ms(s.devices[d].sync) << std::setw(12) << ms(s.devices[d].idle) << "\n";
      if (static_cast<int64_t>(s.devices.size()) > show) std::cout << "  ... (" << s.devices.size() << " devices; --show N lists more)\n";
      std::vector<search::TaskId> longest = s.critical_path;
      std::stable_sort(longest.begin(), longest.end(),
                       [&](search::TaskId a, search::TaskId b) { return sim.timeline().task(a).duration > sim.timeline().task(b).duration; });
      std::cout << "longest tasks on the critical path\n";
      for (size_t i = 0; i < longest.size() && static_cast<int64_t>(i) < show; ++i) {
        const search::TimedTask& t = sim.timeline().task(longest[i]);
        std::cout << "  " << std::setw(12) << ms(t.duration) << "  at " << std::setw(12) << ms(t.start) << "  " << one_line(sim.label(longest[i]));
        if (!t.resources.empty()) std::cout << " on " << sim.resource_name(t.resources.front()) << (t.resources.size() > 1 ? " and more" : "");
        std::cout << "\n";
      }
    }
    if (!trace.empty()) {
      write_text_file_atomic(trace, search::simulation_trace_json(sim));
      std::cerr << "wrote " << trace << "\n";
    }
  });
}

}  // namespace pcgx::cli
