// Chrome trace-event JSON of a simulation (see trace.h).
#include "pcgx/search/trace.h"

#include <nlohmann/json.hpp>

namespace pcgx::search {
namespace {

enum Track : int { kDevices = 1, kLinks = 2, kChannels = 3 };

std::string task_name(const Simulator& s, TaskId t) {
  const SimTaskInfo& k = s.info(t);
  if (k.kind == SimKind::kSync) return "bucket " + std::to_string(k.index);
  if (k.kind == SimKind::kUpdate || k.kind == SimKind::kOverhead) return to_string(k.kind);
  const Node& n = s.graph().node(k.node);
  return (n.name.empty() ? "node " + std::to_string(n.id) : n.name) + " (" + n.op->name + ") " + to_string(k.kind);
}

}  // namespace

std::string simulation_trace_json(const Simulator& s) {
  nlohmann::json events = nlohmann::json::array();
  const int64_t devices = s.devices();
  auto track_of = [&](ResourceId r) {
    const std::string name = s.resource_name(r);
    if (r < devices) return kDevices;
    return name.rfind("sync channel", 0) == 0 ? kChannels : kLinks;
  };
  for (auto [pid, name] : {std::pair{kDevices, "devices"}, std::pair{kLinks, "links"}, std::pair{kChannels, "sync channels"}})
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
  for (ResourceId r = 0; r < s.timeline().resources(); ++r) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", track_of(r)}, {"tid", r}, {"args", {{"name", s.resource_name(r)}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", track_of(r)}, {"tid", r}, {"args", {{"sort_index", r}}}});
  }
  for (size_t i = 0; i < s.timeline().size(); ++i) {
    const auto t = static_cast<TaskId>(i);
    const TimedTask& x = s.timeline().task(t);
    if (x.duration <= 0) continue;
    const SimTaskInfo& k = s.info(t);
    nlohmann::json args = {{"task", i}, {"kind", to_string(k.kind)}, {"index", k.index}};
    if (k.node >= 0) args["node"] = k.node;
    if (k.device >= 0) args["device"] = k.device;
    const std::string name = task_name(s, t);
    for (ResourceId r : x.resources)
      events.push_back({{"ph", "X"}, {"name", name}, {"cat", to_string(k.kind)}, {"pid", track_of(r)}, {"tid", r},
                        {"ts", x.start * 1e6}, {"dur", x.duration * 1e6}, {"args", args}});
  }
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return doc.dump() + "\n";
}

}  // namespace pcgx::search
