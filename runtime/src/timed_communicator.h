#pragma once
// A communicator that counts the time its device spends sending and
// waiting for messages (the collectives' own arithmetic aside), for a
// measured step breakdown (trainer.h's DeviceTime). Forwards to another.
#include <chrono>

#include "pcgx/runtime/communicator.h"

namespace pcgx::runtime {

class TimedCommunicator final : public Communicator {
 public:
  explicit TimedCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void send(int to, int64_t tag, std::span<const float> data) override {
    if (!on_) return inner_.send(to, tag, data);
    const auto t0 = Clock::now();
    inner_.send(to, tag, data);
    ++sends_;
    seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  void recv(int from, int64_t tag, std::span<float> data) override {
    if (!on_) return inner_.recv(from, tag, data);
    const auto t0 = Clock::now();
    inner_.recv(from, tag, data);
    seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  void set_timing(bool on) { on_ = on; }
  double seconds() const { return seconds_; }
  int64_t sends() const { return sends_; }

 private:
  using Clock = std::chrono::steady_clock;
  Communicator& inner_;
  bool on_ = false;
  double seconds_ = 0;
  int64_t sends_ = 0;
};

}  // namespace pcgx::runtime
