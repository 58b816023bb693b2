#pragma once
// The measured timeline of one training step (`pcgx run --trace FILE`):
// when each device ran every kernel, sent every message, waited for every
// message and took part in every collective, on one clock. Written in the
// Chrome trace-event format (pcg/chrome_trace.h) with a track per device,
// named as the simulator names them (search/trace.h), so a measured step
// and `pcgx simulate --trace` open side by side.
//
// Each device runs its share in one thread, one call after another
// (device_executor.h), so its events never overlap: what lies between them
// is the executor's own work (zeroing, cutting blocks, bookkeeping), what
// the cost model calls overhead. A recv lasts from the call to the
// message's arrival: the bytes and the wait for a slower peer. Messages
// inside a collective are the collective's event.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pcgx/pcg/graph.h"

namespace pcgx::runtime {

enum class StepEventKind : uint8_t { kForward, kBackward, kSend, kRecv, kCollective, kGradientSync, kUpdate, kWeightGather };
const char* to_string(StepEventKind k);

struct StepEvent {
  StepEventKind kind = StepEventKind::kForward;
  bool backward = false;   // the pass it belongs to
  NodeId node = -1;        // -1: gradient buckets, the update
  int64_t index = -1;      // the task (kernels), the bucket (gradient sync), the group (collectives)
  int peer = -1;           // send, recv
  double start = 0, end = 0;  // seconds from the step's start (the earliest device's)
};

struct StepTrace {
  int64_t step = -1;  // 0-based; -1: nothing recorded
  // Per device (under MPI, rank 0's alone: ranks need not share a clock).
  std::vector<std::vector<StepEvent>> devices;
  double seconds() const;  // the last event's end
};

// What one device records while on; its executor and its communicator
// share one, so a message is charged to the node being run.
class StepRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  // Records from now on; times count from `origin` (the same on every device).
  void start(Clock::time_point origin, size_t reserve = 1024);
  void stop() { on_ = false; }
  bool on() const { return on_ && depth_ == 0; }
  void at(NodeId node, bool backward) { node_ = node, backward_ = backward; }
  void record(StepEventKind kind, int64_t index, int peer, Clock::time_point t0, Clock::time_point t1);
  // Between enter and leave (a collective) messages are not recorded.
  void enter() { ++depth_; }
  void leave() { --depth_; }
  std::vector<StepEvent>& events() { return events_; }
  double began() const { return began_; }  // when start was called, from origin

 private:
  bool on_ = false;
  int depth_ = 0;
  NodeId node_ = -1;
  bool backward_ = false;
  Clock::time_point origin_;
  double began_ = 0;
  std::vector<StepEvent> events_;
};

// The devices' recordings of one step, shifted so the earliest device's
// step starts at 0.
StepTrace collect_trace(int64_t step, std::vector<StepRecorder*> recorders);

std::string step_trace_json(const Graph& g, const StepTrace& t);

}  // namespace pcgx::runtime
