// A plan's file (see user_plan.h): read, every field checked and named
// in its errors, and written back as plan show writes it.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/graph_json_value.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/search/pipeline_layout.h"
#include "pcgx/search/user_plan.h"

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

}  // namespace

UserPlan plan_from_json(const std::string& text, const std::string& source) {
  const json j = parse_json_document(text, source);
  if (!j.is_object()) throw FileError(source, "", "expected a JSON object");
  only_fields(j, source, "", {"format", "format_version", "description", "precision", "recompute", "recompute_layers", "recompute_operators", "zero",
                              "zero_persistence_threshold", "zero_weights", "optimizer", "attention", "cross_entropy", "dropout_add", "overlap_grad_input", "overlap_param_gather", "overlap_grad_reduce", "grad_precision", "reduce_scatter", "pipeline", "rewrites", "rules", "unstated"});
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
      throw FileError(source, "recompute_layers", "applies to full recomputation (\"recompute\": \"full\", \"full+selective\" or \"full+gathers\")");
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
  if (j.contains("zero_weights")) {  // names or patterns (resolved on the model: zero_weight_stages)
    const json& v = j["zero_weights"];
    if (!v.is_object() || v.empty())
      throw FileError(source, "zero_weights", "expected an object of weight names or name patterns to ZeRO stages, e.g. {\"block*.mlp.*\": 3}, got " + v.dump());
    for (const auto& [weight, stage] : v.items()) {
      const std::optional<ZeroStage> z = stage.is_number_integer() ? zero_named(stage.dump()) : std::nullopt;
      if (weight.empty()) throw FileError(source, "zero_weights", "expected weight names or name patterns, got an empty one");
      if (!z) throw FileError(source, "zero_weights." + weight, "expected one of 0, 1, 2, 3, got " + stage.dump());
      plan.zero_weights.push_back({weight, *z});
    }
    if (plan.zero)
      if (const auto why = zero_weights_problem(*plan.zero, plan.zero_weights)) throw FileError(source, "zero_weights", *why);
  }
  if (j.contains("zero_persistence_threshold")) {
    const json& v = j["zero_persistence_threshold"];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      throw FileError(source, "zero_persistence_threshold", "expected a number of parameters (0 or more), got " + v.dump());
    if (!plan.zero || !shards_weights(highest_zero(*plan.zero, plan.zero_weights)))
      throw FileError(source, "zero_persistence_threshold", "applies to ZeRO stage 3 (\"zero\": 3, or a weight at 3 in \"zero_weights\")");
    plan.zero_persistence_threshold = v.get<int64_t>();
  }
  if (j.contains("optimizer")) plan.optimizer = named("optimizer", optimizer_named, kOptimizerStates);
  if (j.contains("attention")) plan.attention = named("attention", attention_named, kAttentionKernels);
  if (j.contains("cross_entropy")) plan.cross_entropy = named("cross_entropy", cross_entropy_named, kCrossEntropyKernels);
  if (j.contains("dropout_add")) plan.dropout_add = named("dropout_add", dropout_add_named, kDropoutAddKernels);
  if (j.contains("grad_precision")) plan.grad_precision = named("grad_precision", grad_precision_named, kGradPrecisions);
  auto flag = [&](const char* key, std::optional<bool>& into) {
    if (!j.contains(key)) return;
    if (!j[key].is_boolean()) throw FileError(source, key, "expected true or false, got " + j[key].dump());
    into = j[key].get<bool>();
  };
  flag("overlap_grad_input", plan.overlap_grad_input);
  flag("overlap_param_gather", plan.overlap_param_gather);
  flag("overlap_grad_reduce", plan.overlap_grad_reduce);
  flag("reduce_scatter", plan.reduce_scatter);
  // (Where the plan leaves the stage to the command, its weights' stages
  // must still allow 1.)
  if (plan.reduce_scatter == false && highest_zero(plan.zero.value_or(ZeroStage::k1), plan.zero_weights) != ZeroStage::k1)
    throw FileError(source, "reduce_scatter", "false applies to ZeRO stage 1 (\"zero\": 1, no weight at 2 or 3 in \"zero_weights\")");
  if (j.contains("pipeline")) {
    const json& p = j["pipeline"];
    if (!p.is_object()) throw FileError(source, "pipeline", "expected an object (stages, micro_batches, virtual_stages, schedule, programs)");
    only_fields(p, source, "pipeline.", {"stages", "micro_batches", "virtual_stages", "schedule", "programs", "boundaries", "interlaced", "layout"});
    if (!p.contains("stages")) throw FileError(source, "pipeline.stages", "missing: how many stages the layers are split over");
    if (!p.contains("micro_batches")) throw FileError(source, "pipeline.micro_batches", "missing: how many micro-batches a step runs");
    UserPlan::Pipeline pp;
    pp.stages = whole(p["stages"], source, "pipeline.stages", 1);
    pp.micro_batches = whole(p["micro_batches"], source, "pipeline.micro_batches", 1);
    if (p.contains("virtual_stages")) pp.virtual_stages = whole(p["virtual_stages"], source, "pipeline.virtual_stages", 1);
    if (p.contains("layout")) {  // Megatron-LM's layout string (pipeline_layout.h)
      if (!p["layout"].is_string())
        throw FileError(source, "pipeline.layout", "expected Megatron-LM's layout string, e.g. \"Et*3|(t*4|)*30,t*3L\"");
      if (p.contains("boundaries")) throw FileError(source, "pipeline.layout", "give the layout or the boundaries, not both");
      try {
        pp.layout = parse_pipeline_layout(p["layout"].get<std::string>());
      } catch (const FieldError& e) {
        throw FileError(source, "pipeline.layout", e.reason());
      }
      // As Megatron-LM: the layout's chunks beyond the stages are virtual stages.
      const auto chunks = static_cast<int64_t>(pp.layout.size());
      if (!p.contains("virtual_stages") && pp.stages > 1 && chunks % pp.stages == 0) pp.virtual_stages = chunks / pp.stages;
      if (chunks != pp.stages * pp.virtual_stages)
        throw FileError(source, "pipeline.layout", "the layout has " + std::to_string(chunks) + " chunks, and " + std::to_string(pp.stages) +
                                                       " stages x " + std::to_string(pp.virtual_stages) + " virtual stages are " +
                                                       std::to_string(pp.stages * pp.virtual_stages));
    }
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
  if (!plan.zero_weights.empty()) {
    json zw = json::object();
    for (const WeightZero& w : plan.zero_weights) zw[w.weight] = std::stoi(name(w.stage));
    out += "  \"zero_weights\": " + zw.dump() + ",\n";
  }
  if (plan.optimizer) out += "  \"optimizer\": \"" + std::string(name(*plan.optimizer)) + "\",\n";
  if (plan.attention) out += "  \"attention\": \"" + std::string(name(*plan.attention)) + "\",\n";
  if (plan.cross_entropy) out += "  \"cross_entropy\": \"" + std::string(name(*plan.cross_entropy)) + "\",\n";
  if (plan.dropout_add) out += "  \"dropout_add\": \"" + std::string(name(*plan.dropout_add)) + "\",\n";
  if (plan.grad_precision) out += "  \"grad_precision\": \"" + std::string(name(*plan.grad_precision)) + "\",\n";
  if (plan.overlap_grad_input) out += std::string("  \"overlap_grad_input\": ") + (*plan.overlap_grad_input ? "true" : "false") + ",\n";
  if (plan.overlap_param_gather) out += std::string("  \"overlap_param_gather\": ") + (*plan.overlap_param_gather ? "true" : "false") + ",\n";
  if (plan.overlap_grad_reduce) out += std::string("  \"overlap_grad_reduce\": ") + (*plan.overlap_grad_reduce ? "true" : "false") + ",\n";
  if (plan.reduce_scatter) out += std::string("  \"reduce_scatter\": ") + (*plan.reduce_scatter ? "true" : "false") + ",\n";
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
