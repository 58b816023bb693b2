#include "print_reports.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <string>

#include "cli_common.h"
#include "pcgx/pcg/attention_kernels.h"
#include "pcgx/pcg/error.h"
#include "pcgx/search/gradient_sync.h"

namespace pcgx::cli {
namespace {

std::string view_strides(const MachineView& v) {
  if (v.strides.empty()) return std::to_string(v.stride);
  std::string s = "[";
  for (size_t i = 0; i < v.strides.size(); ++i) s += (i ? "," : "") + std::to_string(v.strides[i]);
  return s + "]";
}

// ZeRO 3's persistence threshold in words.
std::string persistence(int64_t threshold) {
  if (threshold <= 0) return "every weight block sharded, gathered before each use";
  return "weight blocks under " + std::to_string(threshold) + " parameters kept whole, gathered after the update";
}

}  // namespace

void print_optimize_report(std::ostream& out, const runner::OptimizeRequest& q, const runner::OptimizeReport& rep, ReportDetail detail) {
  const search::SearchResult& r = rep.result.search;
  const search::Estimate& e = r.strategy.estimate;
  const int64_t n = q.machine.num_devices();
  out << "model                 " << q.model.name() << "\n"
            << "machine               " << q.machine.name << ", " << n << " devices\n"
            << "search                " << search::name(q.search.algorithm) << " (" << std::fixed << std::setprecision(2) << r.seconds << " s, "
            << r.explored << " explored, " << r.evaluated << " evaluated, " << r.pieces << " piece" << (r.pieces == 1 ? "" : "s") << ")\n";
  if (!e.feasible) throw Error("no feasible strategy: " + e.infeasible);
  out << "iteration time        " << ms(e.time) << (search::predicts_by_simulation(q.search) ? " predicted (simulated)" : " predicted") << "\n";
  print_terms(out, e, rep.cost.get());
  if (rep.simulated > 0)
    out << "simulated             " << ms(rep.simulated) << " (pcgx simulate: the plan task by task; ratio to the prediction "
              << std::setprecision(2) << rep.simulated / e.time << ")\n";
  else if (!rep.not_simulated.empty())
    out << "simulated             not run: " << rep.not_simulated << "\n";
  if (!rep.pipelined && r.ranking.chosen >= 0) {
    out << "chosen by simulation  ";
    for (size_t i = 0; i < r.ranking.finalists.size(); ++i) {
      const search::RankedFinalist& f = r.ranking.finalists[i];
      out << (i ? ", " : "") << f.label << " " << (f.feasible ? ms(f.simulated) + " (predicted " + ms(f.estimate) + ")" : std::string("infeasible"))
                << (static_cast<int>(i) == r.ranking.chosen ? " *" : "");
    }
    // The plan kept may be the one chosen, re-priced under a later recipe
    // (fewer layers recomputed, kinds of operators, a persistence
    // threshold): then these are the searched recipe's figures.
    // (A search once more under it whose plan was not kept is not it.)
    const auto kept = std::find_if(rep.tried.rbegin(), rep.tried.rend(), [&](const runner::RecipeTried& t) {
      return t.feasible && t.recipe == rep.cost->recipe() && (!t.again || t.time == e.time);
    });
    if (kept != rep.tried.rend() && !kept->searched) out << " (under the recipe searched; the plan kept is that one re-priced)";
    out << "\n";
  }
  print_profile_coverage(out, *rep.cost, r.strategy.graph);
  if (rep.pipelined && rep.result.stages == 1) {
    const int64_t m = rep.result.micro_batches;
    out << "gradient accumulation " << m << (m == 1 ? " micro-batch" : " micro-batches") << (!q.pipeline || q.pipeline->micro_batches == 0 ? " (auto)" : "")
        << " of " << ms(rep.result.stage.at(0).micro_batch)
        << (syncs_every_micro_batch(highest_zero(rep.cost->recipe())) ? ", the last synchronization's exposed tail and the update "
                                                              : ", one synchronization and update ")
        << ms(e.once) << "\n";
  } else if (rep.pipelined) {
    const search::PipelineResult& pr = rep.result;
    const bool written = rep.file.schedule != PipelineShape::default_for(pr.virtual_stages);
    const bool explicit_order = written && rep.file.schedule == PipelineSchedule::kExplicit;
    out << "pipeline              " << pr.stages << " stages x " << n / pr.stages << " devices, " << pr.micro_batches << " micro-batches, "
        << (explicit_order          ? std::string("the stages' order as written")
            : pr.virtual_stages > 1 ? "interleaved 1F1B (" + std::to_string(pr.virtual_stages) + " virtual stages per device)" + " with flush"
                                    : std::string("1F1B with flush"))
        << ": bubble " << ms(e.bubble) << ", update " << ms(e.once) << "\n";
    if (!pr.interlaced.empty()) {
      std::string chunks;
      for (size_t k = 0; k < pr.interlaced.size(); ++k)
        chunks += (k == 0 ? "" : k + 1 == pr.interlaced.size() ? " and " : ", ") + std::to_string(pr.interlaced[k]);
      out << "  interlaced          chunk" << (pr.interlaced.size() > 1 ? "s " : " ") << chunks
          << " on every device, each step of one run by every stage together (SuperScaler's interlaced pipeline): priced as the "
             "steps' makespan\n";
    }
    // Every schedule is priced by its steps' makespan
    // (pcg/pipeline_schedule.h's schedule_makespan, search/pipeline_timing.h).
    if (written)
      out << "  schedule            " << name(rep.file.schedule) << ", the plan's: priced "
          << (rep.file.schedule == PipelineSchedule::kExplicit
                  ? std::string(search::predicts_by_simulation(q.search) ? "by simulating it as written" : "as written (its steps' makespan)")
                  : std::string("as its steps' makespan"))
          << ", simulated and run as written\n";
    for (size_t i = 0; i < pr.stage.size(); ++i) {
      const auto& st = pr.stage[i];
      const std::string stage = st.stage < 0 ? std::string("every") : std::to_string(st.stage + 1) + (pr.virtual_stages > 1 ? "." + std::to_string(st.chunk + 1) : std::string());
      out << "  stage " << stage << "  devices " << st.first_device << ".." << st.first_device + st.devices - 1 << "  " << st.operators
                << " operators (" << st.first << " .. " << st.last << ")  " << ms(st.micro_batch) << " per micro-batch, " << human_bytes(st.memory) << "\n";
    }
  }
  if (!rep.pipelined) out << "gradient accumulation none: the batch in one micro-batch\n";
  const search::Strategy& dp = rep.data_parallel;
  const TrainingRecipe& recipe = rep.cost->recipe();
  out << "precision             " << name(recipe.precision) << (q.precision ? "" : " (auto)")
      << precision_note(recipe) << "\n";
  // (As recorded: auto's gathers where nothing is gathered again is none.)
  out << "recompute             " << describe_recompute(rep.file.recipe.recompute, rep.file.recipe.recompute_layers, rep.pipelined && rep.result.stages > 1)
      << (q.recompute ? "" : " (auto)");
  if (const auto& ops = recipe.recompute_operators; !ops.empty()) {
    out << " (" << ops.size() << ": ";
    for (size_t i = 0; i < ops.size() && i < 4; ++i) out << (i ? ", " : "") << ops[i];
    out << (ops.size() > 4 ? ", ...)" : ")");
  }
  out << "\n";
  // ZeRO 3 with every weight block under the persistence threshold shards
  // no weight between uses: stage 2 in all but name, and said so.
  const bool gathers = shards_weights(recipe.zero) && e.gathered_for_use > 0;
  const bool all_whole = shards_weights(recipe.zero) && !gathers && e.buckets > 0 && recipe.zero_weights.empty();
  out << "ZeRO stage            " << name(recipe.zero) << (q.zero ? "" : " (auto)")
      << (gathers                         ? ": weights, optimizer state and gradients sharded over each weight's data-parallel group"
          : shards_gradients(recipe.zero) ? ": optimizer state and gradients sharded over each weight's data-parallel group"
          : shards_optimizer(recipe.zero) ? ": optimizer state sharded over each weight's data-parallel group"
                                          : "")
      << (all_whole ? ", every weight block kept whole between uses (under the persistence threshold): stage 2's communication" : "")
      << (syncs_every_micro_batch(recipe.zero) && rep.pipelined && rep.result.micro_batches > 1
              ? (gathers ? ", each micro-batch's weights gathered and gradients reduce-scattered" : ", each micro-batch's gradients reduce-scattered")
          : syncs_every_micro_batch(highest_zero(recipe)) && rep.pipelined && rep.result.micro_batches > 1
              ? ", the gradients of the weights at stages 2 and 3 reduce-scattered each micro-batch"
              : "")
      // A plan whose weights have no copies on several devices has nothing to shard.
      << (shards_optimizer(recipe.zero) && e.buckets == 0 ? " (here nothing: no weight has copies on several devices)" : "")
      << "\n";
  out << weight_groups_line(recipe.zero, recipe.zero_weights);
  if (shards_weights(highest_zero(recipe)) && e.buckets > 0)
    out << "  persistence         " << persistence(recipe.zero_persistence_threshold) << (rep.persistence_chosen ? " (auto)" : "")
        << (all_whole ? " (here every block)" : "") << "\n";
  out << "optimizer             " << name(recipe.optimizer) << " (" << optimizer_states(recipe.optimizer) << " FP32 state"
      << (optimizer_states(recipe.optimizer) == 1 ? "" : "s") << " per parameter)\n";
  if (recipe.attention == AttentionKernel::kFlash) {
    const Graph& g = rep.result.search.strategy.graph;
    out << "attention             " << name(recipe.attention) << " (" << find_attention_kernels(g, source_layouts(g)).members.size()
        << " kernels: q k^T to the weighted sum, no scores kept)\n";
  } else if (recipe.attention == AttentionKernel::kFused) {
    const Graph& g = rep.result.search.strategy.graph;
    out << "attention             " << name(recipe.attention) << " (" << fused_softmax_kernels(g, source_layouts(g)).members.size()
        << " kernels: the scale and the softmax as one)\n";
  }
  if (recipe.cross_entropy == CrossEntropyKernel::kEager) out << "cross-entropy         " << cross_entropy_line(rep.result.search.strategy.graph) << "\n";
  if (recipe.dropout_add == DropoutAddKernel::kFused) out << "dropout-add           " << dropout_add_line(rep.result.search.strategy.graph) << "\n";
  if (recipe.overlap_grad_input)
    out << "input gradients       " << overlap_grad_input_line(q.machine) << "\n";
  if (recipe.overlap_param_gather)
    out << "weights after update  " << overlap_param_gather_line(q.machine, recipe.zero, rep.result.search.strategy.estimate.gathered_for_use > 0) << "\n";
  out << all_reduced_line(recipe);
  if (!recipe.overlap_grad_reduce)
    out << "gradient buckets      " << after_backward_line(q.machine, rep.result.search.strategy.estimate.gathered_for_use > 0) << "\n";
  if (!q.recompute || !q.zero || !q.precision || rep.tried.size() > 1) {
    out << "recipes searched      ";
    if (rep.tried.size() == 1 && rep.tried[0].feasible) out << "1 (no plan searched was over memory)";
    for (size_t i = 0; rep.tried.size() > 1 && i < rep.tried.size(); ++i) {
      const runner::RecipeTried& t = rep.tried[i];
      out << (i ? "; " : "") << (q.precision ? "" : std::string(name(t.recipe.precision)) + " ") << "recompute " << describe_recompute(t.recipe.recompute, t.recipe.recompute_layers)
          << (t.recipe.recompute_operators.empty() ? "" : " (" + std::to_string(t.recipe.recompute_operators.size()) + ")")
          << " ZeRO " << name(t.recipe.zero)
          << (t.recipe.zero_persistence_threshold > 0 ? " persist <" + std::to_string(t.recipe.zero_persistence_threshold) : std::string())
          << [&] {
               const auto other = std::count_if(t.recipe.zero_weights.begin(), t.recipe.zero_weights.end(), [&](const WeightZero& w) { return w.stage != t.recipe.zero; });
               return other > 0 ? " (" + std::to_string(other) + " weight" + (other == 1 ? "" : "s") + " at another stage)" : std::string();
             }()
          << (t.micro_batches > 1 ? " " + std::to_string(t.micro_batches) + " micro-batches" : "") << ": "
          << (t.feasible ? ms(t.time) : t.smallest_need > 0 ? "needs " + human_bytes(t.smallest_need) : std::string("infeasible"))
          << (t.again ? " (searched again)" : t.searched ? "" : " (re-priced)");
    }
    out << "\n";
  }
  out << "memory per device     " << human_bytes(e.max_memory()) << " max of " << human_bytes(q.machine.device.memory_capacity);
  // A pipelined plan's figure is each chunk's as the search counted it
  // alone; the breakdown is the joined plan's, as the simulator and the
  // runtime count it (a stage boundary counted differently:
  // docs/training.md "What each device keeps").
  double joined = 0;
  for (const search::DeviceMemory& m : rep.memory) joined = std::max(joined, m.total());
  if (rep.pipelined && rep.result.stages > 1 && human_bytes(joined) != human_bytes(e.max_memory()))
    out << " (the search's count, stage by stage; the plan joined, as simulated and run: " << human_bytes(joined)
        << (joined > q.machine.device.memory_capacity ? ", over capacity" : "") << ")";
  out << "\n";
  print_memory_breakdown(out, rep.memory);
  out
            << "data parallel         " << (dp.estimate.feasible ? ms(dp.estimate.time) : "infeasible: " + dp.estimate.infeasible)
            << (rep.data_parallel_micro_batches > 1 ? " (accumulating over the same " + std::to_string(rep.data_parallel_micro_batches) + " micro-batches)" : "")
            << "\n";
  if (dp.estimate.feasible) out << "speedup over data parallel  " << std::setprecision(2) << dp.estimate.time / e.time << "x\n";
  out << "substitutions applied " << r.applied.size() << "\n";
  for (size_t i = 0; i < r.applied.size() && i < 20; ++i) out << "  " << r.applied[i] << "\n";
  if (r.applied.size() > 20) out << "  ... (all in the strategy file)\n";
  if (!r.relaid.empty() && detail != ReportDetail::kBelowPlanCheck)
    out << "layout search         " << r.relaid.size() << (r.relaid.size() == 1 ? " conversion" : " conversions")
        << " rewritten as a cheaper sequence of parallel operators (`pcgx plan check` lists them)\n";
  if (detail != ReportDetail::kOperators) return;
  out << "operators (tasks, output layout, machine view start:stride or start:[strides])\n";
  for (const Node& nd : r.strategy.graph.nodes()) {
    if (nd.op->op_class == OpClass::kSource) continue;
    const auto v = r.strategy.views[static_cast<size_t>(nd.id)];
    out << "  " << std::left << std::setw(28) << (nd.name.empty() ? "#" + std::to_string(nd.id) : nd.name) << std::setw(18) << nd.op->name
              << std::right << std::setw(5) << nd.outputs[0].num_shards() << "  " << std::left << std::setw(30) << nd.outputs[0].to_string()
              << std::right << " " << v.start << ":" << view_strides(v) << "\n";
  }
}

void print_ruleset_notes(std::ostream& out, const runner::OptimizeReport& rep) {
  for (const auto& [file, why] : rep.unverified)
    out << "warning: " << one_line(file + ": searching with an unverified ruleset (--allow-unverified): " + why) << "\n";
  if (!rep.rulesets.empty()) out << "  " << describe_rules(rep) << "\n";
}

void print_train_report(std::ostream& out, const runner::TrainReport& rep) {
  const runtime::RunSummary& s = rep.summary;
  const auto& L = s.result.losses;
  const runtime::TrainOptions& o = s.options;
  const int64_t steps = o.steps;
  const int64_t first = steps - static_cast<int64_t>(L.size()) + 1;  // a resumed run's first step
  out << "model                 " << s.model << "\n"
      << "strategy              " << s.strategy << "\n"
      << "devices               " << rep.devices << (rep.gpu ? " (cuda" : " (cpu") << (rep.mpi ? ", MPI: one rank each)" : ", in-process)") << "\n";
  const bool some_gathered = shards_weights(highest_zero(o.zero, o.zero_weights)) && s.result.buckets_gathered_for_use > 0;
  if (shards_optimizer(o.zero))
    out << "ZeRO stage            " << name(o.zero) << ": each gradient bucket reduce-scattered, its optimizer state and update split over its devices, the weights all-gathered"
        << (some_gathered && shards_weights(o.zero) ? " before each forward and backward that reads them (one bucket per weight block)"
            : some_gathered                         ? " after the update, those at stage 3 before each forward and backward that reads them"
                                                    : " after the update")
        << (shards_weights(o.zero) && s.result.buckets_gathered_for_use == 0 && o.zero_weights.empty()
                ? " (every weight block under the persistence threshold, kept whole between uses: stage 2's communication)"
                : "")
        << "\n";
  out << weight_groups_line(o.zero, o.zero_weights);
  if (shards_weights(highest_zero(o.zero, o.zero_weights))) out << "  persistence         " << persistence(o.zero_persistence_threshold) << "\n";
  if (o.recompute != Recompute::kNone)
    out << "recompute             " << describe_recompute(o.recompute, o.recompute_layers, o.pipeline && o.pipeline->in_flight())
        << ": the backward pass re-runs what the policy does not keep\n";
  if (is_mixed(o.precision))
    out << "precision             " << name(o.precision) << ": activations and weight copies rounded to it, FP32 masters and gradient sums\n";
  if (o.precision == Precision::kFp16)
    out << "loss scaling          " << s.result.skipped_steps.size() << " step" << (s.result.skipped_steps.size() == 1 ? "" : "s")
        << " skipped on overflow, final scale " << s.result.loss_scale << "\n";
  out << "loss                  " << L.front() << " -> " << L.back() << " ("
      << (first > 1 ? "steps " + std::to_string(first) + "-" + std::to_string(steps) + ", resumed" : std::to_string(steps) + " steps") << ")\n"
      << "data                  " << s.result.data << "\n"
      << std::fixed << std::setprecision(3) << "time per step         " << s.mean_step_seconds() * 1e3 << " ms measured"
      << (s.result.step_seconds.size() > 1 ? " (mean after the first step)" : "") << "\n";
  if (s.predicted_step_seconds > 0) {
    out << "                      " << s.predicted_step_seconds * 1e3 << " ms predicted on " << rep.machine.name
        << (rep.predicted_by_simulation ? ", simulated on its views" : "") << " (ratio measured/predicted " << std::setprecision(2) << s.mean_step_seconds() / s.predicted_step_seconds << ")\n";
    print_terms(out, rep.predicted, rep.cost.get());
    print_profile_coverage(out, *rep.cost, rep.graph);
    if (rep.terms) {
      out << std::setprecision(3) << "step by term (ms)     predicted  measured on device " << rep.terms->device << "\n";
      for (const runner::StepTerm& x : rep.terms->terms)
        out << "  " << std::left << std::setw(20) << x.name << std::right << std::setw(9) << x.predicted * 1e3 << std::setw(10) << x.measured * 1e3 << "\n";
    }
  }
  out << std::setprecision(1) << "throughput            " << s.samples_per_second() << " samples/s\n"
      << "between devices       " << human_bytes(s.step_bytes()) << " per step measured, " << human_bytes(s.predicted_step_bytes) << " predicted ("
      << human_bytes(static_cast<double>(s.result.bytes_sent)) << " in all)\n"
      << "buffers               " << human_bytes(static_cast<double>(s.result.buffer_bytes))
      << " held at most on a device (activations, gradients, messages; the optimizer's state aside)\n"
      << std::defaultfloat;
  if (s.options.pipeline && s.options.pipeline->in_flight()) {  // what the schedule kept in flight, device by device
    out << "activation sets held  ";
    for (size_t d = 0; d < s.result.activation_sets.size(); ++d) {
      int64_t sets = 0;
      for (int64_t x : s.result.activation_sets[d]) sets += x;
      out << (d ? ", " : "") << sets;
    }
    out << " per device under " << name(s.options.pipeline->schedule)
        << (static_cast<int>(s.result.activation_sets.size()) < s.result.devices ? " (rank 0's alone: MPI)" : "") << "\n";
  }
}

void print_search_progress(const search::SearchProgress& p, bool tty, std::chrono::steady_clock::time_point& last) {
  const auto now = std::chrono::steady_clock::now();
  if (!p.milestone && now - last < std::chrono::milliseconds(tty ? 100 : 2000)) return;
  last = now;
  std::cerr << (tty ? "\r\033[K" : "") << "  " << p.phase << ": " << p.explored << " explored, " << p.evaluated << " evaluated, best "
            << ms(p.best) << (tty ? "" : "\n") << std::flush;
}

void print_progress(const runtime::StepReport& r, int64_t batch, bool tty, std::chrono::steady_clock::time_point& last) {
  const auto now = std::chrono::steady_clock::now();
  const bool final = r.step == r.steps;
  if (!final && now - last < std::chrono::milliseconds(tty ? 100 : 1000)) return;
  last = now;
  const int width = 30;
  std::string bar(static_cast<size_t>(width * r.step / r.steps), '#');
  bar.resize(width, '.');
  char line[160];
  std::snprintf(line, sizeof line, "  [%s] step %lld/%lld  loss %.6g  %.1f samples/s", bar.c_str(), static_cast<long long>(r.step),
                static_cast<long long>(r.steps), r.loss, static_cast<double>(batch) / std::max(r.seconds, 1e-9));
  std::cerr << (tty ? "\r\033[K" : "") << line << (tty && !final ? "" : "\n") << std::flush;
}

}  // namespace pcgx::cli
