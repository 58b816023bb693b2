// How `pcgx simulate` prints its report (print_simulation.h).
#include "print_simulation.h"

#include <algorithm>
#include <iomanip>

#include "cli_common.h"
#include "print_estimate.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"

namespace pcgx::cli {

void print_simulation(std::ostream& out, const runner::SimulateReport& rep, const std::string& label, int64_t show) {
  const search::StrategyFile& f = *rep.file;
  const Machine& m = rep.machine;
  const search::Simulator& sim = *rep.sim;
  const search::SimulationSummary& s = rep.summary;
  const TrainingRecipe& recipe = sim.recipe();

  out << "model                 " << f.model << "\n"
            << "machine               " << m.name << ", " << f.devices << " devices\n"
            << "strategy              " << f.search << " (" << label << ")\n"
            << "precision             " << name(recipe.precision)
            << (recipe.grad_precision == GradPrecision::kFp32 ? std::string() : precision_note(recipe)) << "\n"
            << "recompute             " << describe_recompute(recipe.recompute, recipe.recompute_layers, sim.pipeline() && sim.pipeline()->in_flight()) << "\n"
            << "ZeRO stage            " << name(recipe.zero) << "\n";
  out << weight_groups_line(recipe.zero, recipe.zero_weights);
  out << "optimizer             " << name(recipe.optimizer) << "\n";
  if (recipe.attention != AttentionKernel::kEager) out << "attention             " << name(recipe.attention) << "\n";
  if (recipe.cross_entropy == CrossEntropyKernel::kEager) out << "cross-entropy         " << cross_entropy_line(f.strategy.graph) << "\n";
  if (recipe.dropout_add == DropoutAddKernel::kFused) out << "dropout-add           " << dropout_add_line(f.strategy.graph) << "\n";
  if (recipe.overlap_grad_input) out << "input gradients       " << overlap_grad_input_line(m) << "\n";
  if (recipe.overlap_param_gather) out << "weights after update  " << overlap_param_gather_line(m, recipe.zero, f.strategy.estimate.gathered_for_use > 0) << "\n";
  out << all_reduced_line(recipe);
  if (!recipe.overlap_grad_reduce) out << "gradient buckets      " << after_backward_line(m, s.gathered_for_use > 0) << "\n";
  if (const auto p = sim.pipeline())
    out << "pipeline              " << p->stages << " stage" << (p->stages == 1 ? "" : "s")
              << (p->virtual_stages > 1 ? " x " + std::to_string(p->virtual_stages) + " virtual" : std::string()) << ", "
              << p->micro_batches << " micro-batches, " << name(p->schedule) << " schedule (each micro-batch's steps simulated)\n";
  out << "iteration time        " << ms(s.time) << " simulated";
  // Priced under another recipe than the strategy's (--precision, --zero,
  // ...) or run in another stage order (--schedule): the ratio is then to
  // what the strategy was searched with, not the simulator against the
  // model.
  const bool other = !(recipe == f.recipe);
  const bool reordered = rep.reordered;
  if (rep.repriced && *rep.repriced > 0)
    out << " (the search's estimate of its stages in this order: " << ms(*rep.repriced) << ", ratio " << std::fixed << std::setprecision(2)
        << s.time / *rep.repriced << "; in its own order " << ms(f.strategy.estimate.time) << ")";
  else if (f.strategy.estimate.feasible && f.strategy.estimate.time > 0)
    out << " (the search's estimate"
        << (other && reordered ? " under the strategy's own recipe and schedule"
            : other            ? " under the strategy's own recipe"
            : reordered        ? " under the strategy's own schedule"
                               : "")
        << ": " << ms(f.strategy.estimate.time) << ", ratio " << std::fixed << std::setprecision(2) << s.time / f.strategy.estimate.time << ")";
  out << "\n  along the critical path (" << s.critical_path.size() << " tasks)\n"
            << "    compute           " << ms(s.compute) << "\n"
            << "    communication     " << ms(s.communication) << " exposed (transfers and collectives: " << ms(s.communication_total)
            << " in all, summed over links)\n"
            << "    gradient sync     " << ms(s.sync) << " of " << ms(s.sync_total) << " in " << s.buckets << " bucket"
            << (s.buckets == 1 ? "" : "s") << " on the critical path; the last ends " << ms(s.sync_past) << " after the backward pass"
            << (!shards_weights(highest_zero(sim.recipe())) ? ""
                : s.gathered_for_use > 0                   ? ", with ZeRO 3's weight all-gathers before each use"
                : sim.recipe().zero_weights.empty()        ? ", ZeRO 3 with every weight block kept whole between uses (stage 2's communication)"
                                                           : ", the weights at stage 3 kept whole between uses (stage 2's communication)")
            << (shards_weights(highest_zero(sim.recipe())) && s.gathered_for_use > 0 && sim.recipe().zero_persistence_threshold > 0
                    ? " (blocks under " + std::to_string(sim.recipe().zero_persistence_threshold) + " parameters kept whole)"
                    : std::string())
            << "\n";
  if (s.gather > 0)
    out << "    weight gather     " << ms(s.gather)
        << (sim.recipe().overlap_param_gather && m.device.overlaps_communication && s.gathered_for_use == 0 ? " (of communication: ZeRO's all-gathers beside the forward pass, where it waits for them)\n"
                                                                                   : " (of communication: ZeRO's all-gather after the update)\n");
  double idle = 0, most = 0;
  for (const auto& d : s.devices) idle += d.idle, most = std::max(most, d.idle);
  const std::vector<search::DeviceMemory> mem = sim.memory_breakdown();
  double fullest = 0;
  for (const search::DeviceMemory& d : mem) fullest = std::max(fullest, d.total());
  out << between_devices_line(sim.step_bytes(), highest_zero(recipe));
  out << "  memory per device   " << std::fixed << std::setprecision(2) << fullest / 1073741824.0 << " GiB max of "
            << sim.capacity() / 1073741824.0 << " GiB" << (fullest > sim.capacity() ? " (over capacity)" : "")
            << (sim.pipeline() ? " (the schedule's micro-batches in flight)" : "") << "\n";
  print_memory_breakdown(out, mem, "    ");
  out << "  devices             " << s.devices_used << " of " << f.devices << " compute; idle " << ms(idle / static_cast<double>(s.devices.size()))
            << " mean, " << ms(most) << " most\n"
            << "  tasks               " << s.tasks << "\n";
  if (show > 0) {
    out << "per device (compute, gradient sync channel, idle)\n";
    for (size_t d = 0; d < s.devices.size() && static_cast<int64_t>(d) < show; ++d)
      out << "  device " << std::left << std::setw(6) << d << std::right << std::setw(12) << ms(s.devices[d].compute) << std::setw(12)
                << ms(s.devices[d].sync) << std::setw(12) << ms(s.devices[d].idle) << "\n";
    if (static_cast<int64_t>(s.devices.size()) > show) out << "  ... (" << s.devices.size() << " devices; --show N lists more)\n";
    std::vector<search::TaskId> longest = s.critical_path;
    std::stable_sort(longest.begin(), longest.end(),
                     [&](search::TaskId a, search::TaskId b) { return sim.timeline().task(a).duration > sim.timeline().task(b).duration; });
    out << "longest tasks on the critical path\n";
    for (size_t i = 0; i < longest.size() && static_cast<int64_t>(i) < show; ++i) {
      const search::TimedTask& t = sim.timeline().task(longest[i]);
      const std::string task = one_line(sim.label(longest[i]));
      out << "  " << std::setw(12) << ms(t.duration) << "  at " << std::setw(12) << ms(t.start) << "  " << task;
      if (!t.resources.empty()) {
        // An update or overhead task's label already names its device.
        const std::string where = sim.resource_name(t.resources.front());
        const bool named = task.size() >= where.size() && task.compare(task.size() - where.size(), where.size(), where) == 0;
        if (!named || t.resources.size() > 1) out << " on " << where << (t.resources.size() > 1 ? " and more" : "");
      }
      out << "\n";
    }
  }
}

}  // namespace pcgx::cli
