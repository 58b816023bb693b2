#pragma once
// A communicator that counts the time its device spends sending and
// waiting for messages (the collectives' own arithmetic aside), for a
// measured step breakdown (trainer.h's DeviceTime), and records each
// message into a step's trace (step_trace.h). Forwards to another.
#include <chrono>

#include "pcgx/runtime/communicator.h"
#include "pcgx/runtime/step_trace.h"

namespace pcgx::runtime {

class TimedCommunicator final : public Communicator {
 public:
  explicit TimedCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void send(int to, int64_t tag, std::span<const float> data) override {
    if (!on_ && !tracing()) return inner_.send(to, tag, data);
    const auto t0 = Clock::now();
    inner_.send(to, tag, data);
    done(StepEventKind::kSend, to, t0);
    if (on_) ++sends_, ++calls_;
  }
  void recv(int from, int64_t tag, std::span<float> data) override {
    if (!on_ && !tracing()) return inner_.recv(from, tag, data);
    const auto t0 = Clock::now();
    inner_.recv(from, tag, data);
    done(StepEventKind::kRecv, from, t0);
    if (on_) ++calls_;
  }
  void set_timing(bool on) { on_ = on; }
  bool timing() const { return on_; }
  void set_recorder(StepRecorder* r) { recorder_ = r; }
  struct Totals {
    double seconds = 0;
    int64_t sends = 0, calls = 0;
  };
  Totals totals() const { return {seconds_, sends_, calls_}; }
  void restore(const Totals& t) { seconds_ = t.seconds, sends_ = t.sends, calls_ = t.calls; }
  double seconds() const { return seconds_; }
  int64_t sends() const { return sends_; }
  int64_t calls() const { return calls_; }  // sends and recvs timed

 private:
  using Clock = StepRecorder::Clock;
  bool tracing() const { return recorder_ && recorder_->on(); }
  void done(StepEventKind kind, int peer, Clock::time_point t0) {
    const auto t1 = Clock::now();
    if (on_) seconds_ += std::chrono::duration<double>(t1 - t0).count();
    if (tracing()) recorder_->record(kind, -1, peer, t0, t1);
  }
  Communicator& inner_;
  bool on_ = false;
  StepRecorder* recorder_ = nullptr;
  double seconds_ = 0;
  int64_t sends_ = 0, calls_ = 0;
};

}  // namespace pcgx::runtime
