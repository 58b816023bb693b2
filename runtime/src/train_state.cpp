#include "pcgx/runtime/train_state.h"

#include <fstream>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/runtime/gather.h"
#include "pcgx/runtime/optimizer.h"

namespace pcgx::runtime {
namespace {

namespace fs = std::filesystem;

std::string shape_string(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

const char* moment_prefix(int kind) { return kind == 1 ? "m/" : "v/"; }

// The block offset of shard k of a parallel tensor.
std::vector<int64_t> offset_of(const ParallelTensorShape& s, int64_t k) {
  int64_t slot = 0;
  std::vector<int64_t> block;
  s.shard_coords(k, slot, block);
  return s.block_offset(block);
}

}  // namespace

TrainState gather_state(const ExecutionPlan& plan, std::span<const NodeId> weights, DeviceExecutor& ex,
                        std::span<const ParameterSlot> slots, Communicator& comm, int64_t step, OptimizerKind optimizer,
                        int64_t* bytes_sent) {
  const Graph& g = *plan.graph;
  TrainState st;
  st.step = step, st.optimizer = name(optimizer);
  const auto shards = ex.parameter_shards();
  auto slot_of = [&](TensorRef p, int64_t k) -> const ParameterSlot& {
    for (size_t i = 0; i < shards.size(); ++i)
      if (shards[i].first == p && shards[i].second == k) return slots[i];
    throw Error("gather_state: shard " + std::to_string(k) + " of a parameter is not this device's");
  };
  const int kinds = slots.empty() ? 1 : (slots.front().v ? 3 : 2);
  int64_t tag = kGatherTag;
  for (NodeId w : weights) {
    const TensorRef p = plan.parameter[static_cast<size_t>(w)];
    const std::string& name = g.node(w).name;
    st.weights[name] = gather_tensor(ex, p, comm, tag, bytes_sent, [&](int64_t k) { return ex.master(p, k); });
    for (int kind = 1; kind < kinds; ++kind)
      st.moments[moment_prefix(kind) + name] = gather_tensor(ex, p, comm, tag, bytes_sent, [&](int64_t k) {
        return kind == 1 ? slot_of(p, k).m : slot_of(p, k).v;
      });
  }
  if (comm.rank() != 0) st.weights.clear(), st.moments.clear();
  return st;
}

void check_weights(const NamedTensors& w, const Graph& g, std::span<const NodeId> weights, const std::string& source) {
  for (NodeId id : weights) {
    const Node& n = g.node(id);
    const auto it = w.find(n.name);
    if (it == w.end()) throw Error(source + ": no tensor '" + n.name + "' (weight " + describe(n) + ")");
    if (it->second.shape != n.outputs[0].logical_shape())
      throw Error(source + ": " + n.name + ": shape " + shape_string(it->second.shape) + ", the model's weight is " +
                  shape_string(n.outputs[0].logical_shape()));
  }
  if (w.size() != weights.size()) {
    std::vector<std::string> known;
    for (NodeId id : weights) known.push_back(g.node(id).name);
    for (const auto& [name, t] : w)
      if (std::find(known.begin(), known.end(), name) == known.end())
        throw Error(source + ": " + name + ": the model has no weight of that name");
  }
}

void check_state(const TrainState& s, const Graph& g, std::span<const NodeId> weights, OptimizerKind optimizer,
                 const std::string& source) {
  check_weights(s.weights, g, weights, source);
  if (s.optimizer != name(optimizer))
    throw Error(source + ": optimizer '" + s.optimizer + "' in the checkpoint, '" + name(optimizer) + "' asked for");
  const int kinds = optimizer == OptimizerKind::kAdam ? 2 : 1;
  for (NodeId id : weights)
    for (int kind = 1; kind <= kinds; ++kind) {
      const std::string name = moment_prefix(kind) + g.node(id).name;
      const auto it = s.moments.find(name);
      if (it == s.moments.end()) throw Error(source + ": no optimizer tensor '" + name + "'");
      if (it->second.shape != g.node(id).outputs[0].logical_shape()) throw Error(source + ": " + name + ": not the weight's shape");
    }
  if (s.moments.size() != weights.size() * static_cast<size_t>(kinds)) throw Error(source + ": optimizer tensors the model has no weight for");
}

void restore_state(const TrainState& s, const ExecutionPlan& plan, std::span<const NodeId> weights, DeviceExecutor& ex,
                   std::span<const ParameterSlot> slots) {
  const Graph& g = *plan.graph;
  for (NodeId w : weights) ex.set_source(w, s.weights.at(g.node(w).name));
  const auto shards = ex.parameter_shards();
  for (size_t i = 0; i < shards.size(); ++i) {
    const auto& [p, k] = shards[i];
    std::string name;
    for (NodeId w : weights)
      if (plan.parameter[static_cast<size_t>(w)] == p) name = g.node(w).name;
    const std::vector<int64_t> at = offset_of(g.shape(p), k);
    ex.backend().upload_block(s.moments.at("m/" + name), at, slots[i].m);
    if (slots[i].v) ex.backend().upload_block(s.moments.at("v/" + name), at, slots[i].v);
  }
}

void check_checkpoint_target(const std::string& dir) {
  const fs::path target(dir), partial = fs::path(dir + ".partial");
  std::error_code ec;
  if (fs::exists(target, ec) && !fs::is_directory(target, ec)) throw Error(dir + ": exists and is not a directory");
  if (fs::exists(target, ec) && !fs::exists(target / "state.json", ec) && !fs::is_empty(target, ec))
    throw Error(dir + ": exists and is not a checkpoint (no state.json): not replacing it");
  fs::remove_all(partial, ec);
  if (!fs::create_directories(partial, ec) && ec) throw Error(dir + ": cannot create " + partial.string() + " (" + ec.message() + ")");
  const bool writable = static_cast<bool>(std::ofstream(partial / "probe"));
  fs::remove_all(partial, ec);
  if (!writable) throw Error(dir + ": cannot write into " + partial.string());
  if (fs::exists(target, ec)) {  // it will be moved aside: its parent must let it
    const fs::path probe = fs::path(dir + ".probe");
    if (fs::exists(probe, ec)) throw Error(dir + ": " + probe.string() + " is in the way; remove it");
    fs::rename(target, probe, ec);
    if (ec) throw Error(dir + ": cannot move the previous checkpoint aside (" + ec.message() + ")");
    fs::rename(probe, target, ec);
    if (ec) throw Error(dir + ": moved to " + probe.string() + " while checking it can be replaced, and cannot be moved back (" + ec.message() + ")");
  }
}

void write_checkpoint(const std::string& dir, const TrainState& s, const std::string& model) {
  const fs::path target(dir), partial = fs::path(dir + ".partial"), old = fs::path(dir + ".old");
  std::error_code ec;
  fs::remove_all(partial, ec);
  if (!fs::create_directories(partial, ec) && ec) throw Error(dir + ": cannot create " + partial.string() + " (" + ec.message() + ")");
  // Whatever fails below leaves no partial directory behind.
  struct Cleanup {
    const fs::path& p;
    bool armed = true;
    ~Cleanup() {
      std::error_code e;
      if (armed) fs::remove_all(p, e);
    }
  } cleanup{partial};
  nlohmann::json state = {{"format", "pcgx.checkpoint"}, {"version", 1}, {"step", s.step}, {"optimizer", s.optimizer}, {"model", model}};
  if (s.updates >= 0 && s.updates != s.step) state["updates"] = s.updates;
  if (s.loss_scale > 0) state["loss_scale"] = s.loss_scale, state["growth_tracker"] = s.growth_tracker;
  write_text_file_atomic((partial / "weights.safetensors").string(), safetensors_bytes(s.weights, {{"format", "pt"}}));
  write_text_file_atomic((partial / "optimizer.safetensors").string(), safetensors_bytes(s.moments));
  write_text_file_atomic((partial / "state.json").string(), state.dump(2) + "\n");
  fs::remove_all(old, ec);
  if (fs::exists(target)) {
    if (!fs::exists(target / "state.json") && !fs::is_empty(target, ec))
      throw Error(dir + ": exists and is not a checkpoint (no state.json): not replacing it");
    fs::rename(target, old, ec);
    if (ec) throw Error(dir + ": cannot move the previous checkpoint aside (" + ec.message() + ")");
  }
  fs::rename(partial, target, ec);
  if (ec) {  // the previous checkpoint back where it was
    std::error_code back;
    if (fs::exists(old, back)) fs::rename(old, target, back);
    throw Error(dir + ": cannot put the checkpoint in place (" + ec.message() + ")");
  }
  cleanup.armed = false;
  fs::remove_all(old, ec);
}

TrainState read_checkpoint(const std::string& dir) {
  const fs::path d(dir);
  if (!fs::is_directory(d)) throw Error(dir + ": no such checkpoint directory");
  const std::string state_path = (d / "state.json").string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(state_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(state_path + ": not JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object() || j.value("format", "") != "pcgx.checkpoint") throw Error(state_path + ": format: not \"pcgx.checkpoint\"");
  if (!j.contains("version") || j["version"] != 1) throw Error(state_path + ": version: this pcgx reads version 1");
  if (!j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() < 0)
    throw Error(state_path + ": step: not a non-negative integer");
  if (!j.contains("optimizer") || !j["optimizer"].is_string()) throw Error(state_path + ": optimizer: missing");
  TrainState s;
  s.step = j["step"].get<int64_t>();
  s.optimizer = j["optimizer"].get<std::string>();
  // Written where loss scaling ran (train_state.h): optional.
  if (j.contains("updates")) {
    if (!j["updates"].is_number_integer() || j["updates"].get<int64_t>() < 0 || j["updates"].get<int64_t>() > s.step)
      throw Error(state_path + ": updates: not an integer from 0 to the step");
    s.updates = j["updates"].get<int64_t>();
  }
  if (j.contains("loss_scale")) {
    if (!j["loss_scale"].is_number() || !(j["loss_scale"].get<double>() > 0) || !std::isfinite(j["loss_scale"].get<double>()))
      throw Error(state_path + ": loss_scale: not a positive number");
    if (!j.contains("growth_tracker") || !j["growth_tracker"].is_number_integer() || j["growth_tracker"].get<int64_t>() < 0)
      throw Error(state_path + ": growth_tracker: not a non-negative integer");
    s.loss_scale = j["loss_scale"].get<float>(), s.growth_tracker = j["growth_tracker"].get<int64_t>();
  }
  s.weights = read_safetensors((d / "weights.safetensors").string());
  s.moments = read_safetensors((d / "optimizer.safetensors").string());
  return s;
}

}  // namespace pcgx::runtime
