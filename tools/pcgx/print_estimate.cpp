#include "print_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli_common.h"
#include "pcgx/search/gradient_sync.h"

namespace pcgx::cli {

std::string ms(double seconds) {
  if (std::isinf(seconds)) return "infeasible";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f ms", seconds * 1e3);
  return b;
}

void print_terms(std::ostream& out, const search::Estimate& e, const search::CostModel* cost) {
  const ZeroStage zero = cost ? highest_zero(cost->recipe()) : ZeroStage::k0;
  const bool beside_forward = cost && search::gathers_beside_forward(*cost);
  out << "  compute             " << ms(e.compute);
  if (e.overhead > 0) out << " (" << ms(e.overhead) << " of it running the nodes: calibrated overhead)";
  out << "\n"
      << "  communication       " << ms(e.communication) << " exposed\n"
      << "  gradient sync       " << ms(e.sync) << " in " << e.buckets << " bucket" << (e.buckets == 1 ? "" : "s") << ", ";
  // (ZeRO 3's reduce-scatters run beside the backward pass whatever the recipe says.)
  if (cost && !search::buckets_beside_backward(*cost) && e.gathered_for_use == 0)
    out << "after the backward pass, exposed" << (cost->machine().device.overlaps_communication ? " (--no-overlap-grad-reduce)" : "") << "\n";
  else
    out << ms(e.sync_hidden) << " hidden behind the backward pass\n";
  if (e.gather > 0)
    out << "  weight gather       " << ms(e.gather)
        << (beside_forward && e.gathered_for_use == 0 ? " beside the forward pass (ZeRO): what the forward pass waits for them\n"
                                                      : " after the update (ZeRO), exposed\n");
  out << "  idle (mean/device)  " << ms(e.idle) << (e.devices_used > 0 ? ", " + std::to_string(e.devices_used) + " devices compute" : std::string()) << "\n"
      << between_devices_line(e.bytes, zero);
}

std::string between_devices_line(double bytes, ZeroStage zero) {
  return "  between devices     " + human_bytes(bytes) + " per step" +
         (shards_optimizer(zero) ? " (ZeRO's collectives as the cost model counts them; pcgx run predicts them bucket by bucket, padding included, and measures them)" : "") +
         "\n";
}

namespace {

// "device 3", "devices 0..7", "devices 0..7, 16..23"; past four ranges
// "devices 0, 8, 16, 24, ... (384 devices)".
std::string device_ranges(const std::vector<int64_t>& devices) {
  std::string out = devices.size() == 1 ? "device " : "devices ";
  size_t ranges = 0;
  for (size_t i = 0; i < devices.size(); ++ranges) {
    if (ranges == 4) return out + ", ... (" + std::to_string(devices.size()) + " devices)";
    size_t j = i;
    while (j + 1 < devices.size() && devices[j + 1] == devices[j] + 1) ++j;
    out += (i ? ", " : "") + std::to_string(devices[i]) + (j > i ? ".." + std::to_string(devices[j]) : "");
    i = j + 1;
  }
  return out;
}

}  // namespace

void print_memory_breakdown(std::ostream& out, const std::vector<search::DeviceMemory>& memory, const std::string& indent, size_t most) {
  struct Group {
    std::string text;
    double total = 0;  // the most any of its devices keeps
    std::vector<int64_t> devices;
  };
  std::vector<Group> groups;
  for (size_t d = 0; d < memory.size(); ++d) {
    const search::DeviceMemory& m = memory[d];
    const std::string text = "weights " + human_bytes(m.weights) + ", master " + human_bytes(m.master) + ", gradients " +
                             human_bytes(m.gradients) + ", optimizer " + human_bytes(m.optimizer) + ", activations " +
                             human_bytes(m.activations) + ", transient " + human_bytes(m.transient) +
                             (m.update_copies > 0 ? ", the update's FP32 gradients " + human_bytes(m.update_copies) : std::string());
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.text == text; });
    if (g == groups.end()) g = groups.insert(groups.end(), Group{text, 0, {}});
    g->total = std::max(g->total, m.total());
    g->devices.push_back(static_cast<int64_t>(d));
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.total > b.total; });
  for (size_t i = 0; i < groups.size() && i < most; ++i) {
    const std::string where = device_ranges(groups[i].devices);
    out << indent << where << std::string(where.size() + indent.size() < 22 ? 22 - where.size() - indent.size() : 1, ' ')
        << human_bytes(groups[i].total) << ": " << groups[i].text << "\n";
  }
  if (groups.size() > most) {
    size_t devices = 0;
    for (size_t i = most; i < groups.size(); ++i) devices += groups[i].devices.size();
    const size_t more = groups.size() - most;
    out << indent << "... " << more << " more breakdown" << (more == 1 ? "" : "s") << " on " << devices << " device" << (devices == 1 ? "" : "s")
        << ", each at most " << human_bytes(groups[most].total) << "\n";
  }
}

void print_profile_coverage(std::ostream& out, const search::CostModel& cost, const Graph& g) {
  if (cost.profile().entries.empty()) return;
  const auto [covered, total] = cost.profile_coverage(g);
  out << "profile               times " << covered << " of " << total << " compute operators";
  if (covered < total) out << "; " << total - covered << " fell back to the roofline";
  out << "\n";
}

}  // namespace pcgx::cli
