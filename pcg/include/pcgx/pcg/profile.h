#pragma once
// Measured costs of a machine (format "pcgx.profile"): written by `pcgx run
// --profile-out` and `pcgx calibrate`, read by the cost model (`pcgx
// optimize --profile`, `pcgx run --profile`).
//
//   { "format_version": 1, "kind": "pcgx.profile", "device": "...",
//     "entries": [ { "op": "Linear", "inputs": [[64, 1024], [1024, 1024]],
//                    "forward": 1.2e-4, "backward": 2.5e-4 } ],
//     "update": { "bytes_per_second": 2.1e9, "words": 5 },
//     "bucket_copy": { "bytes_per_second": 1.5e10 },
//     "links": [ { "name": "shared-memory", "latency": 8e-6, "bandwidth": 3e9,
//                  "residual": 0.12, "samples": 40 } ],
//     "overhead": { "node": 2.1e-6, "byte": 1e-11 },
//     "roofline": { "peak_flops": 1.4e10, "memory_bandwidth": 6e9 } }
//
// `entries`: one task's forward and backward time, keyed by the operator
// and that task's input shard shapes (all optional sections below):
// `update`: the optimizer's rate in parameter bytes per second on one
// device, and the FP32 words per parameter it streamed (optional). `bucket_copy`: gradient bytes per second a device copies into a
// gradient bucket and back (the all-reduce aside). `links`: latency and bandwidth fitted per link level of the
// machine (by name), with the fit's relative RMS residual. `overhead`: what
// running a PCG costs a step beyond its kernels and messages, per node
// (the runtime's bookkeeping, launch) and per byte of the tensors a device
// holds (zeroing values and gradients). `roofline`: device
// rates fitted to the measured kernels, for shapes without an entry.
// Errors name the file and the field.
#include <map>
#include <span>
#include <string>
#include <vector>

namespace pcgx {

struct ProfileEntry {
  std::string op;
  std::vector<std::vector<int64_t>> inputs;  // one task's input shard shapes
  double forward = 0, backward = 0;          // seconds per task
};

struct ProfileLink {
  std::string name;
  double latency = 0, bandwidth = 0;  // seconds, bytes per second
  double step_latency = 0;            // seconds per collective step (machine.h); 0: latency
  double residual = 0;                // relative RMS of the fit
  int64_t samples = 0;
};

struct Profile {
  std::string device;
  std::vector<ProfileEntry> entries;
  double update_bytes_per_second = 0;  // 0: not measured
  // The FP32 words per parameter the measured update streamed (its
  // optimizer's update_words), by which a plan scales it to its own
  // (update_stream_words: another optimizer, a mixed plan's compute copy);
  // 0: not recorded (the rate taken as it is).
  double update_words = 0;
  // Gradient bytes a device copies into a bucket and back per second (a
  // bucket's copies, the all-reduce aside); 0: not measured.
  double bucket_copy_bytes_per_second = 0;
  std::vector<ProfileLink> links;
  double node_overhead = 0;                     // seconds per node per step
  double byte_overhead = 0;                     // seconds per byte held per step
  double peak_flops = 0, memory_bandwidth = 0;  // 0: not fitted

  // Adds an entry; a later one with the same key replaces it.
  void add(ProfileEntry e);
  // The entry for an operator with these input shard shapes, or null.
  const ProfileEntry* find(const std::string& op, std::span<const std::vector<int64_t>> inputs) const;
  bool has_kernels() const { return !entries.empty(); }

 private:
  std::map<std::string, size_t> index_;
};

Profile profile_from_json(const std::string& text, const std::string& source);
Profile load_profile(const std::string& path);
std::string profile_to_json(const Profile& p);

}  // namespace pcgx
