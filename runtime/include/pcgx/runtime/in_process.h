#pragma once
// N virtual devices in one process: each runs on its own thread with its own
// Communicator; messages are copied through shared mailboxes, so a device
// never reads another device's memory.
//
// A training step sends the same messages (same keys, same sizes) every
// step, so each mailbox keeps its key and recycles its message buffers:
// once every key has been used, sending allocates only when more messages
// of one key are in flight than ever before (a device running more steps
// ahead of its receiver than it did so far). A new mailbox starts with
// two buffers: a device of a data-parallel step is never more than one
// step ahead of the others, which needs at most two.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "pcgx/runtime/communicator.h"

namespace pcgx::runtime {

// Each device is a thread of this process; more than this many belong on
// MPI ranks (a thread's stack alone reserves megabytes of address space).
inline constexpr int kMaxInProcessDevices = 4096;

class InProcessWorld {
 public:
  // Throws pcgx::Error unless 1 <= devices <= kMaxInProcessDevices.
  explicit InProcessWorld(int devices);
  ~InProcessWorld();
  int size() const { return devices_; }
  Communicator& communicator(int rank);

  // Runs body(comm) on every device, one thread each; rethrows the first
  // exception any device raised (the others are released, not left waiting).
  // A thread the system cannot start is an error too: the devices already
  // started are released and joined first.
  void run(const std::function<void(Communicator&)>& body);

  // Bytes sent between devices since construction.
  int64_t bytes_sent() const;

 private:
  friend class InProcessCommunicator;
  struct Mailbox {
    std::vector<std::vector<float>> queue;  // undelivered, oldest first
    std::vector<std::vector<float>> spare;  // delivered buffers, for reuse
  };
  // A mutex that, when devices have cores of their own, tries again for a
  // few microseconds before it sleeps: its holders keep it for a map lookup
  // or a vector move, while a thread put to sleep on it costs 30-50 us to
  // wake on this kind of machine (a virtual CPU's wake-up). Sleeping on a
  // sender's lock was what made one exchange in ten of a 2-device
  // all-reduce take 30-50 us instead of 3-4 (measured in a loop of 3,000).
  class InboxMutex {
   public:
    explicit InboxMutex(const bool& spin) : spin_(spin) {}
    void lock();
    bool try_lock() { return mutex_.try_lock(); }
    void unlock() { mutex_.unlock(); }

   private:
    std::mutex mutex_;
    const bool& spin_;
  };
  // What one device receives: its own lock, so senders to different
  // devices never wait on each other, and its own arrival count to poll.
  struct Inbox {
    explicit Inbox(const bool& spin) : mutex(spin) {}
    InboxMutex mutex;
    std::condition_variable_any arrived;
    std::map<std::pair<int, int64_t>, Mailbox> boxes;  // (from, tag)
    std::atomic<uint64_t> arrivals{0};
  };
  int devices_;
  // A receiver polls for up to 1 ms before it sleeps, when every device
  // has a core of its own: waking a sleeping thread costs 20-60 us on this
  // kind of machine, more than most messages of a step take to come.
  bool spin_ = false;
  std::vector<std::unique_ptr<Inbox>> inboxes_;  // per receiving device
  std::atomic<int64_t> bytes_{0};
  std::atomic<bool> aborted_{false};
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace pcgx::runtime
