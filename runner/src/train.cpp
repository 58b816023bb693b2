#include "pcgx/runner/train.h"

#include <optional>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/pipeline_chunks.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/runner/model_source.h"
#include "pcgx/runner/optimize.h"
#include "pcgx/runtime/dataset.h"
#include "pcgx/runtime/in_process.h"
#include "pcgx/runtime/op_profile.h"
#include "pcgx/runtime/safetensors.h"
#include "pcgx/runtime/step_trace.h"
#include "pcgx/runtime/train_state.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/runner/plan_request.h"

namespace pcgx::runner {
namespace {

void check_request(const TrainRequest& q, bool rank0) {
  if (q.options.steps < 1) throw FieldError("TrainOptions.steps", "must be at least 1");
  if (q.devices < 0) throw FieldError("TrainRequest.devices", "must be positive");
  if (q.options.batches < 1) throw FieldError("TrainOptions.batches", "must be at least 1");
  if (q.threads < 0) throw FieldError("TrainRequest.threads", "must be positive");
  if (auto b = q.sizes.find("batch"); b != q.sizes.end() && b->second < 1) throw FieldError("ModelParams.batch", "must be positive");
  runtime::validate(q.options.optimizer);
  if (q.search) search::validate(*q.search);
  // The outputs are written after training: a path that cannot be written
  // fails now, not after the work.
  if (rank0)
    for (const std::string* p : {&q.outputs.report, &q.outputs.plot, &q.outputs.profile, &q.outputs.trace, &q.outputs.weights, &q.outputs.strategy})
      if (!p->empty()) check_output_path(*p);
  if (!(q.options.bucket_bytes > 0) || !std::isfinite(q.options.bucket_bytes))
    throw FieldError("TrainOptions.bucket_bytes", "must be a positive number");
  if (!q.outputs.strategy.empty() && !q.search) throw FieldError("TrainOutputs.strategy", "needs a search first (TrainRequest.search)");
  if (q.checkpoint_every < 0) throw FieldError("TrainRequest.checkpoint_every", "must be positive");
  if (q.checkpoint_every > 0 && q.checkpoint.empty())
    throw FieldError("TrainRequest.checkpoint_every", "needs a checkpoint directory (TrainRequest.checkpoint)");
  if (!q.init_weights.empty() && !q.resume.empty())
    throw FieldError("TrainRequest.init_weights", "a resumed run takes its weights from TrainRequest.resume");
  if (!q.checkpoint.empty()) {
    const std::filesystem::path parent = std::filesystem::path(q.checkpoint).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent))
      throw FieldError("TrainRequest.checkpoint", parent.string() + ": no such directory");
  }
}

// What runs: the strategy's graph, views and training recipe (the ZeRO
// stage and recomputation the runtime executes; its micro-batches are in
// the graph).
void adopt(const search::StrategyFile& f, Graph& graph, std::vector<MachineView>& views, runtime::TrainOptions& o) {
  graph = f.strategy.graph;
  views.assign(f.strategy.views.begin(), f.strategy.views.end());
  o.zero = f.recipe.zero, o.zero_persistence_threshold = f.recipe.zero_persistence_threshold, o.zero_weights = f.recipe.zero_weights, o.recompute = f.recipe.recompute, o.recompute_layers = f.recipe.recompute_layers, o.precision = f.recipe.precision;
  o.recompute_operators = f.recipe.recompute_operators;
  o.attention = f.recipe.attention;
  o.pipeline = search::pipeline_shape(f), o.pipeline_devices = f.devices;
}

}  // namespace

TrainReport train(TrainRequest q, runtime::MpiWorld* world) {
  TrainReport rep;
  rep.rank0 = !world || world->rank() == 0;
  rep.mpi = world != nullptr;
  rep.gpu = q.backend == BackendKind::kCuda;
  auto say = [&](const std::string& s) {
    if (rep.rank0 && q.say) q.say(s);
  };
  if (world) {
    if (q.devices != 0 && q.devices != world->size())
      throw FieldError("TrainRequest.devices", std::to_string(q.devices) + " given, but there are " + std::to_string(world->size()) +
                                                   " MPI ranks (one device per rank: use mpirun -np " + std::to_string(q.devices) + ")");
    q.devices = world->size();
  }
  check_request(q, rep.rank0);
  runtime::TrainOptions& o = q.options;
  // Read before any search: a bad file fails fast.
  runtime::NamedTensors given;
  runtime::TrainState resumed;
  if (!q.init_weights.empty()) given = runtime::read_safetensors(q.init_weights), o.initial_weights = &given;
  if (!q.resume.empty()) resumed = runtime::read_checkpoint(q.resume), o.resume = &resumed;

  runtime::RunSummary& s = rep.summary;
  s.backend = backend_name(q.backend);
  Graph graph;
  std::vector<MachineView> views;
  Machine machine = search::find_machine(q.machine);
  std::string devices_from = "TrainRequest.devices";  // or the strategy file, when it decided
  std::string searched;  // the strategy file of the search, when asked for
  std::optional<OptimizerState> planned_optimizer;  // a strategy file's or a plan's, noted where the run trains another
  std::string planned_in = q.target;
  if (q.schedule && !is_strategy_file(q.target))
    throw FieldError("TrainRequest.schedule", "a pipeline schedule applies to a pipelined strategy file, and " + q.target + " is not one");
  if (is_strategy_file(q.target)) {
    if (q.search) throw FieldError("TrainRequest.search", q.target + " is already a strategy");
    if (!q.sizes.empty()) throw FieldError("ModelParams", "a strategy fixes the model's sizes (" + q.target + ")");
    search::StrategyFile f = search::load_strategy(q.target);
    if (q.schedule) {
      if (f.pipeline_stages <= 1) throw FieldError("TrainRequest.schedule", q.target + " has no pipeline stages to schedule");
      f.schedule = *q.schedule;
      f.programs = q.schedule_programs;
      try {
        check(*search::pipeline_shape(f));
      } catch (const Error& e) {
        throw FieldError("TrainRequest.schedule", e.what());
      }
    }
    adopt(f, graph, views, o);
    planned_optimizer = f.recipe.optimizer;
    if (f.recipe.overlap_grad_input)
      say("note: " + q.target + " was planned with input gradients sent beside the weight products (overlap_grad_input); the " +
          "runtime sends them after each operator's backward, and the prediction is for that");
    if (f.recipe.cross_entropy == CrossEntropyKernel::kEager)
      say("note: " + q.target + " was planned with an eager cross-entropy (cross_entropy); the runtime runs its fused kernel " +
          "(the same values), and the prediction is for that");
    if (f.recipe.dropout_add == DropoutAddKernel::kFused)
      say("note: " + q.target + " was planned with each dropout fused with the sum reading it (dropout_add); the runtime runs " +
          "them as two kernels (the same values), and the prediction is for that");
    if (!f.recipe.overlap_grad_reduce)
      say("note: " + q.target + " was planned with the gradient buckets reduced after the backward pass (overlap_grad_reduce); the " +
          "runtime reduces them as its devices do, and the prediction is for that");
    if (f.recipe.grad_precision == GradPrecision::kCompute && is_mixed(f.recipe.precision))
      say("note: " + q.target + " was planned with gradients accumulated and reduced in " + name(f.recipe.precision) +
          " (grad_precision); the runtime keeps them in FP32, and the prediction is for that");
    if (f.recipe.grad_precision == GradPrecision::kFp32Cast && is_mixed(f.recipe.precision))
      say("note: " + q.target + " was planned with each micro-batch's gradients written in " + name(f.recipe.precision) +
          " and cast and added to FP32 ones after its backward pass (grad_precision fp32-cast); the runtime's kernels accumulate them " +
          "in FP32 themselves, and the prediction is for that");
    if (zero1_all_reduces(f.recipe))
      say("note: " + q.target + " was planned with ZeRO 1's gradients all-reduced whole (reduce_scatter); the runtime " +
          "reduce-scatters them, and the prediction is for that");
    if (f.recipe.overlap_param_gather && shards_optimizer(f.recipe.zero))
      say("note: " + q.target + " was planned with ZeRO's weights gathered beside the next forward pass (overlap_param_gather); the " +
          "runtime gathers them after the update, and the prediction is for that");
    if (q.precision && *q.precision != o.precision)
      say(std::string("note: ") + q.target + " was planned in " + name(o.precision) + "; training in " + name(*q.precision) +
          " as TrainRequest.precision says (the prediction is for " + name(*q.precision) + ")");
    s.model = f.model, s.strategy = f.search + " (" + q.target + ")";
    machine = f.machine;
    if (f.pipeline_stages == 1)
      say("note: " + q.target + " accumulates gradients over " + std::to_string(f.micro_batches) +
          " micro-batches, run one at a time");
    else if (f.pipeline_stages > 1)
      say("note: " + q.target + " is pipelined (" + std::to_string(f.pipeline_stages) + " stages" +
          (f.virtual_stages > 1 ? " of " + std::to_string(f.virtual_stages) + " interleaved chunks" : std::string()) + ", " +
          std::to_string(f.micro_batches) + " micro-batches, " + name(f.schedule) + " schedule)");
    const int need = runtime::devices_needed(graph, views);
    if (q.devices == 0) q.devices = need, devices_from = q.target;
    if (q.devices < need)
      throw FieldError("TrainRequest.devices",
                       q.target + " needs " + std::to_string(need) + " devices, " + std::to_string(q.devices) + " given");
  } else {
    LoadedModel m = load_model(q.target, q.sizes);
    graph = std::move(m.graph);
    // An ONNX model trains from its initializers unless told otherwise.
    if (!m.weights.empty() && !o.initial_weights && !o.resume) given = std::move(m.weights), o.initial_weights = &given;
    s.model = graph.name();
    if (q.devices == 0) q.devices = 1;
    s.strategy = "unpartitioned";
  }
  if (q.devices > machine.num_devices())
    throw FieldError("TrainRequest.devices", std::to_string(q.devices) + " exceeds the " + std::to_string(machine.num_devices()) +
                                                 " devices of machine " + machine.name + " (choose another TrainRequest.machine)");
  if (!world && q.devices > runtime::kMaxInProcessDevices)
    throw FieldError(devices_from, std::to_string(q.devices) + " devices, more than the " + std::to_string(runtime::kMaxInProcessDevices) +
                                       " the in-process runtime runs (one thread each): run it on MPI ranks");
  std::unique_ptr<runtime::NpyDataset> dataset;  // read before any search, so a bad file fails fast
  if (!q.data.empty()) o.data = (dataset = std::make_unique<runtime::NpyDataset>(graph, q.data)).get();
  rep.devices = q.devices;
  rep.machine = machine.with_devices(q.devices);
  search::CommOptions comm;
  comm.bucket_bytes = o.bucket_bytes;
  const Profile profile = q.profile.empty() ? Profile{} : load_profile(q.profile);
  if (q.search) {
    // Under MPI rank 0 searches and sends the strategy (or its error) to
    // the others, so every rank runs the same plan.
    std::string shared;
    if (rep.rank0) {
      try {
        say("searching a strategy for " + graph.name() + " on " + std::to_string(q.devices) + " devices of " + machine.name + " (" +
            std::string(search::name(q.search->algorithm)) + ")");
        OptimizeRequest oq;
        oq.model = graph, oq.machine = rep.machine, oq.search = *q.search, oq.rulesets = q.rulesets;
        oq.allow_unverified = q.allow_unverified, oq.reprove = q.reprove, oq.comm = comm, oq.profile = profile;
        oq.precision = q.precision.value_or(kDefaultPrecision);
        oq.optimizer = runtime::priced_as(q.options.optimizer);
        // A plan's recipe and pipeline, where the request states none (the
        // optimizer is the run's own, whatever the plan says; input
        // gradients are not sent beside the weight products, nor weights
        // gathered beside the forward pass, which pcgx's runtimes do not
        // do, nor an eager cross-entropy, which they run fused, nor a
        // fused dropout-add, which they run as two kernels, nor gradients
        // reduced otherwise than the runtime does, in FP32 and
        // reduce-scattered at ZeRO 1, so the search prices what runs).
        adopt_plan_settings(oq, {.algorithm = true, .precision = q.precision.has_value(), .optimizer = true, .overlap_grad_input = true,
                                 .overlap_param_gather = true, .cross_entropy = true, .dropout_add = true,
                                 .overlap_grad_reduce = true, .grad_precision = true, .reduce_scatter = true});
        if (oq.search.plan && oq.search.plan->optimizer)  // (noted below where it differs)
          planned_optimizer = oq.search.plan->optimizer, planned_in = "the plan " + oq.search.plan->source;
        OptimizeReport r = optimize(oq);
        if (r.file.pipeline_stages == 1)
          say("note: the plan found accumulates gradients over " + std::to_string(r.file.micro_batches) + " micro-batches, run one at a time");
        for (const auto& [file, why] : r.unverified)
          say("warning: " + file + ": searching with an unverified ruleset (OptimizeRequest.allow_unverified): " + why);
        if (!r.rulesets.empty()) say("  " + describe_rules(r));
        if (world || !q.outputs.strategy.empty()) shared = searched = search::strategy_to_json(r.file);
        adopt(r.file, graph, views, o);
        rep.search = std::move(r.result.search);
      } catch (const Error& e) {
        if (!world) throw;
        shared = std::string("error: ") + e.what();
      }
    }
    if (world) {
      world->broadcast_text(shared);
      if (shared.rfind("error: ", 0) == 0) throw Error(shared.substr(7));
      if (!rep.rank0) {
        const search::StrategyFile f = search::strategy_from_json(shared, "the strategy from rank 0");
        adopt(f, graph, views, o);
      }
    }
    s.strategy = std::string(search::name(q.search->algorithm));
  }
  {
    // The prediction for what runs, with its ZeRO stage and recomputation.
    if (q.precision) o.precision = *q.precision;
    TrainingRecipe recipe;
    recipe.zero = o.zero, recipe.zero_persistence_threshold = o.zero_persistence_threshold, recipe.zero_weights = o.zero_weights, recipe.recompute = o.recompute, recipe.recompute_layers = o.recompute_layers, recipe.precision = o.precision;
    recipe.recompute_operators = o.recompute_operators;
    recipe.attention = o.attention;
    recipe.optimizer = runtime::priced_as(o.optimizer);
    rep.cost = std::make_shared<const search::CostModel>(rep.machine, search::default_efficiency(), profile, comm, recipe);
    const search::Strategy st = search::MachineMapper(*rep.cost).map(graph);
    rep.predicted = st.estimate;
    // Views the mapping would not choose (a plan's stated devices, mcmc's,
    // a strategy file edited by hand): what runs is priced by simulating
    // it on them, as `pcgx simulate` does (a pipelined one: its schedule, below).
    const bool scheduled_run = o.pipeline && o.pipeline->in_flight();
    if (views.size() == graph.size() && st.views != views && !scheduled_run) {
      try {
        rep.predicted = search::simulated_estimate(search::Simulator(graph, views, *rep.cost));
        rep.predicted_by_simulation = true;
      } catch (const Error&) {
      }
    }
    // A pipelined strategy runs its schedule: its prediction is the
    // schedule's, simulated task by task on the strategy's views (as
    // `pcgx simulate` gives it), not one pass of the joined graph. Where
    // the schedule cannot be simulated on these devices, the pass's.
    if (o.pipeline && o.pipeline->in_flight()) {
      try {
        rep.predicted = search::simulated_estimate(search::Simulator(graph, views, *rep.cost, *o.pipeline));
        rep.predicted_by_simulation = true;
      } catch (const Error&) {
      }
    }
    if (rep.predicted.feasible) s.predicted_step_seconds = rep.predicted.time;
    runtime::ExecutionPlan plan = runtime::make_plan(graph, views, q.devices, o.bucket_bytes);  // as the trainer
    runtime::set_zero(plan, o.zero, o.zero_persistence_threshold, o.zero_weights, o.bucket_bytes);
    const bool scheduled = o.pipeline && o.pipeline->in_flight();
    std::vector<int64_t> chunk;  // some layers of each chunk recomputed (any, with interlaced chunks): the chunks the runtime finds
    if (scheduled && plans_per_chunk(o.recompute, o.recompute_layers, *o.pipeline))
      chunk = pipeline_chunks(graph, views, o.pipeline_devices > 0 ? o.pipeline_devices : runtime::devices_needed(graph, views), *o.pipeline);
    s.predicted_step_bytes = step_bytes(graph, views, q.devices) + runtime::sharded_sync_extra_bytes(plan) +
                             recompute_step_bytes(graph, views, q.devices, o.recompute, scheduled, o.recompute_layers, chunk, o.recompute_operators,
                                                  o.attention);
  }
  for (const Node& n : graph.nodes())
    if (n.op->op_class == OpClass::kSource && !n.op->is_weight && n.outputs[0].rank() > 0) s.batch = std::max(s.batch, n.outputs[0].dims[0].size);
  {  // given weights and checkpoints checked against the model, naming the file
    std::vector<NodeId> weight_nodes;
    for (const Node& n : graph.nodes())
      if (n.op->is_weight) weight_nodes.push_back(n.id);
    if (o.initial_weights) runtime::check_weights(*o.initial_weights, graph, weight_nodes, q.init_weights.empty() ? q.target : q.init_weights);
    if (o.resume) runtime::check_state(*o.resume, graph, weight_nodes, o.optimizer.kind, q.resume);
  }
  const int local = world ? runtime::mpi_local_ranks(world->size()) : static_cast<int>(q.devices);
  o.threads = q.threads > 0 ? q.threads : runtime::default_kernel_threads(local);
  const int64_t steps = o.steps;
  // Said once the request is known to run (bad input is one line).
  if (const OptimizerState runs = runtime::priced_as(o.optimizer); planned_optimizer && runs != *planned_optimizer)
    say(std::string("note: ") + planned_in + " was planned with " + name(*planned_optimizer) + "; this run trains with " +
        runtime::name(o.optimizer.kind) + " (" + name(runs) + ": " + std::to_string(optimizer_states(runs)) + " FP32 state" +
        (optimizer_states(runs) == 1 ? "" : "s") + " per parameter), and its prediction is for that");
  say("training " + s.model + " (" + s.strategy + ") on " + std::to_string(q.devices) + (world ? " MPI rank" : rep.gpu ? " cuda device" : " cpu device") +
      (q.devices == 1 ? "" : "s") + ": " + std::to_string(steps) + " steps, batch " + std::to_string(s.batch) + ", " +
      runtime::name(o.optimizer.kind) + " lr " + [&] {
        std::ostringstream lr;
        lr << o.optimizer.lr;
        return lr.str();
      }() + ", " + std::to_string(o.threads) + " kernel thread" + (o.threads == 1 ? "" : "s") + " each");
  // CUDA products in what the plan computes in (strict FP32, TF32, or
  // BF16/FP16 tensor cores), strict FP32 when told so.
  o.backend = backend_factory({q.backend, world != nullptr, q.tf32 ? o.precision : Precision::kFp32});
  o.time_kernels = !q.outputs.profile.empty() || q.breakdown;
  if (!q.outputs.trace.empty()) o.trace_step = steps - 1;
  if (!q.checkpoint.empty()) {
    // Before any training, not at its end. Under MPI the ranks would have
    // to agree on a failure before training: there it is found when rank 0
    // writes.
    if (!world) runtime::check_checkpoint_target(q.checkpoint);
    o.checkpoint_every = q.checkpoint_every > 0 ? q.checkpoint_every : steps;
    o.checkpoint = [&, model = s.model](const runtime::TrainState& st) {
      runtime::write_checkpoint(q.checkpoint, st, model);
      say("\nwrote checkpoint " + q.checkpoint + " (step " + std::to_string(st.step) + ")");
    };
  }
  if (q.progress) o.progress = [&q, batch = s.batch](const runtime::StepReport& r) { q.progress(r, batch); };
  s.options = o;
  try {
    s.result = world ? runtime::train(graph, views, *world, o) : runtime::train(graph, views, static_cast<int>(q.devices), o);
  } catch (const TrainingError&) {
    throw;
  } catch (const Error& e) {
    throw TrainingError(e.what());
  }
  s.options.progress = nullptr, s.options.checkpoint = nullptr, s.options.initial_weights = nullptr, s.options.resume = nullptr;
  s.options.data = nullptr;
  rep.graph = std::move(graph);
  if (!rep.rank0) return rep;
  if (!s.result.backend_remarks.empty()) say("note: the " + s.result.backend + " backend " + s.result.backend_remarks);
  if (q.breakdown && s.predicted_step_seconds > 0) rep.terms = step_terms(rep.predicted, s.result);

  // A diverged run writes nothing; the outputs are written all or none.
  const auto& L = s.result.losses;
  if (!std::isfinite(L.back()))
    throw FieldError("OptimizerOptions.lr", "training diverged (loss " + std::to_string(L.back()) + "); lower the learning rate");
  const TrainOutputs& w = q.outputs;
  std::vector<std::pair<std::string, std::string>> files;
  if (!w.report.empty()) files.emplace_back(w.report, runtime::run_report_json(s)), rep.written.emplace_back(w.report, "");
  if (!w.plot.empty()) files.emplace_back(w.plot, runtime::loss_curve_svg(s)), rep.written.emplace_back(w.plot, "");
  if (!w.profile.empty()) {
    Profile prof = runtime::profile_from_run(rep.graph, s.result);
    prof.device = std::string(rep.gpu ? "cuda" : "cpu") + " (" + std::to_string(q.devices) + (world ? " MPI ranks, " : " in-process devices, ") +
                  std::to_string(o.threads) + " kernel thread" + (o.threads == 1 ? "" : "s") + " each)";
    int64_t stalled = 0;
    for (const runtime::DeviceTime& d : s.result.device_times) stalled += d.stalled;
    std::string what = std::to_string(prof.entries.size()) + " operator shapes and the optimizer timed over " +
                       std::to_string(s.result.timed_steps) + " step" + (s.result.timed_steps == 1 ? "" : "s");
    if (stalled > 0) what += "; " + std::to_string(stalled) + " device step" + (stalled == 1 ? "" : "s") + " that stalled left out";
    files.emplace_back(w.profile, profile_to_json(prof)), rep.written.emplace_back(w.profile, what);
  }
  if (!w.trace.empty()) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f", s.result.trace.seconds() * 1e3);
    const size_t n = s.result.trace.devices.size();
    files.emplace_back(w.trace, runtime::step_trace_json(rep.graph, s.result.trace));
    rep.written.emplace_back(w.trace, "step " + std::to_string(steps) + ": " + ms + " ms on " + std::to_string(n) + " device" + (n == 1 ? "" : "s"));
  }
  if (!w.weights.empty()) {
    files.emplace_back(w.weights, runtime::safetensors_bytes(s.result.parameters, {{"format", "pt"}}));
    rep.written.emplace_back(w.weights, std::to_string(s.result.parameters.size()) + " weights");
  }
  if (!w.strategy.empty()) files.emplace_back(w.strategy, searched), rep.written.emplace_back(w.strategy, "");
  write_text_files_atomic(files);
  return rep;
}

}  // namespace pcgx::runner
