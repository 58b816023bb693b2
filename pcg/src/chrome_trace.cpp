#include "pcgx/pcg/chrome_trace.h"

#include <nlohmann/json.hpp>

namespace pcgx {

void ChromeTrace::process(int pid, std::string name) { processes_.push_back({pid, 0, std::move(name)}); }

void ChromeTrace::track(int pid, int tid, std::string name) { tracks_.push_back({pid, tid, std::move(name)}); }

void ChromeTrace::event(int pid, int tid, std::string name, std::string category, double start, double duration, Args args) {
  events_.push_back({pid, tid, std::move(name), std::move(category), start, duration, std::move(args)});
}

std::string ChromeTrace::json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const Named& p : processes_)
    out.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"name", p.name}}}});
  for (const Named& t : tracks_) {
    out.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", t.pid}, {"tid", t.tid}, {"args", {{"name", t.name}}}});
    out.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", t.pid}, {"tid", t.tid}, {"args", {{"sort_index", t.tid}}}});
  }
  for (const Event& e : events_) {
    nlohmann::json args = nlohmann::json::object();
    for (const auto& [k, v] : e.args) args[k] = v;
    out.push_back({{"ph", "X"}, {"name", e.name}, {"cat", e.category}, {"pid", e.pid}, {"tid", e.tid},
                   {"ts", e.start * 1e6}, {"dur", e.duration * 1e6}, {"args", std::move(args)}});
  }
  nlohmann::json doc = {{"traceEvents", std::move(out)}, {"displayTimeUnit", "ms"}};
  return doc.dump() + "\n";
}

}  // namespace pcgx
