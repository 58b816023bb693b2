// Strategy files and drawings (see strategy_json.h).
#include "pcgx/search/strategy_json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/graph_json_value.h"
#include "pcgx/pcg/named_choice.h"
#include "pcgx/pcg/placement.h"

namespace pcgx::search {

using nlohmann::json;

std::string strategy_to_json(const StrategyFile& s) {
  json j;
  j["format_version"] = 1;
  j["kind"] = "pcgx.strategy";
  j["model"] = s.model;
  j["machine"] = json::parse(machine_to_json(s.machine));
  j["devices"] = s.devices;
  j["search"] = s.search;
  j["precision"] = name(s.recipe.precision);
  j["recompute"] = name(s.recipe.recompute);
  if (s.recipe.recompute_layers != kAllLayers) j["recompute_layers"] = s.recipe.recompute_layers;
  if (!s.recipe.recompute_operators.empty()) j["recompute_operators"] = s.recipe.recompute_operators;
  j["zero"] = static_cast<int>(s.recipe.zero);
  if (s.recipe.zero_persistence_threshold > 0) j["zero_persistence_threshold"] = s.recipe.zero_persistence_threshold;
  for (const WeightZero& w : s.recipe.zero_weights)
    if (w.stage != s.recipe.zero) j["zero_weights"][w.weight] = static_cast<int>(w.stage);
  j["optimizer"] = name(s.recipe.optimizer);
  if (s.recipe.attention != AttentionKernel::kEager) j["attention"] = name(s.recipe.attention);
  if (s.recipe.cross_entropy != CrossEntropyKernel::kFused) j["cross_entropy"] = name(s.recipe.cross_entropy);
  if (s.recipe.dropout_add != DropoutAddKernel::kEager) j["dropout_add"] = name(s.recipe.dropout_add);
  if (s.recipe.overlap_grad_input) j["overlap_grad_input"] = true;
  if (s.recipe.overlap_param_gather) j["overlap_param_gather"] = true;
  if (!s.recipe.overlap_grad_reduce) j["overlap_grad_reduce"] = false;
  if (zero1_all_reduces(s.recipe)) j["reduce_scatter"] = false;  // (where it applies)
  if (s.recipe.grad_precision != GradPrecision::kFp32) j["grad_precision"] = name(s.recipe.grad_precision);
  const Estimate& e = s.strategy.estimate;
  j["predicted"] = {{"time", e.time},       {"compute", e.compute}, {"overhead", e.overhead}, {"update", e.update}, {"communication", e.communication},
                    {"sync", e.sync},       {"sync_hidden", e.sync_hidden}, {"buckets", e.buckets}, {"gather", e.gather}, {"bytes", e.bytes},
                    {"idle", e.idle},       {"devices_used", e.devices_used}, {"max_memory", e.max_memory()}};
  if (e.gathered_for_use > 0) j["predicted"]["gathered_for_use"] = e.gathered_for_use;
  j["applied"] = s.applied;
  j["graph"] = graph_to_value(s.strategy.graph);
  json views = json::array();
  for (const Node& n : s.strategy.graph.nodes()) {
    const MachineView v = s.strategy.views.at(static_cast<size_t>(n.id));
    if (n.op->op_class == OpClass::kSource || v.start < 0) continue;
    json view = {{"node", n.id}, {"start", v.start}};
    if (v.strides.empty()) view["stride"] = v.stride;
    else view["strides"] = v.strides;
    views.push_back(view);
  }
  j["views"] = views;
  if (s.pipeline_stages > 0) {
    j["pipeline"] = {{"stages", s.pipeline_stages}, {"micro_batches", s.micro_batches}, {"bubble", e.bubble}};
    if (s.virtual_stages > 1) j["pipeline"]["virtual_stages"] = s.virtual_stages;
    if (!s.interlaced.empty()) j["pipeline"]["interlaced"] = s.interlaced;
    j["pipeline"]["schedule"] = name(s.schedule);
    if (s.schedule == PipelineSchedule::kExplicit) {
      json programs = json::array();
      const std::string text = format_pipeline_programs(s.programs);
      for (size_t at = 0; at < text.size();) {
        const size_t end = text.find('\n', at);
        programs.push_back(text.substr(at, end - at));
        at = end + 1;
      }
      j["pipeline"]["programs"] = programs;
    }
    if (!s.chunks.empty()) {
      json chunks = json::array();
      for (const PipelineStage& c : s.chunks) {
        json k = {{"stage", c.stage}, {"forward", c.forward}, {"backward", c.backward}, {"crossing", c.crossing}, {"update", c.update}};
        if (!c.param_gathers.empty()) {
          k["gathers"] = json::array();
          for (const ParamGather& g : c.param_gathers) k["gathers"].push_back({{"seconds", g.seconds}, {"needed", g.needed}, {"devices", g.devices}});
        }
        chunks.push_back(k);
      }
      j["pipeline"]["chunks"] = chunks;
    }
  }
  return j.dump(1) + "\n";
}

namespace {
StrategyFile strategy_from_value(const json& j, const std::string& source);

// A kernel choice (attention, cross-entropy) by name; anything else names the field and the choices.
template <class E, std::size_t N>
E kernel_choice(const json& v, const std::string& source, const std::string& field, const E (&choices)[N]) {
  const std::optional<E> k = v.is_string() ? choice_named(v.get<std::string>(), choices) : std::nullopt;
  if (k) return *k;
  std::string names;
  for (const E c : choices) names += std::string(names.empty() ? "" : ", ") + name(c);
  throw FileError(source, field, "expected one of " + names + ", got " + v.dump());
}

// pipeline.chunks: one object per chunk of `shape`, times not negative;
// micro_batch derived (pipeline_timing.h), the whole checked by pricing it.
std::vector<PipelineStage> chunks_from_value(const json& a, const PipelineShape& shape, const std::string& source) {
  const std::string field = "pipeline.chunks";
  if (!a.is_array()) throw FileError(source, field, "expected one object per chunk");
  auto seconds = [&](const json& o, const char* key, const std::string& at) {
    if (!o.contains(key) || !o[key].is_number() || !(o[key].get<double>() >= 0) || !std::isfinite(o[key].get<double>()))
      throw FileError(source, at + "." + key, "expected seconds (a number, not negative)");
    return o[key].get<double>();
  };
  std::vector<PipelineStage> out;
  for (size_t i = 0; i < a.size(); ++i) {
    const json& o = a[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!o.is_object()) throw FileError(source, at, "expected an object");
    PipelineStage c;
    if (!o.contains("stage") || !o["stage"].is_number_integer()) throw FileError(source, at + ".stage", "expected an integer");
    c.stage = o["stage"].get<int64_t>();
    c.forward = seconds(o, "forward", at), c.backward = seconds(o, "backward", at);
    c.crossing = seconds(o, "crossing", at), c.update = seconds(o, "update", at);
    if (o.contains("gathers")) {
      if (!o["gathers"].is_array()) throw FileError(source, at + ".gathers", "expected an array of gathers");
      for (size_t k = 0; k < o["gathers"].size(); ++k) {
        const json& g = o["gathers"][k];
        const std::string gat = at + ".gathers[" + std::to_string(k) + "]";
        if (!g.is_object()) throw FileError(source, gat, "expected an object");
        ParamGather pg;
        pg.seconds = seconds(g, "seconds", gat), pg.needed = seconds(g, "needed", gat);
        if (!g.contains("devices") || !g["devices"].is_array()) throw FileError(source, gat + ".devices", "expected an array of devices");
        for (const json& d : g["devices"]) {
          if (!d.is_number_integer() || d.get<int64_t>() < 0) throw FileError(source, gat + ".devices", "expected an array of devices");
          pg.devices.push_back(d.get<int64_t>());
        }
        c.param_gathers.push_back(std::move(pg));
      }
    }
    out.push_back(std::move(c));
  }
  for (size_t i = 0; i < out.size(); ++i)
    out[i].micro_batch = out[i].forward + out[i].backward + (i > 0 ? 2 * out[i - 1].crossing : 0.0);
  try {
    scheduled_time(shape, out, false);
  } catch (const Error& e) {
    throw FileError(source, field, e.what());
  }
  return out;
}
}  // namespace

StrategyFile strategy_from_json(const std::string& text, const std::string& source) {
  const json j = parse_json_document(text, source);
  try {
    return strategy_from_value(j, source);
  } catch (const json::exception& e) {  // a field of another JSON type than it should be
    throw FileError(source, "", json_message(e));
  }
}

namespace {
StrategyFile strategy_from_value(const json& j, const std::string& source) {
  if (!j.is_object() || j.value("kind", "") != "pcgx.strategy") throw FileError(source, "kind", "expected \"pcgx.strategy\"");
  if (j.value("format_version", 0) != 1) throw FileError(source, "format_version", "expected 1");
  StrategyFile s;
  if (!j.contains("model") || !j["model"].is_string()) throw FileError(source, "model", "expected a string");
  s.model = j["model"].get<std::string>();
  if (!j.contains("machine")) throw FileError(source, "machine", "missing");
  s.machine = machine_from_json(j["machine"].dump(), source + ": machine");
  if (!j.contains("devices") || !j["devices"].is_number_integer() || j["devices"].get<int64_t>() < 1)
    throw FileError(source, "devices", "expected a positive integer");
  s.devices = j["devices"].get<int64_t>();
  if (s.devices > s.machine.num_devices())
    throw FileError(source, "devices", std::to_string(s.devices) + " exceeds the machine's " + std::to_string(s.machine.num_devices()));
  s.search = j.value("search", "");
  if (j.contains("precision")) {
    const std::optional<Precision> p = j["precision"].is_string() ? precision_named(j["precision"].get<std::string>()) : std::nullopt;
    if (!p) throw FileError(source, "precision", "expected one of fp32, tf32, bf16, fp16, got " + j["precision"].dump());
    s.recipe.precision = *p;
  }
  if (j.contains("recompute")) {
    const std::optional<Recompute> r = j["recompute"].is_string() ? recompute_named(j["recompute"].get<std::string>()) : std::nullopt;
    if (!r) throw FileError(source, "recompute", "expected one of none, gathers, selective, full, full+selective, full+gathers, operators, got " + j["recompute"].dump());
    s.recipe.recompute = *r;
  }
  if (j.contains("recompute_layers")) {
    if (!j["recompute_layers"].is_number_integer() || j["recompute_layers"].get<int64_t>() < 1 ||
        j["recompute_layers"].get<int64_t>() > INT32_MAX)
      throw FileError(source, "recompute_layers", "expected a positive integer, got " + j["recompute_layers"].dump());
    if (!recomputes_layers(s.recipe.recompute))
      throw FileError(source, "recompute_layers", std::string("applies to full recomputation, not ") + name(s.recipe.recompute));
    s.recipe.recompute_layers = j["recompute_layers"].get<int32_t>();
  }
  if (s.recipe.recompute == Recompute::kFullSelective && !j.contains("recompute_layers"))
    throw FileError(source, "recompute_layers", kFullSelectiveNeedsLayers);
  if (j.contains("recompute_operators")) {
    const json& v = j["recompute_operators"];
    if (!v.is_array() || v.empty() || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string() && !x.get<std::string>().empty(); }))
      throw FileError(source, "recompute_operators", "expected a list of operator names, got " + v.dump());
    if (s.recipe.recompute != Recompute::kOperators)
      throw FileError(source, "recompute_operators", std::string("applies to recompute operators, not ") + name(s.recipe.recompute));
    std::vector<std::string> names = v.get<std::vector<std::string>>();
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    s.recipe.recompute_operators = std::move(names);
  }
  if (s.recipe.recompute == Recompute::kOperators && s.recipe.recompute_operators.empty())
    throw FileError(source, "recompute_operators", kOperatorsNeedNames);
  if (j.contains("zero")) {
    const std::optional<ZeroStage> z = j["zero"].is_number_integer() ? zero_named(j["zero"].dump()) : std::nullopt;
    if (!z) throw FileError(source, "zero", "expected one of 0, 1, 2, 3, got " + j["zero"].dump());
    s.recipe.zero = *z;
  }
  if (j.contains("zero_persistence_threshold")) {
    const json& t = j["zero_persistence_threshold"];
    if (!t.is_number_integer() || t.get<int64_t>() < 0)
      throw FileError(source, "zero_persistence_threshold", "expected a non-negative integer (parameters), got " + t.dump());
    s.recipe.zero_persistence_threshold = t.get<int64_t>();
  }
  if (j.contains("zero_weights")) {  // checked against the graph's weights below
    const json& v = j["zero_weights"];
    if (!v.is_object()) throw FileError(source, "zero_weights", "expected an object of weight names to ZeRO stages, got " + v.dump());
    for (const auto& [weight, stage] : v.items()) {
      const std::optional<ZeroStage> z = stage.is_number_integer() ? zero_named(stage.dump()) : std::nullopt;
      if (!z) throw FileError(source, "zero_weights." + weight, "expected one of 0, 1, 2, 3, got " + stage.dump());
      s.recipe.zero_weights.push_back({weight, *z});  // (an object's keys come sorted, each once)
    }
    if (const auto why = zero_weights_problem(s.recipe.zero, s.recipe.zero_weights)) throw FileError(source, "zero_weights", *why);
  }
  if (j.contains("zero_persistence_threshold") && !shards_weights(highest_zero(s.recipe)))
    throw FileError(source, "zero_persistence_threshold", std::string("applies to ZeRO stage 3, not ") + name(s.recipe.zero));
  // Absent: eager attention, a fused cross-entropy and an eager
  // dropout-add, as every strategy before them was priced.
  if (j.contains("attention")) s.recipe.attention = kernel_choice(j["attention"], source, "attention", kAttentionKernels);
  if (j.contains("cross_entropy")) s.recipe.cross_entropy = kernel_choice(j["cross_entropy"], source, "cross_entropy", kCrossEntropyKernels);
  if (j.contains("dropout_add")) s.recipe.dropout_add = kernel_choice(j["dropout_add"], source, "dropout_add", kDropoutAddKernels);
  // Absent: FP32 gradients, as every strategy before it was priced.
  if (j.contains("grad_precision")) s.recipe.grad_precision = kernel_choice(j["grad_precision"], source, "grad_precision", kGradPrecisions);
  // Absent: as every strategy before them was priced (overlaps of input
  // gradients and gathers off, gradient buckets beside the backward pass,
  // ZeRO 1 reduce-scattering).
  auto flag = [&](const char* key, bool& into) {
    if (!j.contains(key)) return;
    if (!j[key].is_boolean()) throw FileError(source, key, "expected true or false, got " + j[key].dump());
    into = j[key].get<bool>();
  };
  flag("overlap_grad_input", s.recipe.overlap_grad_input);
  flag("overlap_param_gather", s.recipe.overlap_param_gather);
  flag("overlap_grad_reduce", s.recipe.overlap_grad_reduce);
  flag("reduce_scatter", s.recipe.reduce_scatter);
  if (j.contains("optimizer")) {  // absent in strategies written before it: Adam, as they were priced
    const std::optional<OptimizerState> o = j["optimizer"].is_string() ? optimizer_named(j["optimizer"].get<std::string>()) : std::nullopt;
    if (!o) throw FileError(source, "optimizer", "expected one of sgd, momentum, adam, got " + j["optimizer"].dump());
    s.recipe.optimizer = *o;
  }
  if (j.contains("applied") && j["applied"].is_array())
    for (const json& a : j["applied"])
      if (a.is_string()) s.applied.push_back(a.get<std::string>());
  if (!j.contains("graph")) throw FileError(source, "graph", "missing");
  s.strategy.graph = graph_from_value(j["graph"], source, "graph");
  for (const WeightZero& w : s.recipe.zero_weights)
    if (std::none_of(s.strategy.graph.nodes().begin(), s.strategy.graph.nodes().end(), [&](const Node& n) { return n.op->is_weight && n.name == w.weight; }))
      throw FileError(source, "zero_weights." + w.weight, "the graph has no weight of that name");
  s.strategy.views.assign(s.strategy.graph.size(), MachineView{});
  if (!j.contains("views") || !j["views"].is_array()) throw FileError(source, "views", "expected an array");
  std::vector<std::string> view_field(s.strategy.graph.size());
  for (size_t i = 0; i < j["views"].size(); ++i) {
    const json& v = j["views"][i];
    const std::string f = "views[" + std::to_string(i) + "]";
    if (!v.is_object() || !v.contains("node") || !v["node"].is_number_integer()) throw FileError(source, f + ".node", "expected a node id");
    const int64_t node = v["node"].get<int64_t>();
    if (node < 0 || node >= static_cast<int64_t>(s.strategy.graph.size())) throw FileError(source, f + ".node", "no such node");
    if ((v.contains("start") && !v["start"].is_number_integer()) || (v.contains("stride") && !v["stride"].is_number_integer()))
      throw FileError(source, f, "start and stride must be integers");
    const int64_t start = v.value("start", int64_t{-1}), stride = v.value("stride", int64_t{1});
    if (start < 0 || start >= s.devices || stride < 1 || stride > s.devices)
      throw FileError(source, f, "start must lie in [0, devices) and stride in [1, devices]");
    MachineView view{start, stride, {}};
    if (v.contains("strides")) {
      if (!v["strides"].is_array()) throw FileError(source, f + ".strides", "expected a list of non-negative integers");
      for (const json& x : v["strides"]) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= s.devices)
          throw FileError(source, f + ".strides", "expected a list of non-negative integers below the device count");
        view.strides.push_back(x.get<int64_t>());
      }
    }
    s.strategy.views[static_cast<size_t>(node)] = view;
    view_field[static_cast<size_t>(node)] = f;
  }
  // Every task on one of the strategy's devices: found here, a wrong view
  // names its field rather than failing in the runtime.
  const Placement place(s.strategy.graph, s.strategy.views, s.devices);
  for (const Node& n : s.strategy.graph.nodes()) {
    const MachineView& v = s.strategy.views[static_cast<size_t>(n.id)];
    if (!v.placed() || n.op->op_class == OpClass::kSource || n.op->is_shard_level(n.attrs)) continue;
    const int64_t last = v.last_device(place.tasks(n.id).grid.extents);
    if (last >= s.devices)
      throw FileError(source, view_field[static_cast<size_t>(n.id)],
                      "node " + std::to_string(n.id) + "'s tasks reach device " + std::to_string(last) + ", beyond the " +
                          std::to_string(s.devices) + " devices");
  }
  if (j.contains("predicted") && j["predicted"].is_object()) {
    const json& p = j["predicted"];
    Estimate& e = s.strategy.estimate;
    e.feasible = true;
    e.time = p.value("time", 0.0), e.compute = p.value("compute", 0.0);
    e.communication = p.value("communication", 0.0), e.idle = p.value("idle", 0.0), e.overhead = p.value("overhead", 0.0);
    e.update = p.value("update", 0.0);
    e.sync = p.value("sync", 0.0), e.sync_hidden = p.value("sync_hidden", 0.0), e.buckets = p.value("buckets", int64_t{0});
    e.gather = p.value("gather", 0.0), e.gathered_for_use = p.value("gathered_for_use", int64_t{0});
    e.bytes = p.value("bytes", 0.0), e.devices_used = p.value("devices_used", int64_t{0});
  }
  if (j.contains("pipeline")) {
    const json& p = j["pipeline"];
    auto count = [&](const char* key) {
      if (!p.is_object() || !p.contains(key) || !p[key].is_number_integer() || p[key].get<int64_t>() < 1)
        throw FileError(source, std::string("pipeline.") + key, "expected a positive integer");
      return p[key].get<int64_t>();
    };
    s.pipeline_stages = count("stages"), s.micro_batches = count("micro_batches");
    if (p.contains("virtual_stages")) s.virtual_stages = count("virtual_stages");
    if (p.contains("interlaced")) {
      if (!p["interlaced"].is_array()) throw FileError(source, "pipeline.interlaced", "expected an array of chunk indices");
      for (const json& c : p["interlaced"]) {
        if (!c.is_number_integer()) throw FileError(source, "pipeline.interlaced", "expected an array of chunk indices");
        s.interlaced.push_back(c.get<int64_t>());
      }
    }
    s.schedule = PipelineShape::default_for(s.virtual_stages);
    if (p.contains("schedule")) {
      std::string choices;
      for (PipelineSchedule k : kPipelineSchedules) choices += std::string(choices.empty() ? "" : ", ") + name(k);
      const bool explicit_order = p["schedule"] == "explicit";
      const auto k = p["schedule"].is_string() ? pipeline_schedule_named(p["schedule"].get<std::string>()) : std::nullopt;
      if (!k && !explicit_order) throw FileError(source, "pipeline.schedule", "expected one of " + choices + " or explicit");
      s.schedule = k ? *k : PipelineSchedule::kExplicit;
    }
    if (s.schedule == PipelineSchedule::kExplicit) {
      if (!p.contains("programs") || !p["programs"].is_array()) throw FileError(source, "pipeline.programs", "expected one string of steps per stage");
      std::string text;
      for (const json& line : p["programs"]) {
        if (!line.is_string()) throw FileError(source, "pipeline.programs", "expected one string of steps per stage");
        text += line.get<std::string>() + "\n";
      }
      try {
        s.programs = parse_pipeline_programs(text, "programs");
      } catch (const Error& e) {
        throw FileError(source, "pipeline.programs", e.what());
      }
    }
    try {
      check(*pipeline_shape(s));
    } catch (const Error& e) {
      throw FileError(source, "pipeline", e.what());
    }
    s.strategy.estimate.bubble = p.value("bubble", 0.0);
    if (p.contains("chunks")) s.chunks = chunks_from_value(p["chunks"], *pipeline_shape(s), source);
  }
  return s;
}
}  // namespace

std::optional<PipelineShape> pipeline_shape(const StrategyFile& s) {
  if (s.pipeline_stages <= 0) return std::nullopt;
  return PipelineShape{s.pipeline_stages, s.micro_batches, s.virtual_stages, s.schedule, s.programs, s.interlaced};
}

StrategyFile load_strategy(const std::string& path) { return strategy_from_json(read_text_file(path), path); }
void save_strategy(const StrategyFile& s, const std::string& path) { write_text_file_atomic(path, strategy_to_json(s)); }

std::string strategy_to_dot(const Strategy& s) {
  std::ostringstream o;
  o << "digraph pcg {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n";
  const Graph& g = s.graph;
  for (const Node& n : g.nodes()) {
    std::string label = n.op->name;
    if (!n.name.empty()) label = n.name + "\\n" + label;
    if (!n.outputs.empty()) label += "\\n" + n.outputs[0].to_string();
    const MachineView v = n.id < static_cast<NodeId>(s.views.size()) ? s.views[static_cast<size_t>(n.id)] : MachineView{};
    if (n.op->op_class == OpClass::kCompute && v.start >= 0)
      label += "\\n" + std::to_string(n.outputs[0].num_shards()) + " tasks @ device " + std::to_string(v.start);
    std::string style;
    if (n.op->op_class == OpClass::kParallel) style = ", style=filled, fillcolor=\"#ffb347\", shape=ellipse";
    else if (n.op->op_class == OpClass::kSource) style = ", style=filled, fillcolor=\"#e8e8e8\"";
    std::string esc;
    for (char c : label) esc += c == '"' ? std::string("\\\"") : std::string(1, c);
    o << "  n" << n.id << " [label=\"" << esc << "\"" << style << "];\n";
  }
  for (const Node& n : g.nodes())
    for (const TensorRef& i : n.inputs) o << "  n" << i.node << " -> n" << n.id << ";\n";
  o << "}\n";
  return o.str();
}

}  // namespace pcgx::search
