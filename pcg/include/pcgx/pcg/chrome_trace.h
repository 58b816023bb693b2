#pragma once
// Timelines in the Chrome trace-event format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
// which Perfetto (ui.perfetto.dev) and chrome://tracing open, and which
// scripts/trace_svg.py draws. One writer for the simulated timeline
// (search/trace.h) and the measured one (runtime/step_trace.h), so the two
// open side by side with the same tracks, names and categories.
//
// Processes group tracks ("devices", "links"); a track (a "thread") is one
// resource, listed in the order its id gives. Events are complete events
// ("ph": "X") given in seconds and written in microseconds.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pcgx {

class ChromeTrace {
 public:
  using Args = std::vector<std::pair<std::string, int64_t>>;

  void process(int pid, std::string name);
  void track(int pid, int tid, std::string name);
  void event(int pid, int tid, std::string name, std::string category, double start, double duration, Args args = {});
  size_t events() const { return events_.size(); }
  // The whole document, one line, newline-terminated.
  std::string json() const;

 private:
  struct Named {
    int pid, tid;
    std::string name;
  };
  struct Event {
    int pid, tid;
    std::string name, category;
    double start, duration;
    Args args;
  };
  std::vector<Named> processes_, tracks_;
  std::vector<Event> events_;
};

}  // namespace pcgx
