#include "pcgx/runtime/in_process.h"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <thread>

namespace pcgx::runtime {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessWorld& w, int rank) : world_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return world_.devices_; }

  void send(int to, int64_t tag, std::span<const float> data) override {
    std::lock_guard lock(world_.mutex_);
    world_.mailboxes_[{rank_, to, tag}].emplace_back(data.begin(), data.end());
    world_.bytes_ += static_cast<int64_t>(data.size() * sizeof(float));
    world_.arrived_.notify_all();
  }

  void recv(int from, int64_t tag, std::span<float> data) override {
    std::unique_lock lock(world_.mutex_);
    const InProcessWorld::Key key{from, rank_, tag};
    world_.arrived_.wait(lock, [&] {
      if (world_.aborted_) return true;
      auto it = world_.mailboxes_.find(key);
      return it != world_.mailboxes_.end() && !it->second.empty();
    });
    if (world_.aborted_) throw std::runtime_error("another device failed");
    auto it = world_.mailboxes_.find(key);
    std::vector<float> msg = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) world_.mailboxes_.erase(it);
    if (msg.size() != data.size())
      throw std::logic_error("message size mismatch: device " + std::to_string(from) + " sent " +
                             std::to_string(msg.size()) + " floats, device " + std::to_string(rank_) + " expected " +
                             std::to_string(data.size()));
    std::copy(msg.begin(), msg.end(), data.begin());
  }

 private:
  InProcessWorld& world_;
  int rank_;
};

InProcessWorld::InProcessWorld(int devices) : devices_(devices) {
  for (int r = 0; r < devices; ++r) comms_.push_back(std::make_unique<InProcessCommunicator>(*this, r));
}
InProcessWorld::~InProcessWorld() = default;

Communicator& InProcessWorld::communicator(int rank) { return *comms_.at(static_cast<size_t>(rank)); }

int64_t InProcessWorld::bytes_sent() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

void InProcessWorld::run(const std::function<void(Communicator&)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(devices_));
  auto one = [&](int r) {
    try {
      body(*comms_[static_cast<size_t>(r)]);
    } catch (...) {
      errors[static_cast<size_t>(r)] = std::current_exception();
      std::lock_guard lock(mutex_);
      aborted_ = true;
      arrived_.notify_all();
    }
  };
  if (devices_ == 1) {
    one(0);
  } else {
    std::vector<std::thread> threads;
    for (int r = 0; r < devices_; ++r) threads.emplace_back(one, r);
    for (auto& t : threads) t.join();
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
