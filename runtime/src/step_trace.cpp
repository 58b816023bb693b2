#include "pcgx/runtime/step_trace.h"

#include <algorithm>

#include "pcgx/pcg/chrome_trace.h"

namespace pcgx::runtime {

const char* to_string(StepEventKind k) {
  switch (k) {
    case StepEventKind::kForward: return "forward";
    case StepEventKind::kBackward: return "backward";
    case StepEventKind::kSend: return "send";
    case StepEventKind::kRecv: return "recv";
    case StepEventKind::kCollective: return "collective";
    case StepEventKind::kGradientSync: return "gradient sync";
    case StepEventKind::kUpdate: return "update";
    case StepEventKind::kWeightGather: return "weight gather";
  }
  return "?";
}

double StepTrace::seconds() const {
  double end = 0;
  for (const auto& d : devices)
    for (const StepEvent& e : d) end = std::max(end, e.end);
  return end;
}

void StepRecorder::start(Clock::time_point origin, size_t reserve) {
  events_.clear();
  events_.reserve(reserve);
  origin_ = origin;
  on_ = true, depth_ = 0, node_ = -1, backward_ = false;
  began_ = std::chrono::duration<double>(Clock::now() - origin).count();
}

void StepRecorder::record(StepEventKind kind, int64_t index, int peer, Clock::time_point t0, Clock::time_point t1) {
  StepEvent e;
  e.kind = kind, e.backward = backward_, e.node = node_, e.index = index, e.peer = peer;
  if (kind == StepEventKind::kGradientSync || kind == StepEventKind::kUpdate || kind == StepEventKind::kWeightGather)
    e.node = -1, e.backward = true;
  e.start = std::chrono::duration<double>(t0 - origin_).count();
  e.end = std::chrono::duration<double>(t1 - origin_).count();
  events_.push_back(e);
}

StepTrace collect_trace(int64_t step, std::vector<StepRecorder*> recorders) {
  StepTrace t;
  t.step = step;
  double zero = 0;
  for (size_t i = 0; i < recorders.size(); ++i) zero = i == 0 ? recorders[i]->began() : std::min(zero, recorders[i]->began());
  for (StepRecorder* r : recorders) {
    auto& events = t.devices.emplace_back(std::move(r->events()));
    for (StepEvent& e : events) e.start -= zero, e.end -= zero;
  }
  return t;
}

std::string step_trace_json(const Graph& g, const StepTrace& t) {
  ChromeTrace trace;
  constexpr int kDevices = 1;  // search/trace.h's process of devices
  trace.process(kDevices, "devices");
  for (size_t d = 0; d < t.devices.size(); ++d) trace.track(kDevices, static_cast<int>(d), "device " + std::to_string(d));
  for (size_t d = 0; d < t.devices.size(); ++d)
    for (const StepEvent& e : t.devices[d]) {
      std::string name;
      if (e.kind == StepEventKind::kGradientSync) {
        name = "bucket " + std::to_string(e.index);
      } else if (e.kind == StepEventKind::kWeightGather) {
        name = "bucket " + std::to_string(e.index) + " weight gather";
      } else if (e.kind == StepEventKind::kUpdate) {
        name = "update";
      } else {
        const Node& n = g.node(e.node);
        name = (n.name.empty() ? "node " + std::to_string(n.id) : n.name) + " (" + n.op->name + ") ";
        if (e.kind == StepEventKind::kSend || e.kind == StepEventKind::kRecv)
          name += std::string(e.backward ? "gradient " : "") + to_string(e.kind) + (e.kind == StepEventKind::kSend ? " to " : " from ") +
                  std::to_string(e.peer);
        else
          name += to_string(e.kind);
      }
      ChromeTrace::Args args = {{"device", static_cast<int64_t>(d)}, {"index", e.index}};
      if (e.node >= 0) args.emplace_back("node", e.node);
      if (e.peer >= 0) args.emplace_back("peer", e.peer);
      trace.event(kDevices, static_cast<int>(d), std::move(name), to_string(e.kind), e.start, e.end - e.start, std::move(args));
    }
  return trace.json();
}

}  // namespace pcgx::runtime
