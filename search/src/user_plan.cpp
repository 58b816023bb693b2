// Plans a person writes (see user_plan.h): the file, the selectors, and
// the lowering onto baselines.h's parallelize.
#include "pcgx/search/user_plan.h"

#include "pcgx/pcg/source_layout.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>

#include "pcgx/pcg/degree_inference.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_chunks.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/graph_json_value.h"
#include "pcgx/pcg/registry.h"

namespace pcgx::search {
namespace {

using nlohmann::json;

void only_fields(const json& j, const std::string& source, const std::string& where, std::initializer_list<const char*> known) {
  for (const auto& [key, v] : j.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (ok) continue;
    std::string list;
    for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    throw FileError(source, where + key, "unknown field (" + list + ")");
  }
}

int64_t whole(const json& v, const std::string& source, const std::string& field, int64_t least) {
  if (!v.is_number_integer() || v.get<int64_t>() < least)
    throw FileError(source, field, "expected a whole number of at least " + std::to_string(least));
  return v.get<int64_t>();
}

PlanSelector read_selector(const json& j, const std::string& source, const std::string& field) {
  if (!j.is_object()) throw FileError(source, field, "expected an object (name, op, layers, weights)");
  only_fields(j, source, field + ".", {"name", "op", "layers", "weights"});
  PlanSelector s;
  if (j.contains("name")) {
    if (!j["name"].is_string() || j["name"].get<std::string>().empty()) throw FileError(source, field + ".name", "expected a non-empty name pattern");
    s.name = j["name"].get<std::string>();
  }
  if (j.contains("op")) {
    if (!j["op"].is_string()) throw FileError(source, field + ".op", "expected an operator name");
    s.op = j["op"].get<std::string>();
    const OpDef* def = OpRegistry::global().find(s.op);
    if (!def || def->op_class != OpClass::kCompute) throw FileError(source, field + ".op", "'" + s.op + "' is not a compute operator (pcgx ops lists them)");
  }
  if (j.contains("layers")) {
    const json& l = j["layers"];
    if (!l.is_array() || l.size() != 2) throw FileError(source, field + ".layers", "expected [first, last]");
    const int64_t a = whole(l[0], source, field + ".layers[0]", 0), b = whole(l[1], source, field + ".layers[1]", 0);
    if (b < a) throw FileError(source, field + ".layers", "the last layer " + std::to_string(b) + " comes before the first " + std::to_string(a));
    s.layers = std::make_pair(a, b);
  }
  if (j.contains("weights")) {
    if (!j["weights"].is_boolean())
      throw FileError(source, field + ".weights", "expected true (operators that read a weight) or false (those that read none)");
    s.weights = j["weights"].get<bool>();
  }
  return s;
}

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

UserPlan plan_from_json(const std::string& text, const std::string& source) {
  const json j = parse_json_document(text, source);
  if (!j.is_object()) throw FileError(source, "", "expected a JSON object");
  only_fields(j, source, "", {"format", "format_version", "description", "precision", "recompute", "recompute_layers", "recompute_operators", "zero",
                              "zero_persistence_threshold", "optimizer", "pipeline", "rewrites", "rules", "unstated"});
  if (!j.contains("format") || j["format"] != "pcgx.plan") throw FileError(source, "format", "expected \"pcgx.plan\"");
  if (!j.contains("format_version") || j["format_version"] != 1) throw FileError(source, "format_version", "expected 1");
  UserPlan plan;
  plan.source = source;
  if (j.contains("description")) {
    if (!j["description"].is_string()) throw FileError(source, "description", "expected a string");
    plan.description = j["description"].get<std::string>();
  }
  auto named = [&](const char* field, auto parse, const auto& choices) {
    const json& v = j[field];
    const std::string value_text = v.is_string() ? v.get<std::string>() : v.is_number_integer() ? std::to_string(v.get<int64_t>()) : std::string();
    const auto value = parse(value_text);
    if (!value) {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : ", ") + std::string(name(c));
      throw FileError(source, field, "expected one of " + list);
    }
    return *value;
  };
  if (j.contains("unstated")) {
    const json& v = j["unstated"];
    const std::string u = v.is_string() ? v.get<std::string>() : std::string();
    if (u != "one-task" && u != "search")
      throw FileError(source, "unstated", "expected \"one-task\" (each operator no rule selects runs as one task) or \"search\" (unity "
                                          "searches them, the stated operators fixed)");
    plan.unstated = u == "search" ? Unstated::kSearch : Unstated::kOneTask;
  }
  if (j.contains("precision")) plan.precision = named("precision", precision_named, kPrecisions);
  if (j.contains("recompute")) plan.recompute = named("recompute", recompute_named, kRecomputePolicies);
  if (j.contains("recompute_layers")) {
    const json& v = j["recompute_layers"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > INT32_MAX)
      throw FileError(source, "recompute_layers", "expected a positive integer, got " + v.dump());
    if (!plan.recompute || !recomputes_layers(*plan.recompute))
      throw FileError(source, "recompute_layers", "applies to full recomputation (\"recompute\": \"full\" or \"full+selective\")");
    plan.recompute_layers = v.get<int32_t>();
  }
  if (plan.recompute == Recompute::kFullSelective && !plan.recompute_layers)
    throw FileError(source, "recompute_layers", "required with \"recompute\": \"full+selective\" (how many layers re-run whole; every layer is full)");
  if (j.contains("recompute_operators")) {
    const json& v = j["recompute_operators"];
    if (!v.is_array() || v.empty() || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string() && !x.get<std::string>().empty(); }))
      throw FileError(source, "recompute_operators", "expected a list of operator names or name patterns ('*' any run, '?' one character), got " + v.dump());
    if (plan.recompute != Recompute::kOperators)
      throw FileError(source, "recompute_operators", "applies to \"recompute\": \"operators\"");
    plan.recompute_operators = v.get<std::vector<std::string>>();
  }
  if (plan.recompute == Recompute::kOperators && plan.recompute_operators.empty())
    throw FileError(source, "recompute_operators", "required with \"recompute\": \"operators\": the names (or name patterns) of the operators to recompute");
  if (j.contains("zero")) plan.zero = named("zero", zero_named, kZeroStages);
  if (j.contains("zero_persistence_threshold")) {
    const json& v = j["zero_persistence_threshold"];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      throw FileError(source, "zero_persistence_threshold", "expected a number of parameters (0 or more), got " + v.dump());
    if (plan.zero != ZeroStage::k3) throw FileError(source, "zero_persistence_threshold", "applies to ZeRO stage 3 (\"zero\": 3)");
    plan.zero_persistence_threshold = v.get<int64_t>();
  }
  if (j.contains("optimizer")) plan.optimizer = named("optimizer", optimizer_named, kOptimizerStates);
  if (j.contains("pipeline")) {
    const json& p = j["pipeline"];
    if (!p.is_object()) throw FileError(source, "pipeline", "expected an object (stages, micro_batches, virtual_stages, schedule, programs)");
    only_fields(p, source, "pipeline.", {"stages", "micro_batches", "virtual_stages", "schedule", "programs", "boundaries", "interlaced"});
    if (!p.contains("stages")) throw FileError(source, "pipeline.stages", "missing: how many stages the layers are split over");
    if (!p.contains("micro_batches")) throw FileError(source, "pipeline.micro_batches", "missing: how many micro-batches a step runs");
    UserPlan::Pipeline pp;
    pp.stages = whole(p["stages"], source, "pipeline.stages", 1);
    pp.micro_batches = whole(p["micro_batches"], source, "pipeline.micro_batches", 1);
    if (p.contains("virtual_stages")) pp.virtual_stages = whole(p["virtual_stages"], source, "pipeline.virtual_stages", 1);
    if (p.contains("interlaced")) {
      const json& x = p["interlaced"];
      if (!x.is_array() || x.empty())
        throw FileError(source, "pipeline.interlaced", "expected an array of chunk indices (0: the first chunk), each run by every stage together");
      for (size_t k = 0; k < x.size(); ++k) pp.interlaced.push_back(whole(x[k], source, "pipeline.interlaced[" + std::to_string(k) + "]", 0));
    }
    if (p.contains("schedule")) {
      const auto k = p["schedule"].is_string() ? pipeline_schedule_named(p["schedule"].get<std::string>()) : std::nullopt;
      if (!k || *k == PipelineSchedule::kExplicit)
        throw FileError(source, "pipeline.schedule", "expected gpipe, 1f1b or interleaved (an order of steps is written as \"programs\")");
      pp.schedule = *k;
    }
    if (p.contains("programs")) {
      if (pp.schedule) throw FileError(source, "pipeline.schedule", "\"programs\" state the order of steps; leave the schedule out");
      const json& progs = p["programs"];
      if (!progs.is_array() || progs.empty())
        throw FileError(source, "pipeline.programs", "expected an array of strings, each stage's order of steps (e.g. \"F0 F1 B0 F2 B1 B2\")");
      std::string lines;
      for (size_t k = 0; k < progs.size(); ++k) {  // one stage each, on one line
        const std::string steps = progs[k].is_string() ? progs[k].get<std::string>() : std::string();
        if (steps.find_first_not_of(" \t") == std::string::npos || steps.find('\n') != std::string::npos || steps.find('#') != std::string::npos)
          throw FileError(source, "pipeline.programs[" + std::to_string(k) + "]", "expected one stage's steps on one line, e.g. \"F0 F1 B0 F2 B1 B2\"");
        lines += steps + "\n";
      }
      try {
        pp.programs = parse_pipeline_programs(lines, "");
      } catch (const Error& e) {
        // "line N: why" names the stage's entry, N - 1.
        const std::string what = e.what();
        const size_t at = what.find("line ");
        const size_t colon = at == std::string::npos ? std::string::npos : what.find(": ", at);
        if (colon == std::string::npos) throw FileError(source, "pipeline.programs", what);
        const std::string field = "pipeline.programs[" + std::to_string(std::stoll(what.substr(at + 5, colon - at - 5)) - 1) + "]";
        throw FileError(source, field, what.substr(colon + 2));
      }
      pp.schedule = PipelineSchedule::kExplicit;
    }
    // A schedule that cannot run: its counts, its interlaced chunks (under
    // the schedule named, gpipe for a written order), then its written
    // steps (the wrong steps, or a deadlock, its cycle printed).
    const PipelineShape shape{pp.stages, pp.micro_batches, pp.virtual_stages,
                              pp.schedule.value_or(PipelineShape::default_for(pp.virtual_stages)), pp.programs, pp.interlaced};
    PipelineShape counts = shape;
    counts.programs.clear();
    if (counts.schedule == PipelineSchedule::kExplicit) counts.schedule = PipelineSchedule::kGPipe;
    for (const auto& [what, field] : {std::pair{0, "pipeline"}, std::pair{1, "pipeline.interlaced"}, std::pair{2, "pipeline.programs"}}) {
      PipelineShape x = what == 2 ? shape : counts;
      if (what == 0) x.interlaced.clear();
      try {
        check(x);
      } catch (const Error& e) {
        throw FileError(source, what == 2 && pp.programs.empty() ? "pipeline" : field, e.what());
      }
    }
    if (p.contains("boundaries")) {
      const json& b = p["boundaries"];
      const auto chunks = static_cast<size_t>(pp.stages * pp.virtual_stages) + pp.interlaced.size();
      if (!b.is_array() || !std::all_of(b.begin(), b.end(), [](const json& x) { return x.is_string() && !x.get<std::string>().empty(); }))
        throw FileError(source, "pipeline.boundaries", "expected an array of operator names, the last operator of each chunk but the last");
      if (b.size() + 1 != chunks)
        throw FileError(source, "pipeline.boundaries", std::to_string(b.size()) + " names for " + std::to_string(chunks) +
                                                           " chunks (stages x virtual stages" + (pp.interlaced.empty() ? "" : " + interlaced") +
                                                           "): one per chunk but the last");
      for (const json& x : b) pp.boundaries.push_back(x.get<std::string>());
    }
    plan.pipeline = pp;
  }
  if (j.contains("rewrites")) {
    if (!j["rewrites"].is_array()) throw FileError(source, "rewrites", "expected an array of {\"rule\": ID, \"at\": [operator names]}");
    for (size_t i = 0; i < j["rewrites"].size(); ++i) {
      const json& w = j["rewrites"][i];
      const std::string field = "rewrites[" + std::to_string(i) + "]";
      if (!w.is_object()) throw FileError(source, field, "expected an object (rule, at)");
      only_fields(w, source, field + ".", {"rule", "at"});
      if (!w.contains("rule") || !w["rule"].is_string()) throw FileError(source, field + ".rule", "expected a rule id (a string)");
      if (!w.contains("at") || !w["at"].is_array() || w["at"].empty() ||
          !std::all_of(w["at"].begin(), w["at"].end(), [](const json& x) { return x.is_string(); }))
        throw FileError(source, field + ".at", "expected a non-empty array of operator names, one per compute operator of the rule's source");
      plan.rewrites.push_back({w["rule"].get<std::string>(), w["at"].get<std::vector<std::string>>(), nullptr});
    }
  }
  if (!j.contains("rules") || !j["rules"].is_array() || j["rules"].empty()) throw FileError(source, "rules", "expected a non-empty array of rules");
  for (size_t r = 0; r < j["rules"].size(); ++r) {
    const json& rule = j["rules"][r];
    const std::string field = "rules[" + std::to_string(r) + "]";
    if (!rule.is_object()) throw FileError(source, field, "expected an object (select, partition)");
    only_fields(rule, source, field + ".", {"select", "partition", "devices"});
    if (!rule.contains("select")) throw FileError(source, field + ".select", "missing: which operators the rule applies to");
    if (!rule.contains("partition")) throw FileError(source, field + ".partition", "missing: parallel kinds and their degrees ({} runs one task)");
    PlanRule pr;
    pr.select = read_selector(rule["select"], source, field + ".select");
    const json& p = rule["partition"];
    if (!p.is_object()) throw FileError(source, field + ".partition", "expected an object of parallel kinds and degrees, e.g. {\"samples\": 4}");
    for (const auto& [kind, degree] : p.items()) pr.partition[kind] = whole(degree, source, field + ".partition." + kind, 1);
    if (rule.contains("devices")) {
      const json& d = rule["devices"];
      if (!d.is_array() || d.empty()) throw FileError(source, field + ".devices", "expected a non-empty array of device numbers, one per task");
      for (size_t t = 0; t < d.size(); ++t) pr.devices.push_back(whole(d[t], source, field + ".devices[" + std::to_string(t) + "]", 0));
    }
    plan.rules.push_back(std::move(pr));
  }
  return plan;
}

UserPlan load_plan(const std::string& path) { return plan_from_json(read_text_file(path), path); }

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
      const ParallelKind* kind = nullptr;
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
        throw Error(where + " has no parallel kind '" + name + "' (its kinds: " + (list.empty() ? "none" : list) + ", or " + kSamplesKind + ")");
      }
      if (const auto [it, fresh] = named_as.emplace(kind->name, name); !fresh)
        throw Error(where + ": '" + it->second + "' and '" + name + "' both name its kind " + kind->name);
      if (degree == 1) continue;
      if (degree > devices && !placed)
        throw Error(where + ": " + name + " " + std::to_string(degree) + " is more than the " + std::to_string(devices) + " devices");
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
      resolved[kind->name] = degree;
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

std::set<std::string> stated_operators(const Graph& model, const UserPlan& plan, int64_t devices) {
  const Graph g = plan_graph(model, plan);
  std::vector<int> rule_of;
  plan_partitions(g, plan, devices, &rule_of, false);
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
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs) || n.name.empty()) continue;
    const TaskGrid grid = task_grid(g, n);
    const std::vector<ParallelKind> kinds = n.op->kinds ? n.op->kinds(n.attrs, g.input_types(n)) : std::vector<ParallelKind>{};
    const ParallelKind* samples = sample_kind(kinds);
    NodePlan p;
    for (size_t k = 0; k < grid.names.size(); ++k) {
      if (grid.extents[k] <= 1) continue;
      if (grid.names[k] == "slot")
        throw Error(pcgx::describe(n) + " runs " + std::to_string(grid.extents[k]) +
                    " replica slots of its own (every input replicated), which a plan cannot state");
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
  // split of some other dimension), so that a model's count of layers does
  // not decide it.
  std::map<Run, int> count;
  for (size_t i = 0; i < partition.size(); ++i)
    if (!named[i].part) ++count[partition[i]];
  const Run* common = &count.begin()->first;
  for (const auto& [p, c] : count)
    if (c > count[*common] || (c == count[*common] && p.first.size() < common->first.size())) common = &p;
  plan.rules.push_back({PlanSelector{}, common->first, common->second});
  // Then the rest, by layer pattern where every operator it selects runs alike.
  std::map<std::string, std::vector<size_t>> by_pattern;
  for (size_t i = 0; i < named.size(); ++i)
    if (partition[i] != *common) by_pattern[layer_pattern(named[i].name)].push_back(i);
  std::vector<std::pair<NodeId, PlanRule>> rules;  // by first operator, for graph order
  for (const auto& [pattern, members] : by_pattern) {
    bool alike = !pattern.empty();
    for (size_t i : members) alike = alike && partition[i] == partition[members.front()];
    if (alike) {  // and the pattern selects nothing else
      size_t selected = 0;
      for (const Named& n : named) selected += glob(pattern, n.name);
      alike = selected == members.size();
    }
    if (alike) {
      const Run& run = partition[members.front()];
      rules.push_back({named[members.front()].id, {PlanSelector{pattern, "", std::nullopt, std::nullopt}, run.first, run.second}});
      continue;
    }
    for (size_t i : members) rules.push_back({named[i].id, {PlanSelector{named[i].name, "", std::nullopt, std::nullopt}, partition[i].first, partition[i].second}});
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

std::string plan_to_json(const UserPlan& plan) {
  std::string out = "{\n  \"format\": \"pcgx.plan\",\n  \"format_version\": 1,\n";
  if (!plan.description.empty()) out += "  \"description\": " + json(plan.description).dump() + ",\n";
  if (plan.unstated == Unstated::kSearch) out += "  \"unstated\": \"search\",\n";
  if (plan.precision) out += "  \"precision\": \"" + std::string(name(*plan.precision)) + "\",\n";
  if (plan.recompute) out += "  \"recompute\": \"" + std::string(name(*plan.recompute)) + "\",\n";
  if (plan.recompute_layers) out += "  \"recompute_layers\": " + std::to_string(*plan.recompute_layers) + ",\n";
  if (!plan.recompute_operators.empty()) out += "  \"recompute_operators\": " + json(plan.recompute_operators).dump() + ",\n";
  if (plan.zero) out += "  \"zero\": " + std::string(name(*plan.zero)) + ",\n";
  if (plan.zero_persistence_threshold) out += "  \"zero_persistence_threshold\": " + std::to_string(*plan.zero_persistence_threshold) + ",\n";
  if (plan.optimizer) out += "  \"optimizer\": \"" + std::string(name(*plan.optimizer)) + "\",\n";
  if (const auto& p = plan.pipeline) {
    json pj = json::object();
    pj["stages"] = p->stages, pj["micro_batches"] = p->micro_batches;
    if (p->virtual_stages > 1) pj["virtual_stages"] = p->virtual_stages;
    if (!p->interlaced.empty()) pj["interlaced"] = p->interlaced;
    if (p->schedule && p->programs.empty()) pj["schedule"] = name(*p->schedule);
    if (!p->programs.empty()) {
      json programs = json::array();
      const std::string text = format_pipeline_programs(p->programs);
      for (size_t at = 0, end; at < text.size(); at = end + 1) {
        end = text.find('\n', at);
        programs.push_back(text.substr(at, end - at));
      }
      pj["programs"] = programs;
    }
    if (!p->boundaries.empty()) pj["boundaries"] = p->boundaries;
    out += "  \"pipeline\": " + pj.dump() + ",\n";
  }
  for (size_t i = 0; i < plan.rewrites.size(); ++i)
    out += std::string(i ? "" : "  \"rewrites\": [\n") + "    " + json{{"rule", plan.rewrites[i].rule}, {"at", plan.rewrites[i].at}}.dump() +
           (i + 1 < plan.rewrites.size() ? ",\n" : "\n  ],\n");
  out += "  \"rules\": [\n";
  for (size_t r = 0; r < plan.rules.size(); ++r) {
    const PlanRule& rule = plan.rules[r];
    json select = json::object();
    if (!rule.select.name.empty()) select["name"] = rule.select.name;
    if (!rule.select.op.empty()) select["op"] = rule.select.op;
    if (rule.select.layers) select["layers"] = {rule.select.layers->first, rule.select.layers->second};
    if (rule.select.weights) select["weights"] = *rule.select.weights;
    json partition = json::object();
    for (const auto& [kind, degree] : rule.partition) partition[kind] = degree;
    const std::string devices = rule.devices.empty() ? std::string() : ", \"devices\": " + json(rule.devices).dump();
    out += "    {\"select\": " + select.dump() + ", \"partition\": " + partition.dump() + devices + "}" + (r + 1 < plan.rules.size() ? "," : "") + "\n";
  }
  return out + "  ]\n}\n";
}

}  // namespace pcgx::search
