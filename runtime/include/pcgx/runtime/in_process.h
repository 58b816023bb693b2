#pragma once
// N virtual devices in one process: each runs on its own thread with its own
// Communicator; messages are copied through shared mailboxes, so a device
// never reads another device's memory.
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "pcgx/runtime/communicator.h"

namespace pcgx::runtime {

class InProcessWorld {
 public:
  explicit InProcessWorld(int devices);
  ~InProcessWorld();
  int size() const { return devices_; }
  Communicator& communicator(int rank);

  // Runs body(comm) on every device, one thread each; rethrows the first
  // exception any device raised (the others are released, not left waiting).
  void run(const std::function<void(Communicator&)>& body);

  // Bytes sent between devices since construction.
  int64_t bytes_sent() const;

 private:
  friend class InProcessCommunicator;
  using Key = std::tuple<int, int, int64_t>;  // from, to, tag
  int devices_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<Key, std::deque<std::vector<float>>> mailboxes_;
  int64_t bytes_ = 0;
  bool aborted_ = false;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace pcgx::runtime
