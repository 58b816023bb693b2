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
    auto [it, created] = world_.mailboxes_.try_emplace({rank_, to, tag});
    InProcessWorld::Mailbox& box = it->second;
    if (created) {
      box.queue.reserve(2), box.spare.reserve(2);
      for (int i = 0; i < 2; ++i) box.spare.emplace_back().reserve(data.size());
    }
    std::vector<float> msg;
    if (!box.spare.empty()) msg = std::move(box.spare.back()), box.spare.pop_back();
    msg.assign(data.begin(), data.end());
    box.queue.push_back(std::move(msg));
    world_.bytes_ += static_cast<int64_t>(data.size() * sizeof(float));
    world_.arrived_.notify_all();
  }

  void recv(int from, int64_t tag, std::span<float> data) override {
    std::unique_lock lock(world_.mutex_);
    const InProcessWorld::Key key{from, rank_, tag};
    InProcessWorld::Mailbox* box = nullptr;
    world_.arrived_.wait(lock, [&] {
      if (world_.aborted_) return true;
      auto it = world_.mailboxes_.find(key);
      if (it == world_.mailboxes_.end() || it->second.queue.empty()) return false;
      box = &it->second;
      return true;
    });
    if (world_.aborted_) throw std::runtime_error("another device failed");
    std::vector<float>& msg = box->queue.front();
    if (msg.size() != data.size())
      throw std::logic_error("message size mismatch: device " + std::to_string(from) + " sent " +
                             std::to_string(msg.size()) + " floats, device " + std::to_string(rank_) + " expected " +
                             std::to_string(data.size()));
    std::copy(msg.begin(), msg.end(), data.begin());
    box->spare.push_back(std::move(msg));
    box->queue.erase(box->queue.begin());  // a few buffers at most: shifting them moves pointers
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
