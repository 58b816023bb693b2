#pragma once
// The cost model (DESIGN.md, "Search"): how long one training iteration of
// each node of a PCG takes on a machine, and what it keeps in memory.
//
// Compute operators. All T tasks of an operator are alike; one task's
// forward time is a roofline over its local shards,
//     max(FLOPs / (peak_flops * e.compute), bytes / (memory_bandwidth * e.memory)) + launch,
// with FLOPs and bytes from the operator's registry entry evaluated at shard
// shapes, and per-operator efficiencies `e` kept in data/cost/efficiency.json
// (not in code). Backward = e.backward x forward (2 for GEMM-like operators:
// one GEMM for each input's gradient). A measured profile (`--profile`)
// replaces both times for the (operator, shard shapes) it lists.
//
// Parallel operators move data between the devices their shards sit on
// (collectives.h gives the formulas); forward and backward are duals:
//     Repartition  scatter / gather      Combine    gather / scatter
//     Replicate    broadcast / reduce    Reduce     reduce / broadcast
//     AllReduce    all-reduce / all-reduce           Pipeline, Batch: free
// Sources (Input, Weight) are materialized in the layout their first
// parallel operators ask for: a data loader reads its own shard, a weight
// shard lives where it is used. So parallel operators fed only by sources
// cost nothing forward, except that a *replicated weight* synchronizes its
// gradient: the backward of Replicate(k) on a weight is a ring all-reduce
// of the gradient (replicas then apply the same update), not a reduce.
//
// Placement: a node placed at device `start` keeps its shard (or task) i on
// device start + i. A task whose input shard sits on another device first
// receives it (send/recv over the link between the two).
//
// Pipelining (Pipeline/Batch, pipeline.h): a task whose shards are
// processed in p micro-slices runs p times on slice shapes (so p launches),
// and pipelined data moves as p messages of 1/p the bytes (p latencies).
//
// Memory per device: every weight shard it holds costs 4x its bytes (value,
// gradient, Adam's two moments), every output shard of a compute operator
// is kept for the backward pass. The optimizer update streams 7 words per
// parameter (read w, g, m, v; write w, m, v).
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine.h"
#include "pcgx/search/collectives.h"

namespace pcgx::search {

struct OpEfficiency {
  double compute = 0.5;   // fraction of peak FLOP/s
  double memory = 0.7;    // fraction of memory bandwidth
  double backward = 2.0;  // backward time / forward time
  bool view = false;      // no data movement at all (Reshape of a contiguous shard)
};

struct Efficiency {
  double launch = 5e-6;  // seconds per kernel
  OpEfficiency fallback;
  std::map<std::string, OpEfficiency> ops;
  const OpEfficiency& of(const std::string& op) const;
};

// data/cost/efficiency.json format (see that file); errors name the file and field.
Efficiency efficiency_from_json(const std::string& text, const std::string& source);
Efficiency load_efficiency(const std::string& path);

// Measured task times ("pcgx.profile"):
//   { "format_version": 1, "kind": "pcgx.profile", "device": "...",
//     "entries": [ { "op": "Linear", "inputs": [[64, 1024], [1024, 1024]],
//                    "forward": 1.2e-4, "backward": 2.5e-4 } ],
//     "update": { "bytes_per_second": 2.1e9 } }
// `inputs` are one task's input shard shapes; `update` (optional) is the
// optimizer's measured rate in parameter bytes per second on one device.
struct Profile {
  std::string device;
  std::map<std::string, std::pair<double, double>> times;  // profile_key -> (forward, backward)
  double update_bytes_per_second = 0;                       // 0: not measured
  bool empty() const { return times.empty(); }
};
std::string profile_key(const std::string& op, std::span<const std::vector<int64_t>> input_shapes);
Profile profile_from_json(const std::string& text, const std::string& source);
Profile load_profile(const std::string& path);

// Bytes of one shard of a tensor.
double shard_bytes(const ParallelTensorShape& s);

struct Seconds {
  double forward = 0;
  double backward = 0;
  double total() const { return forward + backward; }
};

class CostModel {
 public:
  CostModel(Machine machine, Efficiency efficiency, Profile profile = {});

  const Machine& machine() const { return machine_; }
  int64_t devices() const { return machine_.num_devices(); }

  // One task of compute node `n`.
  Seconds task_time(const Graph& g, const Node& n) const;
  // Parallel node `n` with its shards (input and output) on start + index.
  // `weight_fed`: its input is a weight seen through parallel operators only.
  Seconds parallel_time(const Graph& g, const Node& n, int64_t start, bool weight_fed) const;
  // Receiving the input shards compute node `n`'s tasks need, when the
  // inputs' shards and its tasks both start at `start` (the slowest task;
  // forward receive, backward send back the gradient).
  Seconds input_transfer_time(const Graph& g, const Node& n, int64_t start) const;
  // Moving a tensor's shards from start `from` to start `to`.
  double move_time(const ParallelTensorShape& s, int64_t from, int64_t to) const;
  // The optimizer update of `bytes` of parameters on one device.
  double update_time(double bytes) const;

  // The same model on the first n devices of the machine.
  CostModel with_devices(int64_t n) const { return CostModel(machine_.with_devices(n), efficiency_, profile_); }

 private:
  Seconds parallel_slice_time(const Graph& g, const Node& n, int64_t start, bool weight_fed, double p) const;

  Machine machine_;
  Efficiency efficiency_;
  Profile profile_;
};

// Where data/ lives: $PCGX_DATA_DIR, else the source tree's data/ (compiled in).
std::string data_dir();
// A machine by name (data/machines/NAME.json) or path; throws pcgx::Error
// listing the known machines.
Machine find_machine(const std::string& name_or_path);
std::vector<std::string> machine_names();
// The default efficiency table (data/cost/efficiency.json).
Efficiency default_efficiency();

}  // namespace pcgx::search
