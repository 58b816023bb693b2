#include "pcgx/runtime/in_process.h"

#include <algorithm>
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "pcgx/pcg/error.h"

namespace pcgx::runtime {
namespace {

// Each device's share of the cores this process may use, when every device
// can have at least one: left to itself the scheduler sometimes runs two
// devices on one core while another idles, and their messages then wait
// for each other's time slices (steps of a tiny model measured 2x slower
// in one run of two). Empty when there are more devices than cores.
std::vector<std::vector<int>> core_slices(int devices) {
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (static_cast<int>(cpus.size()) < devices) return {};
  std::vector<std::vector<int>> slices(static_cast<size_t>(devices));
  for (size_t i = 0; i < cpus.size(); ++i) slices[i * static_cast<size_t>(devices) / cpus.size()].push_back(cpus[i]);
  return slices;
#else
  (void)devices;
  return {};
#endif
}

// Best effort: a failure leaves the thread to the scheduler.
void pin(std::thread& t, const std::vector<int>& cpus) {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  (void)pthread_setaffinity_np(t.native_handle(), sizeof set, &set);
#else
  (void)t, (void)cpus;
#endif
}

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

void InProcessWorld::InboxMutex::lock() {
  if (spin_)
    for (int i = 0; i < 4096; ++i) {
      if (mutex_.try_lock()) return;
      pause();
    }
  mutex_.lock();
}

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessWorld& w, int rank) : world_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return world_.devices_; }

  // Copies run outside the inbox's lock, so devices exchanging at once
  // copy at once (a ring all-reduce's members all send every step); the
  // lock guards only the mailboxes. Map nodes stay put, so a mailbox found
  // under the lock can be filled after it.
  void send(int to, int64_t tag, std::span<const float> data) override {
    InProcessWorld::Inbox& in = *world_.inboxes_.at(static_cast<size_t>(to));
    InProcessWorld::Mailbox* box = nullptr;
    std::vector<float> msg;
    {
      std::lock_guard lock(in.mutex);
      auto [it, created] = in.boxes.try_emplace({rank_, tag});
      box = &it->second;
      if (created) {
        box->queue.reserve(2), box->spare.reserve(2);
        for (int i = 0; i < 2; ++i) box->spare.emplace_back().reserve(data.size());
      }
      if (!box->spare.empty()) msg = std::move(box->spare.back()), box->spare.pop_back();
    }
    msg.assign(data.begin(), data.end());
    {
      std::lock_guard lock(in.mutex);
      box->queue.push_back(std::move(msg));
    }
    // Counted after the lock is let go: a polling receiver takes the lock
    // as soon as it sees the count move, and would find it held.
    in.arrivals.fetch_add(1, std::memory_order_release);
    in.arrived.notify_one();  // one receiver per inbox
    world_.bytes_.fetch_add(static_cast<int64_t>(data.size() * sizeof(float)), std::memory_order_relaxed);
  }

  void recv(int from, int64_t tag, std::span<float> data) override {
    InProcessWorld::Inbox& in = *world_.inboxes_[static_cast<size_t>(rank_)];
    const std::pair<int, int64_t> key{from, tag};
    InProcessWorld::Mailbox* box = nullptr;
    std::vector<float> msg;
    {
      std::unique_lock lock(in.mutex);
      auto ready = [&] {
        if (world_.aborted_.load(std::memory_order_relaxed)) return true;
        auto it = in.boxes.find(key);
        if (it == in.boxes.end() || it->second.queue.empty()) return false;
        box = &it->second;
        return true;
      };
      if (world_.spin_ && !ready()) poll(in, lock, ready);
      in.arrived.wait(lock, ready);
      if (world_.aborted_.load()) throw std::runtime_error("another device failed");
      msg = std::move(box->queue.front());
      box->queue.erase(box->queue.begin());  // a few buffers at most: shifting them moves pointers
    }
    const bool fits = msg.size() == data.size();
    if (fits) std::copy(msg.begin(), msg.end(), data.begin());
    const size_t sent = msg.size();
    {
      std::lock_guard lock(in.mutex);
      box->spare.push_back(std::move(msg));
    }
    if (!fits)
      throw std::logic_error("message size mismatch: device " + std::to_string(from) + " sent " + std::to_string(sent) +
                             " floats, device " + std::to_string(rank_) + " expected " + std::to_string(data.size()));
  }

 private:
  // Until `ready` or kSpin has passed: releases the lock, watches this
  // inbox's arrivals, and looks again under the lock when one came.
  template <class Ready>
  void poll(InProcessWorld::Inbox& in, std::unique_lock<InProcessWorld::InboxMutex>& lock, Ready& ready) {
    using Clock = std::chrono::steady_clock;
    // 1 ms, not the 50 us it was: a sender still copying a 4 MiB message
    // (300-400 us here) or finishing a kernel the receiver did not have
    // (a BatchNorm's statistics wait for the partner's convolution) kept a
    // receiver waiting past 50 us often enough that it slept, and each
    // wake-up cost 20-60 us: the calibration's bandwidth came out at 2.4
    // to 10.5 GB/s from run to run, and Inception-v3-tiny's data-parallel
    // step was 0.5-1 ms longer. The core is the device's own (spin_).
    constexpr auto kSpin = std::chrono::milliseconds(1);
    const auto until = Clock::now() + kSpin;
    for (;;) {
      const uint64_t seen = in.arrivals.load(std::memory_order_acquire);
      lock.unlock();
      bool late = false;
      // Mostly pause; now and then yield, in case the sender waits for
      // this core (a device's core may be shared after all).
      for (int i = 1; in.arrivals.load(std::memory_order_acquire) == seen; ++i) {
        if (i % 256 == 0) std::this_thread::yield();
        else pause();
        if (i % 64 == 0 && (Clock::now() > until || world_.aborted_.load(std::memory_order_relaxed))) {
          late = true;
          break;
        }
      }
      lock.lock();
      if (ready() || late) return;
    }
  }

  InProcessWorld& world_;
  int rank_;
};

InProcessWorld::InProcessWorld(int devices)
    : devices_(devices), spin_(devices > 1 && static_cast<unsigned>(devices) <= std::thread::hardware_concurrency()) {
  if (devices < 1 || devices > kMaxInProcessDevices)
    throw Error("the in-process runtime runs 1 to " + std::to_string(kMaxInProcessDevices) + " devices (one thread each), not " +
                std::to_string(devices) + ": run more on MPI ranks");
  for (int r = 0; r < devices; ++r) {
    inboxes_.push_back(std::make_unique<Inbox>(spin_));
    comms_.push_back(std::make_unique<InProcessCommunicator>(*this, r));
  }
}
InProcessWorld::~InProcessWorld() = default;

Communicator& InProcessWorld::communicator(int rank) { return *comms_.at(static_cast<size_t>(rank)); }

int64_t InProcessWorld::bytes_sent() const {
  return bytes_.load();
}

void InProcessWorld::run(const std::function<void(Communicator&)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(devices_));
  auto release_all = [&] {
    aborted_ = true;
    for (auto& in : inboxes_) {
      std::lock_guard lock(in->mutex);  // a receiver between its check and its wait sees it
      in->arrived.notify_all();
    }
  };
  auto one = [&](int r) {
    try {
      body(*comms_[static_cast<size_t>(r)]);
    } catch (...) {
      errors[static_cast<size_t>(r)] = std::current_exception();
      release_all();
    }
  };
  if (devices_ == 1) {
    one(0);
  } else {
    const std::vector<std::vector<int>> cores = core_slices(devices_);
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(devices_));
    std::string not_started;
    for (int r = 0; r < devices_; ++r) {
      try {
        threads.emplace_back(one, r);
      } catch (const std::system_error& e) {
        not_started = "cannot start the thread of device " + std::to_string(r) + " of " + std::to_string(devices_) + ": " + e.what();
        release_all();
        break;
      }
      if (!cores.empty()) pin(threads.back(), cores[static_cast<size_t>(r)]);
    }
    for (auto& t : threads) t.join();
    if (!not_started.empty()) throw Error(not_started + " (fewer devices, or MPI ranks)");
  }
  // The root cause first: a device that failed on its own, not one released by the abort.
  for (auto& e : errors)
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::runtime_error& re) {
        if (std::string(re.what()) == "another device failed") continue;
        throw;
      } catch (...) {
        throw;
      }
    }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace pcgx::runtime
