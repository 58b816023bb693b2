// The search's entry point (see search.h): options checked, then the chosen
// algorithm, each in its own unit.
#include "pcgx/search/search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/search/autoddl_search.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/mcmc_search.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/unity_search.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::search {

std::string_view name(Algorithm a) {
  switch (a) {
    case Algorithm::kUnity: return "unity";
    case Algorithm::kDataParallel: return "data-parallel";
    case Algorithm::kExpert: return "expert";
    case Algorithm::kSequential: return "sequential";
    case Algorithm::kExhaustive: return "exhaustive";
    case Algorithm::kMcmc: return "mcmc";
    case Algorithm::kAutoddl: return "autoddl";
    case Algorithm::kMegatron: return "megatron";
    case Algorithm::kPlan: return "plan";
  }
  return "?";
}

bool uses_rules(Algorithm a) {
  switch (a) {
    case Algorithm::kUnity:
    case Algorithm::kSequential:
    case Algorithm::kExhaustive:
    case Algorithm::kMcmc: return true;
    case Algorithm::kDataParallel:
    case Algorithm::kExpert:
    case Algorithm::kAutoddl:
    case Algorithm::kMegatron:
    case Algorithm::kPlan: return false;
  }
  return false;
}

namespace {

// A view laying a task grid over `devices` in task order: the innermost
// dimensions one device per task while they fit, the outer ones on the same
// devices again (stride 0: co-shard; 0 too where a dimension has one task,
// as strategy files require strides below the device count).
MachineView fill_devices(std::span<const int64_t> extents, int64_t devices) {
  MachineView v{0, 1, std::vector<int64_t>(extents.size(), 0)};
  int64_t used = 1;
  for (size_t k = extents.size(); k-- > 0;)
    if (extents[k] > 1 && used * extents[k] <= devices) v.strides[k] = used, used *= extents[k];
  return v;
}

// The mapping placed the unstated operators as if it placed every
// operator. Each unstated compute operator may take the view of a compute
// operator next to it (through the layout changes between them) whose
// task grid is the same, e.g. follow a stated operator onto its devices;
// a change is kept where the plan simulates faster (delta simulation),
// sweep after sweep until none changes anything, and all are undone where
// the result no longer fits in memory.
void follow_stated_devices(Strategy& st, std::span<const NodeId> stated, const CostModel& cost) {
  const Graph& g = st.graph;
  const int64_t devices = cost.devices();
  const Placement place(g, st.views, devices);
  auto compute = [&](NodeId x) {
    const Node& n = g.node(x);
    return n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs);
  };
  // Per compute operator, the compute operators next to it through parallel ones.
  const auto consumers = g.consumers();
  std::vector<std::vector<NodeId>> next(g.size());
  for (const Node& n : g.nodes()) {
    if (!compute(n.id)) continue;
    std::vector<NodeId> stack{n.id};
    std::set<NodeId> seen{n.id};
    while (!stack.empty()) {
      const NodeId x = stack.back();
      stack.pop_back();
      for (const auto& [c, input] : consumers[static_cast<size_t>(x)]) {
        if (!seen.insert(c).second) continue;
        if (compute(c)) next[static_cast<size_t>(n.id)].push_back(c), next[static_cast<size_t>(c)].push_back(n.id);
        else if (g.node(c).op->op_class == OpClass::kParallel) stack.push_back(c);
      }
    }
  }
  std::vector<char> fixed(g.size(), 0);
  for (NodeId n : stated) fixed[static_cast<size_t>(n)] = 1;
  const std::vector<MachineView> before = st.views;
  Simulator sim(g, st.views, cost);
  double best = sim.time();
  constexpr int kSweeps = 3;
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    bool changed = false;
    for (const Node& n : g.nodes()) {
      if (!compute(n.id) || fixed[static_cast<size_t>(n.id)]) continue;
      const auto& extents = place.tasks(n.id).grid.extents;
      for (NodeId m : next[static_cast<size_t>(n.id)]) {
        const MachineView& v = st.views[static_cast<size_t>(m)];
        if (!v.placed() || v == st.views[static_cast<size_t>(n.id)] || place.tasks(m).grid.extents != extents) continue;
        const MachineView old = st.views[static_cast<size_t>(n.id)];
        sim.set_view(n.id, v);
        if (sim.time() < best * (1 - 1e-12)) {
          best = sim.time(), st.views[static_cast<size_t>(n.id)] = v, changed = true;
        } else {
          sim.set_view(n.id, old);
        }
      }
    }
    if (!changed) break;
  }
  const std::vector<double> memory = sim.memory();
  if (!memory.empty() && *std::max_element(memory.begin(), memory.end()) > sim.capacity()) st.views = before;
}

// The stated devices of `plan` in `st` (its graph lowered from `model`,
// `image` mapping the plan's operators into it), the rest as mapped,
// priced by simulation. Where the mapping placed nothing (co-shard: more
// tasks than devices), the operators no rule places are laid over the
// devices in task order (fill_devices), and shard-level operators' pieces
// sit with their readers (placement.h).
void place_stated_devices(const Graph& model, const UserPlan& plan, std::span<const NodeId> image, const MachineMapper& mapper, Strategy& st) {
  const int64_t devices = mapper.cost().devices();
  const Placement unplaced(st.graph, st.views, devices);
  for (const Node& n : st.graph.nodes())
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs) && !st.views[static_cast<size_t>(n.id)].placed())
      st.views[static_cast<size_t>(n.id)] = fill_devices(unplaced.tasks(n.id).grid.extents, devices);
  const std::vector<NodeId> stated = assign_plan_devices(model, plan, devices, st.graph, image, st.views);
  follow_stated_devices(st, stated, mapper.cost());
  st.estimate = simulated_estimate(Simulator(st.graph, st.views, mapper.cost()));
}

// Per operator of plan_graph(model), its node in `found` by name (the
// operators a plan states keep their names through the search of the
// rest; plan_search checks so), -1 for one without a name there.
std::vector<NodeId> image_by_name(const Graph& model, const UserPlan& plan, const Graph& found) {
  const Graph g = plan_graph(model, plan);
  std::map<std::string, NodeId> by_name;
  for (const Node& n : found.nodes())
    if (!n.name.empty() && n.op->op_class == OpClass::kCompute) by_name.emplace(n.name, n.id);
  std::vector<NodeId> image(g.size(), -1);
  for (const Node& n : g.nodes())
    if (const auto it = by_name.find(n.name); !n.name.empty() && it != by_name.end()) image[static_cast<size_t>(n.id)] = it->second;
  return image;
}

// Each conversion of `st` as its cheapest sequence of parallel operators
// (layout_search.h), kept where the plan is then faster: mapped again by
// the DP, or, where the plan places operators itself (`placed`), at the
// same views by simulation, as such a plan is priced.
void relay_layouts(Strategy& st, const MachineMapper& mapper, bool placed, std::vector<LayoutChoice>& choices) {
  if (!std::isfinite(st.estimate.time)) return;
  Relaid r = cheapest_layout_changes(st.graph, st.views, mapper.cost());
  if (r.choices.empty()) return;
  Strategy next;
  if (placed) {
    next.estimate = simulated_estimate(Simulator(r.graph, r.views, mapper.cost()));
    next.graph = std::move(r.graph), next.views = std::move(r.views);
  } else {
    next = mapper.map(r.graph);
  }
  if (!next.estimate.feasible || !(next.estimate.time < st.estimate.time)) return;
  st = std::move(next);
  choices = std::move(r.choices);
}

}  // namespace

bool predicts_by_simulation(const SearchOptions& o) {
  return o.algorithm == Algorithm::kMcmc ||
         ((o.algorithm == Algorithm::kPlan || o.algorithm == Algorithm::kUnity) && o.plan && assigns_devices(*o.plan));
}

void validate(const SearchOptions& o) {
  if (o.budget < 1) throw FieldError("SearchOptions.budget", "must be at least 1");
  if (!(o.alpha >= 1) || !std::isfinite(o.alpha)) throw FieldError("SearchOptions.alpha", "must be a number of at least 1");
  if (o.split_min_ops < 2) throw FieldError("SearchOptions.split_min_ops", "must be at least 2");
  if (o.exhaustive_limit < 1) throw FieldError("SearchOptions.exhaustive_limit", "must be at least 1");
  if (o.exhaustive_max_nodes < 0) throw FieldError("SearchOptions.exhaustive_max_nodes", "must not be negative");
  if (o.proposals < 1) throw FieldError("SearchOptions.proposals", "must be at least 1");
  if (o.evaluations < 1) throw FieldError("SearchOptions.evaluations", "must be at least 1");
  if (o.restarts < 0) throw FieldError("SearchOptions.restarts", "must not be negative");
  if (o.tensor_degree < 0) throw FieldError("SearchOptions.tensor_degree", "must not be negative");
  const bool stated = o.algorithm == Algorithm::kExpert || o.algorithm == Algorithm::kMegatron;
  if (o.tensor_degree > 0 && !stated)
    throw FieldError("SearchOptions.tensor_degree", "states the expert or megatron search's degree (SearchOptions.algorithm expert or megatron)");
  if (o.sequence_parallel && !stated)
    throw FieldError("SearchOptions.sequence_parallel", "is the expert or megatron search's (SearchOptions.algorithm expert or megatron)");
  if (o.algorithm == Algorithm::kPlan && !o.plan) throw FieldError("SearchOptions.plan", "the plan algorithm lowers a plan, and none is given");
  if (o.plan && o.algorithm != Algorithm::kPlan && o.algorithm != Algorithm::kUnity)
    throw FieldError("SearchOptions.plan", "a plan is lowered as stated (SearchOptions.algorithm plan), or its unstated operators searched "
                                           "(unity), not searched with " + std::string(name(o.algorithm)));
  for (const int64_t d : o.degrees)
    if (d < 2) throw FieldError("SearchOptions.degrees", std::to_string(d) + " is not a parallel degree (at least 2)");
}

std::vector<int64_t> candidate_degrees(int64_t devices) {
  std::vector<int64_t> out;
  for (int64_t d = 2; d <= devices; d *= 2)
    if (devices % d == 0) out.push_back(d);
  if (devices > 1 && (out.empty() || out.back() != devices)) out.push_back(devices);
  return out;
}

SearchResult optimize(const Graph& model, const RuleLibrary& rules, const MachineMapper& mapper, const SearchOptions& options) {
  validate(options);
  const auto t0 = std::chrono::steady_clock::now();
  SearchResult result;
  switch (options.algorithm) {
    case Algorithm::kUnity:
      if (!options.plan) {
        result = unity_search(model, rules, mapper, options);
        break;
      }
      result = plan_search(model, rules, mapper, options);
      {
        // The stated devices placed on what the search found, and its
        // conversions searched, as for a plan lowered as written.
        const bool placed = assigns_devices(*options.plan);
        if (placed)
          place_stated_devices(model, *options.plan, image_by_name(model, *options.plan, result.strategy.graph), mapper, result.strategy);
        if (options.layout_search) relay_layouts(result.strategy, mapper, placed, result.relaid);
      }
      break;
    case Algorithm::kSequential: result = sequential_search(model, rules, mapper, options); break;
    case Algorithm::kExhaustive: result = exhaustive_search(model, rules, mapper, options); break;
    case Algorithm::kDataParallel: result.strategy = mapper.map(best_data_parallel(model, mapper)); break;
    case Algorithm::kMegatron: {  // the tensor-parallel degree stated, 1 unless given (Megatron-LM's default)
      const CostModel& cost = mapper.cost();
      // (A pipeline chunk may hold only a transformer's embeddings or head.)
      auto e = expert(model, cost.machine(), cost.devices(), std::max<int64_t>(options.tensor_degree, 1), options.sequence_parallel, true);
      if (!e) throw Error("megatron: no Megatron-LM plan for '" + model.name() + "' (it covers transformers)");
      result.strategy = mapper.map(*e);
      break;
    }
    case Algorithm::kExpert: {
      const CostModel& cost = mapper.cost();
      // (A pipeline chunk may hold only a transformer's embeddings or head.)
      auto e = options.tensor_degree > 0 ? expert(model, cost.machine(), cost.devices(), options.tensor_degree, options.sequence_parallel, true)
                                         : tuned_expert(model, mapper, options.sequence_parallel, true);
      if (!e) throw Error("expert: no expert strategy for '" + model.name() + "' (it covers transformers, recommendation models and plain MLPs)");
      result.strategy = mapper.map(*e);
      break;
    }
    case Algorithm::kPlan: {  // (on a pipeline stage's part of the model a rule may select nothing there)
      std::vector<NodeId> image;
      result.strategy = mapper.map(lower_plan(model, *options.plan, mapper.cost().devices(), false, &image));
      apply_plan_rewrites(model, *options.plan, &result.applied);  // (what it applied, as a strategy records it)
      const bool placed = assigns_devices(*options.plan);
      if (placed) place_stated_devices(model, *options.plan, image, mapper, result.strategy);
      if (options.layout_search) relay_layouts(result.strategy, mapper, placed, result.relaid);
      break;
    }
    case Algorithm::kMcmc: {
      // Its views are its own (chosen by proposals, costed by simulation).
      McmcResult r = mcmc_search(model, rules, mapper, options);
      result.strategy = std::move(r.strategy), result.applied = std::move(r.applied);
      result.explored = r.stats.proposals, result.evaluated = r.stats.full_simulations + r.stats.delta_simulations;
      break;
    }
    case Algorithm::kAutoddl: {
      AutoddlResult r = autoddl_search(model, mapper, options);
      result.strategy = std::move(r.strategy);
      result.explored = r.stats.rounds, result.evaluated = r.stats.evaluations;
      break;
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace pcgx::search
