#pragma once
// A machine description (docs/design.md, "Search"; data/machines/*.json):
// identical devices grouped into nodes, and a hierarchy of link levels.
// Level i connects devices whose ids agree when divided by its `span`; two
// devices talk over the first level whose group contains both. The last
// level spans the whole machine.
//
//   { "format_version": 1, "kind": "pcgx.machine", "name": "dgx-h100",
//     "nodes": 1, "devices_per_node": 8,
//     "device": { "name": "H100 SXM", "peak_flops": 4.947e14,
//                 "peak_flops_by_precision": { "fp32": 6.69e13, "tf32": 4.947e14,
//                                              "bf16": 9.894e14, "fp16": 9.894e14 },
//                 "memory_bandwidth": 3.35e12, "memory_capacity": 8.59e10,
//                 "overlaps_communication": true },
//     "links": [ { "name": "nvlink", "span": 8, "bandwidth": 4.5e11, "latency": 2e-6 },
//                { "name": "infiniband", "span": 0, "bandwidth": 5e10, "latency": 5e-6,
//                  "ports": 8 } ] }
//
// Units: FLOP/s, bytes/s, bytes, seconds. span 0 means the whole machine.
// `peak_flops` is the dense figure at pcgx's default precision (tf32,
// precision.h); `peak_flops_by_precision`, when given, the figure for each
// precision a plan may train in (a precision it leaves out cannot be
// priced on that machine: an error). Without it, `peak_flops` stands for
// every precision: a device that computes them all alike (pcgx's CPU
// kernels widen BF16/FP16 to FP32).
// `bandwidth` is one link's, per direction. `ports` (default 1) is how many
// such links each group of the level below has into this level (for the
// first level, each device): a DGX node has 8 InfiniBand adapters, so a
// collective whose members on a node are 8 GPUs crosses the network over 8
// links at once (collectives.h says how each collective uses them).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pcgx/pcg/precision.h"

namespace pcgx {

inline constexpr int kMachineFormatVersion = 1;

struct DeviceSpec {
  std::string name;
  double peak_flops = 0;        // FLOP/s at the default precision (tf32)
  double memory_bandwidth = 0;  // bytes/s
  double memory_capacity = 0;   // bytes
  // Whether the device computes while its gradient buckets are all-reduced
  // (JSON "overlaps_communication", default true). A GPU does: NCCL runs on
  // a stream of its own, as PyTorch DDP overlaps buckets with the backward
  // pass. A CPU core of pcgx's runtime does not: its one thread copies and
  // adds every message itself, after its backward pass (cpu-host).
  bool overlaps_communication = true;
  // FLOP/s per precision (index: Precision); 0 where the file gives none.
  // Last, so that positional initializers of the fields above still read.
  std::array<double, std::size(kPrecisions)> peak_flops_by_precision{};

  // The figure for `p`; throws FieldError (Machine.device.peak_flops_by_precision)
  // when the file lists precisions but not `p`.
  double peak(Precision p) const;
  bool has_precision_table() const;
};

struct LinkLevel {
  std::string name;
  int64_t span = 0;        // devices per group at this level; 0: all devices
  double bandwidth = 0;    // bytes/s per direction between two devices
  double latency = 0;      // seconds, one message
  int64_t ports = 1;       // links into this level per group of the level below
  // Seconds per step of a collective, where every member sends and receives
  // at once (0: `latency`). On a CPU's threads such a step costs about twice
  // a lone message (`pcgx calibrate` fits both); NCCL's tuning model has one
  // figure for both.
  double step_latency = 0;
  double collective_latency() const { return step_latency > 0 ? step_latency : latency; }
};

struct Machine {
  std::string name;
  std::string description;
  int64_t nodes = 1;
  int64_t devices_per_node = 1;
  DeviceSpec device;
  std::vector<LinkLevel> links;

  int64_t num_devices() const { return nodes * devices_per_node; }
  // The level two distinct devices communicate over.
  const LinkLevel& link_between(int64_t a, int64_t b) const;
  // The first `n` devices (whole nodes first), as a machine of its own.
  Machine with_devices(int64_t n) const;
};

std::string machine_to_json(const Machine& m);
Machine machine_from_json(const std::string& text, const std::string& source);
Machine load_machine(const std::string& path);

}  // namespace pcgx
