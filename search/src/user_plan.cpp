// Plans a person writes (see user_plan.h): the selectors, the lowering onto
// baselines.h's parallelize, and a strategy read back as a plan (the file:
// plan_json.cpp).
#include "pcgx/search/user_plan.h"

#include "pcgx/pcg/source_layout.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>

#include "pcgx/pcg/degree_inference.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_chunks.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::search {
namespace {

std::string describe(const PlanSelector& s) {
  std::string out;
  auto add = [&](const std::string& x) { out += (out.empty() ? "" : ", ") + x; };
  if (!s.name.empty()) add("name '" + s.name + "'");
  if (!s.op.empty()) add("op " + s.op);
  if (s.layers) add("layers " + std::to_string(s.layers->first) + "-" + std::to_string(s.layers->second));
  if (s.weights) add(*s.weights ? "reading a weight" : "reading no weight");
  return out.empty() ? "every operator" : out;
}

// '*' matches any run of characters, '?' one.
bool glob(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) ++p, ++t;
    else if (p < pattern.size() && pattern[p] == '*') star = p++, mark = t;
    else if (star != std::string_view::npos) p = star + 1, t = ++mark;
    else return false;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

std::vector<std::string> recompute_operator_names(const Graph& model, std::span<const std::string> patterns, const std::string& what) {
  const SourceLayouts layouts = source_layouts(model);
  std::set<std::string> names;
  for (const std::string& pattern : patterns) {
    bool any = false;
    const Node* read_after = nullptr;  // a loss or an output it names
    for (const Node& n : model.nodes()) {
      if (n.name.empty() || !glob(pattern, n.name)) continue;
      if (n.op->op_class == OpClass::kSource || layouts.is_layout(model, n.id)) continue;  // nothing to recompute
      const bool output = std::any_of(model.outputs().begin(), model.outputs().end(), [&](const TensorRef& t) { return t.node == n.id; });
      if (n.op->loss != LossKind::kNone || output) {
        read_after = &n;
        continue;
      }
      names.insert(n.name);
      any = true;
    }
    if (!any && read_after)
      throw FieldError(what, "'" + pattern + "' names " + describe(*read_after) +
                                 ", whose output the step reads after its backward pass (a loss or a graph output): it cannot be recomputed");
    if (!any) throw FieldError(what, "'" + pattern + "' names no operator of " + model.name() + " that computes (a source or a weight's layout has nothing to recompute)");
  }
  return {names.begin(), names.end()};
}

ZeroWeights zero_weight_stages(const Graph& model, const ZeroWeights& groups, const std::string& what) {
  std::map<std::string, std::pair<ZeroStage, std::string>> stage;  // weight: its stage and the pattern that gave it
  for (const WeightZero& group : groups) {
    bool any = false;
    for (const Node& n : model.nodes()) {
      if (!n.op->is_weight || n.name.empty() || !glob(group.weight, n.name)) continue;
      any = true;
      const auto [it, fresh] = stage.try_emplace(n.name, group.stage, group.weight);
      if (!fresh && it->second.first != group.stage)
        throw FieldError(what, "weight " + n.name + " is at ZeRO stage " + name(it->second.first) + " by '" + it->second.second + "' and at " +
                                   name(group.stage) + " by '" + group.weight + "'");
    }
    if (!any) {
      std::string some;
      int listed = 0;
      for (const Node& n : model.nodes())
        if (n.op->is_weight && !n.name.empty() && listed++ < 6) some += (some.empty() ? "" : ", ") + n.name;
      throw FieldError(what, "'" + group.weight + "' names no weight of " + model.name() + " (its weights: " + some + (listed > 6 ? ", ..." : "") + ")");
    }
  }
  ZeroWeights out;
  for (const auto& [weight, s] : stage) out.push_back({weight, s.first});
  return out;
}

namespace {

// Where the layer number lies in a node's name: the digits ending the
// first dot-separated part that ends in some (at most 9 of them).
std::optional<std::pair<size_t, size_t>> layer_digits(const std::string& name) {
  size_t start = 0;
  while (start < name.size()) {
    const size_t end = std::min(name.find('.', start), name.size());
    size_t digits = end;
    while (digits > start && std::isdigit(static_cast<unsigned char>(name[digits - 1]))) --digits;
    if (digits < end && end - digits <= 9) return std::make_pair(digits, end);
    start = end + 1;
  }
  return std::nullopt;
}

std::optional<int64_t> layer_of(const std::string& name) {
  const auto at = layer_digits(name);
  if (!at) return std::nullopt;
  return std::stoll(name.substr(at->first, at->second - at->first));
}

}  // namespace

std::vector<WeightUse> weight_uses(const Graph& g) {
  const SourceLayouts layouts = source_layouts(g);
  std::vector<WeightUse> out(g.size(), WeightUse::kNone);
  for (const Node& n : g.nodes()) {
    if (layouts.weight({n.id, 0})) out[static_cast<size_t>(n.id)] = WeightUse::kLayout;
    else if (std::any_of(n.inputs.begin(), n.inputs.end(), [&](const TensorRef& i) { return layouts.weight(i); }))
      out[static_cast<size_t>(n.id)] = WeightUse::kReads;
  }
  return out;
}

bool selects(const PlanSelector& s, const Node& n, WeightUse use) {
  if (!s.op.empty() && n.op->name != s.op) return false;
  if (s.weights && use != (*s.weights ? WeightUse::kReads : WeightUse::kNone)) return false;
  if (!s.name.empty() && !glob(s.name, n.name)) return false;
  if (s.layers) {
    const auto l = layer_of(n.name);
    if (!l || *l < s.layers->first || *l > s.layers->second) return false;
  }
  return true;
}

Graph plan_graph(const Graph& model, const UserPlan& plan, bool whole) {
  const Graph rewritten = apply_plan_rewrites(model, plan, nullptr, !whole);
  const std::set<std::string> split = batch_norms_split(rewritten, plan);
  Graph g = synchronized_batch_norm(rewritten, &split);
  // As many blocks as every "classes" degree stated divides: their least
  // common multiple.
  int64_t blocks = 0;
  for (const PlanRule& r : plan.rules)
    if (const auto it = r.partition.find(kClassesKind); it != r.partition.end())
      blocks = blocks == 0 ? it->second : std::lcm(blocks, it->second);
  if (blocks == 0) return g;
  try {
    return vocabulary_parallel_loss(g, blocks);
  } catch (const Error& e) {
    throw Error(plan.source + ": its \"classes\" degrees split the loss into " + std::to_string(blocks) + " blocks (their least common multiple): " +
                e.what());
  }
}

std::vector<NodePlan> plan_partitions(const Graph& model, const UserPlan& plan, int64_t devices, std::vector<int>* rule_of_out,
                                      bool every_rule_selects) {
  std::vector<NodePlan> out(model.size());
  std::vector<int> rule_of(model.size(), -1);
  const std::vector<WeightUse> uses = weight_uses(model);
  for (size_t r = 0; r < plan.rules.size(); ++r) {
    bool any = false;
    for (const Node& n : model.nodes()) {
      if (n.op->op_class != OpClass::kCompute || !selects(plan.rules[r].select, n, uses[static_cast<size_t>(n.id)])) continue;
      any = true;
      out[static_cast<size_t>(n.id)] = plan.rules[r].partition;
      rule_of[static_cast<size_t>(n.id)] = static_cast<int>(r);
    }
    if (!any && every_rule_selects && !selects_a_statistics_part(model, plan.rules[r].select))
      throw Error(plan.source + ": rules[" + std::to_string(r) + "] (" + describe(plan.rules[r].select) + ") selects no operator of '" +
                  model.name() + "'");
  }
  for (const Node& n : model.nodes()) {
    const auto k = static_cast<size_t>(n.id);
    if (rule_of[k] < 0 || out[k].empty()) continue;
    const std::string where = plan.source + ": rules[" + std::to_string(rule_of[k]) + "]: " + pcgx::describe(n);
    const std::vector<TensorType> in = model.input_types(n);
    const std::vector<ParallelKind> kinds = n.op->kinds ? n.op->kinds(n.attrs, in) : std::vector<ParallelKind>{};
    NodePlan resolved;
    std::map<std::string, std::string> named_as;  // kind -> how the rule named it
    int64_t product = 1;
    // Tasks the rule places itself need not fit the devices one each
    // (co-shard); assign_plan_devices checks its list.
    const bool placed = !plan.rules[static_cast<size_t>(rule_of[k])].devices.empty();
    for (const auto& [name, degree] : out[k]) {
      const ParallelKind* kind = nullptr;  // none for replicas: copies of the whole operator, no kind of its own
      if (name == kReplicasKind) {
        // (The step's loss is one value; and copies of an operator reading
        // the model's own slots interleave with them, so no reader could
        // take one copy of each.)
        if (degree > 1 && n.op->loss != LossKind::kNone) throw Error(where + ": a loss runs once (the step's loss is one value): no replicas");
        for (const TensorRef& t : n.inputs)
          if (degree > 1 && model.node(t.node).op->op_class == OpClass::kCompute && model.shape(t).replica > 1)
            throw Error(where + ": an input holds replica slots of its own (a Concat along the replica axis), which replicas cannot copy apart");
      } else {
        if (name == kSamplesKind) {
          kind = sample_kind(kinds);
          if (!kind) continue;  // nothing splits its samples: it runs unsplit by them
        } else {
          for (const ParallelKind& x : kinds)
            if (x.name == name) kind = &x;
        }
        if (!kind) {
          std::string list;
          for (const ParallelKind& x : kinds) list += (list.empty() ? "" : ", ") + x.name;
          throw Error(where + " has no parallel kind '" + name + "' (its kinds: " + (list.empty() ? "none" : list) + ", or " + kSamplesKind +
                      " or " + kReplicasKind + ")");
        }
        if (const auto [it, fresh] = named_as.emplace(kind->name, name); !fresh)
          throw Error(where + ": '" + it->second + "' and '" + name + "' both name its kind " + kind->name);
      }
      if (degree == 1) continue;
      if (degree > devices && !placed)
        throw Error(where + ": " + name + " " + std::to_string(degree) + " is more than the " + std::to_string(devices) + " devices");
      if (kind) {
        for (size_t i = 0; i < kind->inputs.size() && i < in.size(); ++i) {
          const int dim = kind->inputs[i];
          if (dim < 0) continue;
          const int64_t size = in[i].shape.at(static_cast<size_t>(dim));
          if (size % degree != 0)
            throw Error(where + ": " + name + " " + std::to_string(degree) + " does not divide dimension " + std::to_string(dim) + " of input " +
                        std::to_string(i) + " (" + std::to_string(size) + ")");
        }
        if (kind->must_divide > 0 && kind->must_divide % degree != 0)
          throw Error(where + ": " + name + " " + std::to_string(degree) + " does not divide " + std::to_string(kind->must_divide));
      }
      resolved[kind ? kind->name : name] = degree;
      product *= degree;
      if (product > devices && !placed)
        throw Error(where + ": its degrees multiply to more than the " + std::to_string(devices) + " devices");
    }
    if (devices % product != 0 && !placed)
      throw Error(where + ": its degrees multiply to " + std::to_string(product) + ", which does not divide the " + std::to_string(devices) +
                  " devices");
    out[k] = std::move(resolved);
  }
  if (rule_of_out) *rule_of_out = std::move(rule_of);
  return out;
}

PlanDecisions plan_decisions(const Graph& model, const UserPlan& plan, int64_t devices) {
  const Graph g = plan_graph(model, plan);
  std::vector<int> rule_of;
  const std::vector<NodePlan> partitions = plan_partitions(g, plan, devices, &rule_of);
  PlanDecisions d;
  d.per_rule.assign(plan.rules.size(), 0);
  d.whole_batch_norm_parts.assign(plan.rules.size(), 0);
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute) continue;
    const auto k = static_cast<size_t>(n.id);
    ++d.operators;
    if (rule_of[k] >= 0) ++d.per_rule[static_cast<size_t>(rule_of[k])];
    else ++d.unstated;
    if (partitions[k].empty()) ++d.one_task;
  }
  for (size_t r = 0; r < plan.rules.size(); ++r)
    if (d.per_rule[r] == 0) d.whole_batch_norm_parts[r] = selects_a_statistics_part(g, plan.rules[r].select);
  return d;
}

namespace {
// plan_graph(model) and, per node, the rule it runs by (-1: none).
std::pair<Graph, std::vector<int>> rules_of(const Graph& model, const UserPlan& plan, int64_t devices) {
  std::pair<Graph, std::vector<int>> out{plan_graph(model, plan), {}};
  plan_partitions(out.first, plan, devices, &out.second, false);
  return out;
}
}  // namespace

std::set<std::string> stated_operators(const Graph& model, const UserPlan& plan, int64_t devices) {
  const auto [g, rule_of] = rules_of(model, plan, devices);
  std::map<std::string, int> named;  // compute operators per name
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kCompute) ++named[n.name];
  std::set<std::string> out;
  for (const Node& n : g.nodes()) {
    const int r = rule_of[static_cast<size_t>(n.id)];
    if (r < 0) continue;
    // A search keeps a stated operator fixed by its name.
    if (n.name.empty() || named[n.name] > 1)
      throw Error(plan.source + ": rules[" + std::to_string(r) + "]: " + pcgx::describe(n) +
                  (n.name.empty() ? " has no name" : " shares its name with another operator") +
                  ", so a search of the unstated operators (\"unstated\": \"search\") cannot keep it as stated");
    out.insert(n.name);
  }
  return out;
}

std::string rule_selecting(const Graph& model, const UserPlan& plan, int64_t devices, const std::string& name) {
  try {
    const auto [g, rule_of] = rules_of(model, plan, devices);
    for (const Node& n : g.nodes())
      if (n.name == name && rule_of[static_cast<size_t>(n.id)] >= 0) return "rules[" + std::to_string(rule_of[static_cast<size_t>(n.id)]) + "] selects it";
    return "no rule selects it";
  } catch (const Error&) {
    return {};  // the plan's own mistakes are reported where they are found
  }
}

bool assigns_devices(const UserPlan& plan) {
  return std::any_of(plan.rules.begin(), plan.rules.end(), [](const PlanRule& r) { return !r.devices.empty(); });
}

std::vector<NodeId> assign_plan_devices(const Graph& model, const UserPlan& plan, int64_t devices, const Graph& lowered,
                                        std::span<const NodeId> image, std::vector<MachineView>& views) {
  std::vector<NodeId> placed;
  // The operators of the model each rule decides, as lower_plan lowered
  // them (not the conversions it inserted, which no rule selects).
  const Graph g = plan_graph(model, plan);
  std::vector<int> rule_of;
  plan_partitions(g, plan, devices, &rule_of, false);
  for (const Node& original : g.nodes()) {
    const int rule = rule_of[static_cast<size_t>(original.id)];
    if (rule < 0 || plan.rules[static_cast<size_t>(rule)].devices.empty()) continue;
    const std::vector<int64_t>& list = plan.rules[static_cast<size_t>(rule)].devices;
    const std::string where = plan.source + ": rules[" + std::to_string(rule) + "].devices: " + pcgx::describe(original);
    const NodeId id = image[static_cast<size_t>(original.id)];
    if (id < 0) throw Error(where + " is not in the lowered plan");
    const TaskGrid grid = task_grid(lowered, lowered.node(id));
    std::string dims;
    for (size_t k = 0; k < grid.extents.size(); ++k)
      if (grid.extents[k] > 1) dims += (dims.empty() ? "" : " x ") + grid.names[k] + " " + std::to_string(grid.extents[k]);
    if (dims.empty()) dims = "one task";
    const int64_t tasks = grid.num_tasks();
    if (static_cast<int64_t>(list.size()) != tasks)
      throw Error(where + " runs " + std::to_string(tasks) + " task" + (tasks == 1 ? "" : "s") + " (" + dims + "), and " +
                  std::to_string(list.size()) + " devices are stated");
    for (const int64_t d : list)
      if (d >= devices)
        throw Error(where + ": device " + std::to_string(d) + " is not one of the " + std::to_string(devices) + " devices" +
                    (plan.pipeline && plan.pipeline->stages > 1 ? " of a stage (a pipelined plan numbers them within each stage)" : ""));
    // The view: task 0's device, and per grid dimension the step from it
    // to the task one further along that dimension (row-major). A stride
    // of 0 runs that dimension's tasks on one device, one after another
    // (co-shard).
    MachineView v;
    v.start = list[0];
    v.strides.assign(grid.extents.size(), 1);
    int64_t step = tasks;
    for (size_t k = 0; k < grid.extents.size(); ++k) {
      step /= grid.extents[k];
      if (grid.extents[k] > 1) v.strides[k] = list[static_cast<size_t>(step)] - list[0];
    }
    bool view = std::all_of(v.strides.begin(), v.strides.end(), [](int64_t x) { return x >= 0; });
    for (int64_t t = 0; view && t < tasks; ++t) view = v.device(t, grid.extents) == list[static_cast<size_t>(t)];
    if (!view)
      throw Error(where + ": these devices are not a machine view over its tasks (" + dims +
                  "): task t runs on the first device plus, per dimension, its index times a stride (0: co-shard, on one device)");
    views[static_cast<size_t>(id)] = v;
    placed.push_back(id);
  }
  return placed;
}

Graph lower_plan(const Graph& model, const UserPlan& plan, int64_t devices, bool every_rule_selects, std::vector<NodeId>* image) {
  const Graph g = plan_graph(model, plan, every_rule_selects);
  std::vector<int> rule_of;
  const std::vector<NodePlan> partitions = plan_partitions(g, plan, devices, &rule_of, every_rule_selects);
  std::vector<RefusedPlan> refused;
  Graph out = parallelize(g, [&](const Graph&, const Node& n) { return partitions[static_cast<size_t>(n.id)]; }, &refused, image);
  if (!refused.empty()) {
    const NodeId n = refused[0].node;
    throw Error(plan.source + ": rules[" + std::to_string(rule_of[static_cast<size_t>(n)]) + "]: " + pcgx::describe(g.node(n)) +
                " cannot run as planned: " + refused[0].reason);
  }
  return out;
}

}  // namespace pcgx::search

namespace pcgx::search {

std::string layer_pattern(const std::string& name) {
  const auto at = layer_digits(name);
  return at ? name.substr(0, at->first) + "*" + name.substr(at->second) : std::string();
}

namespace {

bool plain_name(const std::string& name) { return name.find_first_of("*?") == std::string::npos; }

// Per tensor of a strategy, the replica slots the model itself gives it,
// as lowering a plan reads the model (baselines.h's parallelize): a Concat
// along the replica axis that an algebraic rewrite made (it names the
// operators it makes; a parallel rule's are unnamed, and a plan does not
// state those) holds each operand in slots of its own, a Split along it
// takes them apart, and an operator reading such slots runs once per
// slot. What parallelization adds is not counted: copies (Replicate, a
// replicated input) keep the count, and a Reduce or AllReduce of k slots
// leaves 1/k of it.
std::vector<std::vector<int64_t>> model_replicas(const Graph& g) {
  std::vector<std::vector<int64_t>> r(g.size());
  for (const Node& n : g.nodes()) {
    auto& out = r[static_cast<size_t>(n.id)];
    out.assign(n.outputs.size(), 1);
    if (n.inputs.empty()) continue;
    std::vector<int64_t> in;
    for (const TensorRef& t : n.inputs) in.push_back(r[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]);
    const bool shard_level = n.op->is_shard_level(n.attrs);
    if (shard_level && n.op->data_move == DataMove::kSplitReplicas) {
      // sizes count the strategy's slots: the model's share of them.
      const IntList& sizes = n.attrs.get_ints("sizes");
      const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
      for (size_t o = 0; o < out.size() && o < sizes.size(); ++o)
        if ((sizes[o] * in[0]) % total == 0) out[o] = std::max<int64_t>(1, sizes[o] * in[0] / total);
    } else if (shard_level && n.op->data_move == DataMove::kConcatReplicas) {
      out.assign(out.size(), n.name.empty() ? *std::max_element(in.begin(), in.end()) : std::accumulate(in.begin(), in.end(), int64_t{0}));
    } else if (n.op->data_move == DataMove::kReduce || n.op->data_move == DataMove::kAllReduce) {
      out.assign(out.size(), std::max<int64_t>(1, in[0] / n.attrs.get_int("degree")));
    } else {
      out.assign(out.size(), n.op->op_class == OpClass::kCompute ? *std::max_element(in.begin(), in.end()) : in[0]);
    }
  }
  return r;
}

}  // namespace

UserPlan plan_of_strategy(const Graph& g, std::span<const MachineView> views, int64_t stage_devices) {
  // The operators named, and a whole BatchNorm's statistics parts, which
  // plan_graph would make were a rule to split them: they run as it does.
  struct Named {
    std::string name;
    NodeId id;
    bool part = false;  // a whole BatchNorm's statistic: one task, no vote for the first rule
  };
  std::vector<Named> named;
  std::map<std::string, const Node*> by_name;
  // How each named operator runs: its partition, and its devices where it
  // co-shards (only a device list states that).
  using Run = std::pair<NodePlan, std::vector<int64_t>>;
  std::vector<Run> partition;
  const std::vector<std::vector<int64_t>> replicas = model_replicas(g);
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs) || n.name.empty()) continue;
    const TaskGrid grid = task_grid(g, n);
    const std::vector<ParallelKind> kinds = n.op->kinds ? n.op->kinds(n.attrs, g.input_types(n)) : std::vector<ParallelKind>{};
    const ParallelKind* samples = sample_kind(kinds);
    NodePlan p;
    for (size_t k = 0; k < grid.names.size(); ++k) {
      if (grid.extents[k] <= 1) continue;
      if (grid.names[k] == "slot") {
        // One task per slot the model gives its inputs is how the plan's
        // model runs it too; more copies than that, a plan cannot state.
        int64_t given = 1;
        for (const TensorRef& t : n.inputs) given = std::max(given, replicas[static_cast<size_t>(t.node)][static_cast<size_t>(t.output)]);
        if (grid.extents[k] == given) continue;
        // More: the operator run in copies (where its model gives it one slot:
        // copies of several interleave with them, which a plan cannot state).
        if (given == 1) {
          p[kReplicasKind] = grid.extents[k] / given;
          continue;
        }
        throw Error(pcgx::describe(n) + " runs " + std::to_string(grid.extents[k]) + " replica slots where its model gives it " +
                    std::to_string(given) + " (copies of them), which a plan cannot state");
      }
      p[samples && samples->name == grid.names[k] ? std::string(kSamplesKind) : grid.names[k]] = grid.extents[k];
    }
    if (!plain_name(n.name)) throw Error(pcgx::describe(n) + ": a name with '*' or '?' cannot be selected on its own");
    if (const auto [it, fresh] = by_name.emplace(n.name, &n); !fresh)
      throw Error(pcgx::describe(*it->second) + " and " + pcgx::describe(n) + " share a name, by which a plan selects");
    std::vector<int64_t> devices;
    if (static_cast<size_t>(n.id) < views.size() && views[static_cast<size_t>(n.id)].placed()) {
      for (int64_t t = 0; t < grid.num_tasks(); ++t) devices.push_back(views[static_cast<size_t>(n.id)].device(t, grid.extents));
      std::vector<int64_t> sorted = devices;
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) devices.clear();  // one task a device: the mapping's to place
      if (stage_devices > 0 && !devices.empty()) {  // within its stage (a stage's devices are consecutive)
        const int64_t first = sorted.front() / stage_devices * stage_devices;
        for (int64_t& d : devices) d -= first;
      }
    }
    named.push_back({n.name, n.id});
    partition.push_back({std::move(p), std::move(devices)});
    if (n.op->name == "BatchNorm" && n.attrs.get_int("group") == 0)
      for (const char* part : {".sum", ".squares"}) named.push_back({n.name + part, n.id, true}), partition.push_back({});
  }
  UserPlan plan;
  plan.source = g.name();
  if (named.empty()) return plan;
  // The most common partition first, for every operator; of equally common
  // ones the one naming the fewest kinds (plain data parallelism before a
  // split of some other dimension). Counted by operator of a layer (every
  // layer's "block*.ln1" once), so that a model's count of layers does not
  // decide it.
  std::map<Run, int> count;
  std::set<std::pair<Run, std::string>> counted;
  for (size_t i = 0; i < partition.size(); ++i) {
    const std::string pattern = layer_pattern(named[i].name);
    if (!named[i].part && counted.insert({partition[i], pattern.empty() ? named[i].name : pattern}).second) ++count[partition[i]];
  }
  const Run* common = &count.begin()->first;
  for (const auto& [p, c] : count)
    if (c > count[*common] || (c == count[*common] && p.first.size() < common->first.size())) common = &p;
  plan.rules.push_back({PlanSelector{}, common->first, common->second});
  // Then the rest, by layer pattern where every operator it selects runs alike.
  std::map<std::string, std::vector<size_t>> by_pattern;
  for (size_t i = 0; i < named.size(); ++i)
    if (partition[i] != *common) by_pattern[layer_pattern(named[i].name)].push_back(i);
  std::vector<std::pair<NodeId, PlanRule>> rules;  // by first operator, for graph order
  // One rule for `members` by `pattern`, where they run alike and it selects nothing else.
  auto one_rule = [&](const std::string& pattern, const std::vector<size_t>& members) {
    if (pattern.empty()) return false;
    for (size_t i : members)
      if (partition[i] != partition[members.front()]) return false;
    size_t selected = 0;
    for (const Named& n : named) selected += glob(pattern, n.name);
    if (selected != members.size()) return false;
    const Run& run = partition[members.front()];
    rules.push_back({named[members.front()].id, {PlanSelector{pattern, "", std::nullopt, std::nullopt}, run.first, run.second}});
    return true;
  };
  for (const auto& [pattern, members] : by_pattern) {
    if (one_rule(pattern, members)) continue;
    // Where '*' selects more ("block*.attn_dropout" also selects
    // "block0.attn.attn_dropout"), the layer index as that many '?'s: a
    // rule per count of digits.
    std::map<std::string, std::vector<size_t>> by_digits;
    for (size_t i : members) {
      const auto at = layer_digits(named[i].name);
      by_digits[at ? named[i].name.substr(0, at->first) + std::string(at->second - at->first, '?') + named[i].name.substr(at->second) : std::string()]
          .push_back(i);
    }
    for (const auto& [digits, some] : by_digits)
      if (by_digits.size() == members.size() || !one_rule(digits, some))
        for (size_t i : some)
          rules.push_back({named[i].id, {PlanSelector{named[i].name, "", std::nullopt, std::nullopt}, partition[i].first, partition[i].second}});
  }
  std::stable_sort(rules.begin(), rules.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [id, rule] : rules) plan.rules.push_back(std::move(rule));
  return plan;
}

UserPlan::Pipeline pipeline_of_strategy(const Graph& g, std::span<const MachineView> views, int64_t devices, const PipelineShape& shape) {
  UserPlan::Pipeline p;
  p.stages = shape.stages, p.micro_batches = shape.micro_batches, p.virtual_stages = shape.virtual_stages;
  if (shape.schedule != PipelineShape::default_for(shape.virtual_stages) || !shape.programs.empty())
    p.schedule = shape.schedule, p.programs = shape.programs;
  if (shape.stages <= 1) return p;
  p.interlaced = shape.interlaced;
  // Each chunk's last named compute operator ends it (the runtime's and
  // the simulator's chunks: pcg/pipeline_chunks.h).
  const std::vector<int64_t> chunk = pipeline_chunks(g, views, devices, shape);
  const Node* last = nullptr;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || n.name.empty() || static_cast<size_t>(n.id) >= views.size()) continue;
    if (views[static_cast<size_t>(n.id)].start < 0) continue;
    if (last && chunk[static_cast<size_t>(n.id)] != chunk[static_cast<size_t>(last->id)]) p.boundaries.push_back(last->name);
    last = &n;
  }
  const int64_t chunks = shape.chunks();
  if (static_cast<int64_t>(p.boundaries.size()) != chunks - 1)
    throw Error("the strategy's named operators change stage " + std::to_string(p.boundaries.size()) + " times, where " +
                std::to_string(chunks) + " chunks change it " + std::to_string(chunks - 1) + " times");
  return p;
}

}  // namespace pcgx::search
