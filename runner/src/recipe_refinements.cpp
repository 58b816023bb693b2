// Re-pricing the plan a recipe search found (recipe_refinements.h).
#include "recipe_refinements.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_chunks.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::runner {

namespace {

// The kind of an operator or weight: its name with the layer number as
// '*' ("block*.mlp.intermediate"); one outside any layer, its own.
std::string kind_of(const std::string& name) {
  std::string pattern = search::layer_pattern(name);
  return pattern.empty() ? name : pattern;
}

// Full recomputation chosen (none and selective left no plan; full+gathers
// for Megatron-LM's plan with sequence parallelism, the count's policy
// then): the fewest
// layers recomputed that still fit, Megatron-LM's block method. Recomputing
// fewer layers keeps more activations and re-runs less, so memory falls and
// time rises with the count: a bisection over the counts below `every`
// (which fits: every layer), each re-pricing the plan found with every
// layer recomputed (`price`: its result, or nothing where it does not
// fit), finds the fewest that fit, and it is taken where it is faster.
// Each count tried is listed among the recipes, "(re-priced)". Under
// `policy` full+selective the layers left whole recompute selectively, so
// fewer full layers may fit: the counts are tried again so, after full's,
// and the faster kept.
template <class Result>
void fewest_recomputed_layers(Recompute policy, int32_t every, OptimizeReport& out,
                              const std::function<std::optional<Result>(const search::CostModel&, double& need)>& price,
                              const OptimizeRequest& q, const search::Efficiency& eff, const std::function<void(Result&&)>& adopt,
                              double found_time) {
  const TrainingRecipe chosen = out.cost->recipe();
  std::optional<std::pair<Result, std::shared_ptr<const search::CostModel>>> best;
  double best_time = 0;
  for (int32_t lo = 1, hi = every; lo < hi;) {  // hi: the fewest known to fit
    const int32_t mid = lo + (hi - lo) / 2;
    TrainingRecipe recipe = chosen;
    recipe.recompute = policy, recipe.recompute_layers = mid;
    auto cost = std::make_shared<const search::CostModel>(q.machine, eff, q.profile, q.comm, recipe);
    double need = 0;  // where it does not fit: the smallest per-device need found
    std::optional<Result> r = price(*cost, need);
    RecipeTried tried{recipe, r.has_value(), r ? r->estimate().time : 0.0, need};
    tried.searched = false;
    out.tried.push_back(tried);
    if (r) {
      hi = mid, best_time = r->estimate().time;
      best.emplace(std::move(*r), std::move(cost));
    } else {
      lo = mid + 1;
    }
  }
  if (best && best_time < found_time) adopt(std::move(best->first)), out.cost = std::move(best->second);
}

// One stage: the plan found mapped again under each count.
struct Mapped {
  search::Strategy strategy;
  const search::Estimate& estimate() const { return strategy.estimate; }
};

}  // namespace

void fewest_recomputed_layers(const OptimizeRequest& q, const search::Efficiency& eff, OptimizeReport& out) {
  const TrainingRecipe chosen = out.cost->recipe();
  if (without_regathers(chosen.recompute) != Recompute::kFull || chosen.recompute_layers != kAllLayers) return;
  const Graph& g = out.result.search.strategy.graph;
  for (const Recompute policy : {chosen.recompute, Recompute::kFullSelective})
    fewest_recomputed_layers<Mapped>(
        policy, plan_recompute(g, source_layouts(g), Recompute::kFull).segments, out,
        [&](const search::CostModel& cost, double& need) -> std::optional<Mapped> {
          const search::MachineMapper mapper(cost);
          Mapped m{mapper.map(g)};
          need = mapper.memory_refusals().smallest_need;
          if (!m.strategy.estimate.feasible) return std::nullopt;
          return m;
        },
        q, eff, [&](Mapped&& m) { out.result.search.strategy = std::move(m.strategy); }, out.result.search.strategy.estimate.time);
}

Repriced reprice(const OptimizeRequest& q, const search::Efficiency& eff, const Graph& g, const TrainingRecipe& recipe) {
  auto cost = std::make_shared<const search::CostModel>(q.machine, eff, q.profile, q.comm, recipe);
  const search::MachineMapper mapper(*cost);
  search::Strategy s = mapper.map(g);
  RecipeTried tried{recipe, s.estimate.feasible, s.estimate.feasible ? s.estimate.time : 0.0, mapper.memory_refusals().smallest_need};
  tried.searched = false;
  return {std::move(s), std::move(cost), tried};
}

namespace {

// The same, listed among the recipes tried.
std::pair<search::Strategy, std::shared_ptr<const search::CostModel>> repriced(const OptimizeRequest& q, const search::Efficiency& eff,
                                                                                const Graph& g, const TrainingRecipe& recipe, OptimizeReport& out) {
  Repriced r = reprice(q, eff, g, recipe);
  out.tried.push_back(r.tried);
  return {std::move(r.strategy), std::move(r.cost)};
}

}  // namespace

std::vector<Repriced> reprice_all(const OptimizeRequest& q, const search::Efficiency& eff, const Graph& g,
                                  const std::vector<TrainingRecipe>& recipes) {
  std::vector<std::optional<Repriced>> done(recipes.size());
  // A failure is reported as one after another would have: the first
  // recipe's to fail, whichever thread failed first.
  std::vector<std::exception_ptr> failed(recipes.size());
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, recipes.size(), 1),
      [&](const tbb::blocked_range<size_t>& range) {
        for (size_t i = range.begin(); i != range.end(); ++i) try {
            done[i] = reprice(q, eff, g, recipes[i]);
          } catch (...) {
            failed[i] = std::current_exception();
          }
      },
      tbb::simple_partitioner());
  std::vector<Repriced> out;
  out.reserve(done.size());
  for (size_t i = 0; i < done.size(); ++i) {
    if (failed[i]) std::rethrow_exception(failed[i]);
    out.push_back(std::move(*done[i]));
  }
  return out;
}

// Full recomputation chosen (none and selective left no plan): the
// operators to recompute chosen a kind at a time instead of whole layers
// (a kind: the operators whose names differ only in their layer number,
// "block*.mlp.intermediate"; recompute operators). From what selective
// re-runs, each kind is ranked by the forward time its re-run adds per
// byte it frees on the busiest device (the memory model on the plan's
// views, that kind alone beside the start), and kinds are added in that
// order until the plan fits on those views; then each kind taken, the
// longest re-run first, is left out again where the rest still fits (the
// last one added may free more than was missing). That plan, mapped again
// (or, where the mapping's views need more, the kinds before leaving any
// out), is taken where it is faster than the layers chosen. Each plan
// mapped is listed among the recipes, "(re-priced)".
void cheapest_recomputed_operators(const OptimizeRequest& q, const search::Efficiency& eff, OptimizeReport& out) {
  const TrainingRecipe chosen = out.cost->recipe();
  if (!recomputes_layers(chosen.recompute)) return;
  const search::Strategy& found = out.result.search.strategy;
  const Graph& g = found.graph;
  const SourceLayouts layouts = source_layouts(g);
  const Placement place(g, found.views, q.machine.num_devices());
  // (Under flash, what the kernels re-run themselves is not named: the
  // kernels keep it from the start, at no re-run of their own.)
  const RecomputePlan selective = plan_recompute(g, layouts, Recompute::kSelective, kAllLayers, {}, {}, chosen.attention);
  const AttentionKernels strided = out.cost->attention_kernels(g, layouts);  // (a transpose FlashAttention reads through re-runs at no cost)
  std::set<NodeId> outputs;
  for (const TensorRef& t : g.outputs()) outputs.insert(t.node);
  std::set<std::string> start;                            // what selective re-runs
  std::map<std::string, std::vector<const Node*>> kinds;  // by layer pattern (the name itself without a layer)
  for (const Node& n : g.nodes()) {
    if (n.name.empty() || n.op->op_class != OpClass::kCompute || layouts.is_layout(g, n.id) || n.op->loss != LossKind::kNone ||
        outputs.count(n.id))
      continue;
    if (selective.recomputed_in_kernel(n.id)) continue;
    if (selective.recomputed[static_cast<size_t>(n.id)]) {
      start.insert(n.name);
      continue;
    }
    kinds[kind_of(n.name)].push_back(&n);
  }
  auto recipe_of = [&](const std::set<std::string>& names) {
    TrainingRecipe r = chosen;
    r.recompute = Recompute::kOperators, r.recompute_layers = kAllLayers;
    r.recompute_operators.assign(names.begin(), names.end());
    return r;
  };
  auto busiest = [&](const std::set<std::string>& names) {
    const std::vector<double> m = search::memory_per_device(place, recipe_of(names));
    return *std::max_element(m.begin(), m.end());
  };
  struct Kind {
    const std::vector<const Node*>* nodes;
    double seconds;   // of forward re-run
    double per_byte;  // seconds per byte freed
  };
  std::vector<Kind> ranked;
  const double start_need = busiest(start);
  for (const auto& [pattern, nodes] : kinds) {
    std::set<std::string> with = start;
    double seconds = 0;
    for (const Node* n : nodes) with.insert(n->name), seconds += strided.strided_view(n->id) ? 0.0 : out.cost->task_time(g, *n).forward;
    const double frees = start_need - busiest(with);
    if (frees > 0) ranked.push_back({&nodes, seconds, seconds / frees});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Kind& a, const Kind& b) { return a.per_byte < b.per_byte; });
  const double capacity = q.machine.device.memory_capacity;
  auto with_kinds = [&](const std::vector<char>& in) {
    std::set<std::string> names = start;
    for (size_t k = 0; k < ranked.size(); ++k)
      if (in[k])
        for (const Node* n : *ranked[k].nodes) names.insert(n->name);
    return names;
  };
  std::vector<char> in(ranked.size(), 0);
  for (size_t k = 0; k < ranked.size(); ++k) {
    in[k] = 1;
    if (k + 1 < ranked.size() && busiest(with_kinds(in)) > capacity) continue;  // not yet on these views
    // The last kind added may free more than was missing: each kind taken,
    // the longest re-run first, is left out again where the rest still
    // fits on these views.
    std::vector<char> pruned = in;
    std::vector<size_t> longest;
    for (size_t j = 0; j <= k; ++j) longest.push_back(j);
    std::stable_sort(longest.begin(), longest.end(), [&](size_t a, size_t b) { return ranked[a].seconds > ranked[b].seconds; });
    for (const size_t j : longest) {
      pruned[j] = 0;
      if (busiest(with_kinds(pruned)) > capacity) pruned[j] = 1;
    }
    for (const std::vector<char>* set : {&pruned, &in}) {
      if (set == &in && pruned == in) break;
      auto [s, cost] = repriced(q, eff, g, recipe_of(with_kinds(*set)), out);
      if (!s.estimate.feasible) continue;  // the mapping's own views need more: the whole set, or the next kind too
      if (faster(s.estimate.time, found.estimate.time)) out.result.search.strategy = std::move(s), out.cost = std::move(cost);
      return;
    }
  }
}

// At ZeRO stage 3: which weight blocks stay whole (DeepSpeed's persistence
// threshold). Keeping a block whole trades its memory (the whole weight on
// every device of its group) for its two gathers before use (one gather
// after the update instead), so the candidates are the plan's block sizes:
// threshold b + 1 keeps whole every block of b parameters or fewer. Each
// re-prices (maps) the plan found; the fastest that fits is kept. At most
// kThresholds sizes, spread evenly over the sorted ones.
namespace {
std::vector<int64_t> persistence_thresholds(const Graph& g) {
  const SourceLayouts layouts = source_layouts(g);
  std::vector<int64_t> sizes;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute) continue;
    for (const TensorRef& t : n.inputs)
      if (layouts.weight(t) && g.shape(t).replica > 1) sizes.push_back(g.shape(t).shard_elements());
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  constexpr size_t kThresholds = 24;
  std::vector<int64_t> thresholds;
  for (size_t i = 0; i < std::min(sizes.size(), kThresholds); ++i) {
    const size_t at = sizes.size() <= kThresholds ? i : (i + 1) * sizes.size() / kThresholds - 1;
    thresholds.push_back(sizes[at] + 1);
  }
  return thresholds;
}
}  // namespace

void fastest_persistence_threshold(const OptimizeRequest& q, const search::Efficiency& eff, OptimizeReport& out) {
  TrainingRecipe chosen = out.cost->recipe();
  if (!shards_weights(highest_zero(chosen))) {
    // Another stage won, but stage 3 was priced on this plan (every block
    // sharded) and fit: it competes at its best threshold too, since
    // keeping the small blocks whole can make it the fastest.
    const bool stage3_fit = std::any_of(out.tried.begin(), out.tried.end(), [&](const RecipeTried& t) {
      return t.feasible && !t.searched && shards_weights(t.recipe.zero) && t.recipe.recompute == chosen.recompute &&
             t.recipe.zero_persistence_threshold == 0 && t.micro_batches == 1;
    });
    if (!stage3_fit) return;
    chosen.zero = ZeroStage::k3, chosen.zero_persistence_threshold = 0;
  }
  const Graph& g = out.result.search.strategy.graph;
  const std::vector<int64_t> thresholds = persistence_thresholds(g);
  std::vector<TrainingRecipe> recipes;
  for (const int64_t t : thresholds) {
    if (t == chosen.zero_persistence_threshold) continue;
    recipes.push_back(chosen);
    recipes.back().zero_persistence_threshold = t;
  }
  // Priced at once, taken in order: the first of equally fast thresholds
  // wins, as when they were priced one after another.
  double best_time = out.result.search.strategy.estimate.time;
  for (Repriced& r : reprice_all(q, eff, g, recipes)) {
    out.tried.push_back(r.tried);
    if (r.strategy.estimate.feasible && faster(r.strategy.estimate.time, best_time))
      best_time = r.strategy.estimate.time, out.result.search.strategy = std::move(r.strategy), out.cost = std::move(r.cost);
  }
  // (No weight synchronized: nothing to choose.)
  out.persistence_chosen = !thresholds.empty() && shards_weights(highest_zero(out.cost->recipe()));
}

namespace {

struct Lowered {
  search::PipelineResult result;
  const search::Estimate& estimate() const { return result.search.strategy.estimate; }
};

// A pipelined plan found (gradient accumulation: one stage), as `pcgx plan
// show` writes it (its operators' partitions, its stages, micro-batches,
// schedule and where its chunks end), to lower again under another recipe,
// so that no stage is searched again. Nothing where it is not expressible
// as a plan.
struct Relowering {
  search::SearchOptions options;
  search::PipelineOptions pipeline;
  PipelineShape shape;
  std::optional<Lowered> lower(const OptimizeRequest& q, const search::RuleLibrary& rules, const search::CostModel& cost) const {
    try {
      Lowered l{search::optimize_pipeline(q.model, rules, cost, options, pipeline)};
      if (l.estimate().feasible) return l;
    } catch (const Error&) {  // (a stated pipelined plan over memory is an error rather than a result)
    }
    return std::nullopt;
  }
};

std::optional<Relowering> relowering(const OptimizeRequest& q, const search::PipelineResult& found, const search::RuleLibrary& rules) {
  const search::Strategy& st = found.search.strategy;
  const std::optional<PipelineSchedule> stated = q.pipeline ? q.pipeline->schedule : std::nullopt;
  PipelineShape shape{found.stages, found.micro_batches, found.virtual_stages,
                      stated.value_or(found.virtual_stages > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::k1F1B),
                      q.pipeline ? q.pipeline->programs : std::vector<std::vector<PipelineStep>>{}, found.interlaced};
  std::shared_ptr<search::UserPlan> plan;
  try {
    plan = std::make_shared<search::UserPlan>(search::plan_of_strategy(st.graph));
    plan->pipeline = search::pipeline_of_strategy(st.graph, st.views, q.machine.num_devices(), shape);
    // The algebraic rewrites the search made, so that the plan runs the
    // operators it found (their rules are in `rules`).
    plan->rewrites = search::plan_rewrites_of(found.search.applied, rules, {});
  } catch (const Error&) {
    return std::nullopt;
  }
  plan->source = "the plan found";
  Relowering r{q.search, {shape.stages, shape.micro_batches, shape.virtual_stages, plan->pipeline->schedule, plan->pipeline->programs,
                          plan->pipeline->boundaries},
               shape};
  r.pipeline.interlaced = found.interlaced;
  // (The plan states every partition: an expert's or Megatron-LM's degree
  // and sequence parallelism are in it, and the plan search takes neither.)
  r.options.algorithm = search::Algorithm::kPlan, r.options.plan = plan;
  r.options.tensor_degree = 0, r.options.sequence_parallel = false;
  return r;
}

// A plan lowered again taken in place of the one found: what the search
// did (its time, the candidates it explored and evaluated) stays the
// search's; the plan's own figures (its rules applied, its layout
// rewrites) are the plan's.
void adopt(OptimizeReport& out, search::PipelineResult&& lowered) {
  const search::SearchResult& was = out.result.search;
  lowered.search.seconds = was.seconds, lowered.search.explored = was.explored, lowered.search.evaluated = was.evaluated;
  out.result = std::move(lowered);
}

}  // namespace

// Pipeline stages, the count being per chunk (Megatron-LM counts per
// stage's model chunk): the plan found lowered again under each count.
void fewest_recomputed_layers_pipelined(const OptimizeRequest& q, const search::Efficiency& eff, const search::RuleLibrary& rules,
                                        OptimizeReport& out) {
  const TrainingRecipe chosen = out.cost->recipe();
  if (without_regathers(chosen.recompute) != Recompute::kFull || chosen.recompute_layers != kAllLayers || !q.pipeline) return;
  const search::Strategy& st = out.result.search.strategy;
  const std::optional<Relowering> again = relowering(q, out.result, rules);
  if (!again) return;  // not expressible as a plan: every layer stays recomputed
  // The plan lowered again with every layer recomputed is the baseline:
  // where it does not lower or fit, the counts could not be told apart
  // from it, and none is tried.
  const std::optional<Lowered> all = again->lower(q, rules, *out.cost);
  if (!all) return;
  const double baseline = all->estimate().time;
  // The counts that mean something: up to the most layers of a chunk
  // (a segment is its first node's chunk, recompute_plan.h).
  int32_t most = 1;
  try {
    const std::vector<int64_t> chunk = pipeline_chunks(st.graph, st.views, q.machine.num_devices(), again->shape);
    const RecomputePlan every = plan_recompute(st.graph, source_layouts(st.graph), Recompute::kFull, kAllLayers, chunk);
    std::vector<int64_t> chunk_of(static_cast<size_t>(every.segments), -1);
    for (size_t n = 0; n < every.segment.size(); ++n)
      if (const int32_t sgm = every.segment[n]; sgm >= 0 && chunk_of[static_cast<size_t>(sgm)] < 0) chunk_of[static_cast<size_t>(sgm)] = chunk[n];
    std::map<int64_t, int32_t> per_chunk;
    for (const int64_t c : chunk_of) most = std::max(most, ++per_chunk[c]);
  } catch (const Error&) {
    return;
  }
  double best = std::min(baseline, st.estimate.time);
  for (const Recompute policy : {chosen.recompute, Recompute::kFullSelective})
    fewest_recomputed_layers<Lowered>(
        policy, most, out, [&](const search::CostModel& cost, double&) { return again->lower(q, rules, cost); }, q, eff,
        [&](Lowered&& l) { best = l.estimate().time, adopt(out, std::move(l.result)); }, best);
}

// Gradient accumulation at ZeRO stage 3 (one stage): the persistence
// threshold as fastest_persistence_threshold chooses it, each candidate the
// plan found lowered again, against it lowered again under the threshold
// it was found with (what re-lowering changes in its own right).
void fastest_persistence_threshold_pipelined(const OptimizeRequest& q, const search::Efficiency& eff, const search::RuleLibrary& rules,
                                             OptimizeReport& out) {
  const TrainingRecipe chosen = out.cost->recipe();
  out.persistence_chosen = false;  // (not the plan in one batch's, which this one beat)
  if (!shards_weights(highest_zero(chosen)) || out.result.stages != 1) return;
  const std::optional<Relowering> again = relowering(q, out.result, rules);
  if (!again) return;
  const std::vector<int64_t> thresholds = persistence_thresholds(out.result.search.strategy.graph);
  const std::optional<Lowered> same = again->lower(q, rules, *out.cost);
  if (!same || thresholds.empty()) return;
  double best = std::min(same->estimate().time, out.result.search.strategy.estimate.time);
  out.persistence_chosen = true;
  for (const int64_t t : thresholds) {
    if (t == chosen.zero_persistence_threshold) continue;
    TrainingRecipe recipe = chosen;
    recipe.zero_persistence_threshold = t;
    auto cost = std::make_shared<const search::CostModel>(q.machine, eff, q.profile, q.comm, recipe);
    std::optional<Lowered> l = again->lower(q, rules, *cost);
    RecipeTried tried{recipe, l.has_value(), l ? l->estimate().time : 0.0, 0, out.result.micro_batches};
    tried.searched = false;
    out.tried.push_back(tried);
    if (l && faster(l->estimate().time, best)) best = l->estimate().time, adopt(out, std::move(l->result)), out.cost = std::move(cost);
  }
}

std::set<std::string> recomputed_names(const Graph& g, const TrainingRecipe& recipe, std::span<const int64_t> chunk) {
  const RecomputePlan plan = plan_recompute(g, source_layouts(g), recipe, chunk);
  std::set<std::string> names;
  for (const Node& n : g.nodes())
    if (plan.recomputed[static_cast<size_t>(n.id)]) names.insert(n.name);
  return names;
}

// ZeRO groups (fastest_zero_groups): the weights of `g` by layer pattern,
// the groups with fewest parameters first; each group at each lower
// stage, under the recipe kept so far, `taken` pricing it (true: faster
// than the plan kept and fitting, kept). Where any group moved, the recipe kept is
// listed among the recipes tried.
namespace {
template <class Taken>
void lower_zero_groups(const Graph& g, OptimizeReport& out, Taken&& taken) {
  TrainingRecipe best = out.cost->recipe();
  if (!shards_gradients(best.zero) || !best.zero_weights.empty()) return;
  struct Group {
    int64_t parameters = 0;
    std::vector<std::string> weights;
  };
  std::map<std::string, Group> by_pattern;
  for (const Node& n : g.nodes())
    if (n.op->is_weight && !n.name.empty()) {
      Group& x = by_pattern[kind_of(n.name)];
      x.parameters += n.outputs[0].num_elements();
      x.weights.push_back(n.name);
    }
  if (by_pattern.size() < 2) return;  // one group: the plan's stage, chosen already
  std::vector<const Group*> order;
  for (const auto& [pattern, x] : by_pattern) order.push_back(&x);
  std::stable_sort(order.begin(), order.end(), [](const Group* a, const Group* b) { return a->parameters < b->parameters; });
  bool moved = false;
  for (const Group* group : order) {
    // Each lower stage from the recipe before this group; `taken` keeps a
    // later one only where it beats the one taken before (stage 1 skips
    // the reduce-scatters of the micro-batches but the last, where stage
    // 2 may hide them behind the backward passes).
    const TrainingRecipe base = best;
    for (auto lower = ZeroStage::k1; lower < base.zero; lower = static_cast<ZeroStage>(static_cast<int>(lower) + 1)) {
      TrainingRecipe recipe = base;
      for (const std::string& w : group->weights) recipe.zero_weights.push_back({w, lower});
      sort_zero_weights(recipe.zero_weights);
      if (!taken(recipe)) continue;
      best = std::move(recipe), moved = true;
    }
  }
  if (!moved) return;
  RecipeTried tried{best, true, out.result.search.strategy.estimate.time, 0, out.result.micro_batches};
  tried.searched = false;
  out.tried.push_back(tried);
}
}  // namespace

void fastest_zero_groups(const OptimizeRequest& q, const search::Efficiency& eff, OptimizeReport& out) {
  const Graph g = out.result.search.strategy.graph;
  lower_zero_groups(g, out, [&](const TrainingRecipe& recipe) {
    auto cost = std::make_shared<const search::CostModel>(q.machine, eff, q.profile, q.comm, recipe);
    search::Strategy s = search::MachineMapper(*cost).map(g);
    if (!s.estimate.feasible || !faster(s.estimate.time, out.result.search.strategy.estimate.time)) return false;
    out.result.search.strategy = std::move(s), out.cost = std::move(cost);
    return true;
  });
}

void fastest_zero_groups_pipelined(const OptimizeRequest& q, const search::Efficiency& eff, const search::RuleLibrary& rules, OptimizeReport& out) {
  if (!shards_gradients(out.cost->recipe().zero) || out.result.stages != 1) return;
  const std::optional<Relowering> again = relowering(q, out.result, rules);
  if (!again) return;
  // Against the plan lowered again under its own recipe (what re-lowering
  // changes in its own right), as fastest_persistence_threshold_pipelined.
  const std::optional<Lowered> same = again->lower(q, rules, *out.cost);
  if (!same) return;
  double best = std::min(same->estimate().time, out.result.search.strategy.estimate.time);
  const Graph g = out.result.search.strategy.graph;
  lower_zero_groups(g, out, [&](const TrainingRecipe& recipe) {
    auto cost = std::make_shared<const search::CostModel>(q.machine, eff, q.profile, q.comm, recipe);
    std::optional<Lowered> l = again->lower(q, rules, *cost);
      if (!l || !faster(l->estimate().time, best)) return false;
    best = l->estimate().time, adopt(out, std::move(l->result)), out.cost = std::move(cost);
    return true;
  });
}

bool search_chosen_recipe(const OptimizeRequest& q, const search::Efficiency& eff, const search::RuleLibrary& rules, OptimizeReport& out) {
  const TrainingRecipe chosen = out.cost->recipe();
  for (const RecipeTried& t : out.tried)
    if (t.searched && t.recipe == chosen) return false;  // its own search's plan
  auto cost = std::make_shared<const search::CostModel>(q.machine, eff, q.profile, q.comm, chosen);
  const search::MachineMapper mapper(*cost);
  search::SearchResult again;
  try {
    again = search::optimize(q.model, rules, mapper, q.search);
  } catch (const Error&) {  // (the plan kept stands)
    return false;
  }
  const search::Estimate& e = again.strategy.estimate;
  RecipeTried tried{chosen, e.feasible, e.feasible ? e.time : 0.0, mapper.memory_refusals().smallest_need};
  tried.again = true;
  out.tried.push_back(tried);
  if (!e.feasible || !faster(e.time, out.result.search.strategy.estimate.time)) return false;
  // Operators named to recompute (cheapest_recomputed_operators) must
  // still be there to recompute: a rule may have fused one away.
  if (!chosen.recompute_operators.empty()) {
    const std::set<std::string> recomputed = recomputed_names(again.strategy.graph, chosen);
    for (const std::string& name : chosen.recompute_operators)
      if (!recomputed.count(name)) return false;
  }
  // The report's search figures are both searches'.
  const search::SearchResult& first = out.result.search;
  again.seconds += first.seconds, again.explored += first.explored, again.evaluated += first.evaluated;
  out.result.search = std::move(again), out.cost = std::move(cost);
  return true;
}

}  // namespace pcgx::runner
