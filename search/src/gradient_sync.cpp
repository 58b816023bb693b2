#include "pcgx/search/gradient_sync.h"

#include <algorithm>
#include <map>

namespace pcgx::search {

SyncTimeline replay_buckets(const CostModel& cost, std::vector<ReadyGradient> gradients, double backward, double bucket_bytes) {
  std::stable_sort(gradients.begin(), gradients.end(), [](const ReadyGradient& a, const ReadyGradient& b) { return a.ready < b.ready; });
  struct Open {
    double bytes = 0, ready = 0;
    GroupShape group;
  };
  // Buckets in the order they close: (ready, group, bytes).
  std::vector<Open> closed;
  std::map<uint64_t, Open> open;
  for (const ReadyGradient& g : gradients) {
    Open& b = open[g.sync.key];
    if (b.bytes == 0) b.group = g.sync.group;
    b.bytes += g.sync.bytes, b.ready = g.ready;
    if (b.bytes >= bucket_bytes) closed.push_back(b), b = Open{};
  }
  for (auto& [key, b] : open)
    if (b.bytes > 0) closed.push_back(b);
  std::stable_sort(closed.begin(), closed.end(), [](const Open& a, const Open& b) { return a.ready < b.ready; });
  SyncTimeline t;
  // A device that does its own communication starts once its backward
  // pass is done (machine.h): everything is exposed.
  double free = cost.machine().device.overlaps_communication ? 0 : backward;
  for (const Open& b : closed) {
    const double time = cost.bucket_time(b.group, b.bytes);
    free = std::max(free, b.ready) + time;
    t.total += time;
    t.gather += cost.weight_gather_time(b.group, b.bytes);
    ++t.buckets;
  }
  t.exposed = cost.machine().device.overlaps_communication ? std::min(t.total, std::max(0.0, free - backward)) : t.total;
  return t;
}

}  // namespace pcgx::search
