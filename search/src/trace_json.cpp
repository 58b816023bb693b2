// Chrome trace-event JSON of a simulation (see trace.h).
#include "pcgx/search/trace.h"

#include "pcgx/pcg/chrome_trace.h"

namespace pcgx::search {
namespace {

enum Track : int { kDevices = 1, kLinks = 2, kChannels = 3 };

}  // namespace

std::string simulation_trace_json(const Simulator& s) {
  ChromeTrace trace;
  const int64_t devices = s.devices();
  auto track_of = [&](ResourceId r) {
    if (r < devices) return kDevices;
    const std::string name = s.resource_name(r);
    return name.rfind("sync channel", 0) == 0 || name.rfind("gather channel", 0) == 0 ? kChannels : kLinks;
  };
  trace.process(kDevices, "devices");
  trace.process(kLinks, "links");
  trace.process(kChannels, "sync channels");
  for (ResourceId r = 0; r < s.timeline().resources(); ++r) trace.track(track_of(r), r, s.resource_name(r));
  for (size_t i = 0; i < s.timeline().size(); ++i) {
    const auto t = static_cast<TaskId>(i);
    const TimedTask& x = s.timeline().task(t);
    if (x.duration <= 0) continue;
    const SimTaskInfo& k = s.info(t);
    ChromeTrace::Args args = {{"task", static_cast<int64_t>(i)}, {"index", k.index}};
    if (k.node >= 0) args.emplace_back("node", k.node);
    if (k.device >= 0) args.emplace_back("device", k.device);
    if (k.chunk >= 0) args.emplace_back("chunk", k.chunk);
    if (k.micro_batch >= 0) args.emplace_back("micro_batch", k.micro_batch);
    const std::string name = s.label(t);
    // A task holding links in the background spans its wait for them.
    const double span = x.background.empty() ? x.duration : x.end - x.start;
    for (ResourceId r : x.resources) trace.event(track_of(r), r, name, std::string(to_string(k.kind)), x.start, span, args);
  }
  return trace.json();
}

}  // namespace pcgx::search
