// Per-node costs (see cost_model.h).
#include "pcgx/search/cost_model.h"

#include <algorithm>
#include <numeric>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pcgx/pcg/degree_inference.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx::search {
namespace {

using nlohmann::json;

double number(const json& v, const std::string& source, const std::string& field, bool positive) {
  if (!v.is_number()) throw FileError(source, field, "expected a number");
  const double x = v.get<double>();
  if (x < 0 || (positive && x <= 0)) throw FileError(source, field, positive ? "must be positive" : "must not be negative");
  return x;
}

json parse(const std::string& text, const std::string& source, const std::string& kind) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw FileError(source, "", std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) throw FileError(source, "", "expected a JSON object");
  if (!j.contains("kind") || j["kind"] != kind) throw FileError(source, "kind", "expected \"" + kind + "\"");
  if (!j.contains("format_version") || j["format_version"] != 1) throw FileError(source, "format_version", "expected 1");
  return j;
}

OpEfficiency read_efficiency(const json& v, const std::string& source, const std::string& field, OpEfficiency e) {
  if (!v.is_object()) throw FileError(source, field, "expected an object");
  for (const auto& [key, x] : v.items()) {
    if (key == "compute") e.compute = number(x, source, field + ".compute", true);
    else if (key == "memory") e.memory = number(x, source, field + ".memory", true);
    else if (key == "backward") e.backward = number(x, source, field + ".backward", false);
    else if (key == "view") {
      if (!x.is_boolean()) throw FileError(source, field + ".view", "expected true or false");
      e.view = x.get<bool>();
    } else {
      throw FileError(source, field + "." + key, "unknown field (compute, memory, backward, view)");
    }
  }
  return e;
}

// The micro-slices a shard is processed in (Pipeline), and one slice's shape.
int64_t slices(const ParallelTensorShape& s) {
  int64_t p = 1;
  for (const ParallelDim& d : s.dims) p *= d.pipeline;
  return p;
}

// Devices [lo, hi] of the group shard `first` of the partitioned side belongs
// to, for a Repartition/Combine along `dim` by `k` (the group is the k blocks
// i*k .. i*k+k-1 along dim with every other coordinate fixed).
std::pair<int64_t, int64_t> dim_group(const ParallelTensorShape& part, int dim, int64_t k, int64_t start) {
  std::vector<int64_t> block(static_cast<size_t>(part.rank()), 0);
  int64_t lo = INT64_MAX, hi = -1;
  for (int64_t j = 0; j < k; ++j) {
    block[static_cast<size_t>(dim)] = j;
    const int64_t d = start + part.shard_index(0, block);
    lo = std::min(lo, d), hi = std::max(hi, d);
  }
  return {lo, hi};
}

}  // namespace

double shard_bytes(const ParallelTensorShape& s) { return static_cast<double>(s.shard_elements() * byte_size(s.dtype)); }

const OpEfficiency& Efficiency::of(const std::string& op) const {
  auto it = ops.find(op);
  return it == ops.end() ? fallback : it->second;
}

Efficiency efficiency_from_json(const std::string& text, const std::string& source) {
  const json j = parse(text, source, "pcgx.efficiency");
  Efficiency e;
  if (j.contains("launch")) e.launch = number(j["launch"], source, "launch", false);
  if (j.contains("default")) e.fallback = read_efficiency(j["default"], source, "default", e.fallback);
  if (j.contains("ops")) {
    if (!j["ops"].is_object()) throw FileError(source, "ops", "expected an object");
    for (const auto& [name, v] : j["ops"].items())
      e.ops[name] = read_efficiency(v, source, "ops." + name, e.fallback);
  }
  return e;
}

Efficiency load_efficiency(const std::string& path) { return efficiency_from_json(read_text_file(path), path); }

std::string profile_key(const std::string& op, std::span<const std::vector<int64_t>> input_shapes) {
  std::string k = op;
  for (const auto& s : input_shapes) {
    k += '|';
    for (size_t i = 0; i < s.size(); ++i) k += (i ? "x" : "") + std::to_string(s[i]);
  }
  return k;
}

Profile profile_from_json(const std::string& text, const std::string& source) {
  const json j = parse(text, source, "pcgx.profile");
  Profile p;
  if (j.contains("device") && j["device"].is_string()) p.device = j["device"].get<std::string>();
  if (!j.contains("entries") || !j["entries"].is_array()) throw FileError(source, "entries", "expected an array");
  for (size_t i = 0; i < j["entries"].size(); ++i) {
    const json& e = j["entries"][i];
    const std::string f = "entries[" + std::to_string(i) + "]";
    if (!e.is_object() || !e.contains("op") || !e["op"].is_string()) throw FileError(source, f + ".op", "expected an operator name");
    if (!e.contains("inputs") || !e["inputs"].is_array()) throw FileError(source, f + ".inputs", "expected a list of shapes");
    std::vector<std::vector<int64_t>> shapes;
    for (const json& s : e["inputs"]) {
      if (!s.is_array()) throw FileError(source, f + ".inputs", "expected a list of shapes");
      std::vector<int64_t> shape;
      for (const json& x : s) {
        if (!x.is_number_integer() || x.get<int64_t>() <= 0) throw FileError(source, f + ".inputs", "sizes must be positive integers");
        shape.push_back(x.get<int64_t>());
      }
      shapes.push_back(std::move(shape));
    }
    if (!e.contains("forward")) throw FileError(source, f + ".forward", "missing");
    if (!e.contains("backward")) throw FileError(source, f + ".backward", "missing");
    p.times[profile_key(e["op"].get<std::string>(), shapes)] = {number(e["forward"], source, f + ".forward", false),
                                                                number(e["backward"], source, f + ".backward", false)};
  }
  if (j.contains("update")) {
    const json& u = j["update"];
    if (!u.is_object() || !u.contains("bytes_per_second")) throw FileError(source, "update.bytes_per_second", "missing");
    p.update_bytes_per_second = number(u["bytes_per_second"], source, "update.bytes_per_second", true);
  }
  return p;
}

Profile load_profile(const std::string& path) { return profile_from_json(read_text_file(path), path); }

CostModel::CostModel(Machine machine, Efficiency efficiency, Profile profile)
    : machine_(std::move(machine)), efficiency_(std::move(efficiency)), profile_(std::move(profile)) {}

Seconds CostModel::task_time(const Graph& g, const Node& n) const {
  // A pipelined task runs once per micro-slice, on slice shapes.
  std::vector<TensorType> in, out;
  std::vector<std::vector<int64_t>> in_shapes;
  int64_t p = 1;
  for (const TensorRef& t : n.inputs) {
    const ParallelTensorShape& s = g.shape(t);
    in_shapes.push_back(s.slice_shape());
    in.push_back({in_shapes.back(), s.dtype});
    p = std::max(p, slices(s));
  }
  for (const auto& s : n.outputs) out.push_back({s.slice_shape(), s.dtype}), p = std::max(p, slices(s));
  const double k = static_cast<double>(p);
  if (!profile_.empty()) {
    auto it = profile_.times.find(profile_key(n.op->name, in_shapes));
    if (it != profile_.times.end()) return {k * it->second.first, k * it->second.second};
  }
  const OpEfficiency& e = efficiency_.of(n.op->name);
  if (e.view) return {};
  const double flops = n.op->flops ? n.op->flops(n.attrs, in, out) : 0.0;
  const double bytes = memory_bytes(*n.op, n.attrs, in, out);
  const DeviceSpec& d = machine_.device;
  const double fwd = std::max(flops / (d.peak_flops * e.compute), bytes / (d.memory_bandwidth * e.memory)) + efficiency_.launch;
  return {k * fwd, k * fwd * e.backward};
}

Seconds CostModel::parallel_time(const Graph& g, const Node& n, int64_t start, bool weight_fed) const {
  const std::string& op = n.op->name;
  const ParallelTensorShape& in = g.shape(n.inputs.at(0));
  const ParallelTensorShape& out = n.outputs.at(0);
  if (op == "Pipeline" || op == "Batch") return {};
  // Pipelined data moves once per micro-slice: p messages of 1/p the bytes.
  const int64_t p = std::max(slices(in), slices(out));
  const Seconds one = parallel_slice_time(g, n, start, weight_fed, static_cast<double>(p));
  return {static_cast<double>(p) * one.forward, static_cast<double>(p) * one.backward};
}

Seconds CostModel::parallel_slice_time(const Graph& g, const Node& n, int64_t start, bool weight_fed, double p) const {
  const std::string& op = n.op->name;
  const ParallelTensorShape& in = g.shape(n.inputs.at(0));
  const ParallelTensorShape& out = n.outputs.at(0);
  const int64_t k = n.attrs.get_int("degree");
  if (op == "Repartition" || op == "Combine") {
    const bool split = op == "Repartition";
    const ParallelTensorShape& part = split ? out : in;
    const auto [lo, hi] = dim_group(part, static_cast<int>(n.attrs.get_int("dim")), k, start);
    const LinkCost c = group_link(machine_, std::min(lo, start), std::max(hi, start));
    const double whole = shard_bytes(split ? in : out) / p;  // the unsplit shard
    if (weight_fed) return {0.0, 0.0};
    return {scatter_time(k, whole, c), gather_time(k, whole, c)};
  }
  // Replica groups: slots c*k .. c*k+k-1 of the side with more slots.
  const ParallelTensorShape& many = (op == "Replicate") ? out : in;
  const int64_t blocks = many.num_blocks();
  const LinkCost c = group_link(machine_, start, start + (k - 1) * blocks);
  const double bytes = shard_bytes(in) / p;
  if (op == "Replicate") {
    if (weight_fed) return {0.0, allreduce_time(k, bytes, c)};
    return {broadcast_time(k, bytes, c), reduce_time(k, bytes, c)};
  }
  if (op == "Reduce") return {reduce_time(k, bytes, c), broadcast_time(k, bytes, c)};
  if (op == "AllReduce") return {allreduce_time(k, bytes, c), allreduce_time(k, bytes, c)};
  throw Error("cost model: unknown parallel operator " + op);
}

Seconds CostModel::input_transfer_time(const Graph& g, const Node& n, int64_t start) const {
  if (n.op->op_class != OpClass::kCompute) return {};
  std::vector<ParallelTensorShape> ins;
  for (const TensorRef& t : n.inputs) ins.push_back(g.shape(t));
  std::vector<TensorType> types;
  for (const auto& s : n.outputs) types.push_back({s.logical_shape(), s.dtype});
  if (n.op->is_shard_level(n.attrs)) return {};
  const DegreeInference di = infer_degrees(*n.op, n.attrs, ins, types);
  const auto& ext = di.grid.extents;
  const int64_t tasks = di.grid.num_tasks();
  if (tasks <= 1) return {};
  double worst = 0;
  std::vector<int64_t> coords(ext.size(), 0);
  for (int64_t t = 0; t < tasks; ++t) {
    int64_t rest = t;
    for (size_t d = ext.size(); d-- > 0;) coords[d] = rest % ext[d], rest /= ext[d];
    double mine = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      const int64_t s = shard_for_task(di.grid.inputs[i], ins[i], coords, ext);
      const double p = static_cast<double>(slices(ins[i]));
      if (s != t) mine += p * send_time(shard_bytes(ins[i]) / p, group_link(machine_, std::min(start + s, start + t), std::max(start + s, start + t)));
    }
    worst = std::max(worst, mine);
  }
  return {worst, worst};
}

double CostModel::move_time(const ParallelTensorShape& s, int64_t from, int64_t to) const {
  if (from == to) return 0.0;
  double worst = 0;
  const int64_t shards = s.num_shards();
  const double p = static_cast<double>(slices(s));
  const double bytes = shard_bytes(s) / p;
  // Shard i goes from device from + i to to + i. Which link a pair crosses
  // repeats with the period of the link spans (the lcm of the nonzero
  // ones), so one period of shards covers every case: 8 pairs instead of
  // 192 on a DGX machine (this loop was 60% of DLRM's search at 192 GPUs).
  int64_t period = 1;
  for (const LinkLevel& l : machine_.links)
    if (l.span > 0) period = std::lcm(period, l.span);
  for (int64_t i = 0; i < std::min(shards, period); ++i) {
    const int64_t a = from + i, b = to + i;
    if (a != b) worst = std::max(worst, p * send_time(bytes, group_link(machine_, std::min(a, b), std::max(a, b))));
  }
  return worst;
}

double CostModel::update_time(double bytes) const {
  if (bytes <= 0) return 0.0;
  if (profile_.update_bytes_per_second > 0) return bytes / profile_.update_bytes_per_second;
  return 7.0 * bytes / (machine_.device.memory_bandwidth * efficiency_.fallback.memory) + efficiency_.launch;
}

std::string data_dir() {
  if (const char* d = std::getenv("PCGX_DATA_DIR"); d && *d) return d;
  return PCGX_DEFAULT_DATA_DIR;
}

std::vector<std::string> machine_names() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/machines", ec))
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

Machine find_machine(const std::string& name_or_path) {
  std::error_code ec;
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json")) return load_machine(name_or_path);
  const std::string path = data_dir() + "/machines/" + name_or_path + ".json";
  if (std::filesystem::exists(path, ec)) return load_machine(path);
  std::string known;
  for (const auto& n : machine_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("--machine: unknown machine '" + name_or_path + "' (known: " + known + "; or a machine JSON file)");
}

Efficiency default_efficiency() { return load_efficiency(data_dir() + "/cost/efficiency.json"); }

}  // namespace pcgx::search
