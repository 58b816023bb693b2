// A line printed after a delay (see deferred_line.h).
#include "deferred_line.h"

#include <iostream>

namespace pcgx::cli {

DeferredLine::DeferredLine(std::string line, std::chrono::milliseconds after) : line_(std::move(line)) {
  timer_ = std::thread([this, after] {
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, after, [this] { return stopped_; }) || printed_) return;
    printed_ = true;  // under the lock: never after the destructor has begun
    std::cerr << line_ << std::flush;
  });
}

DeferredLine::~DeferredLine() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  timer_.join();
}

void DeferredLine::print() {
  std::lock_guard lock(mu_);
  if (printed_) return;
  printed_ = true;
  std::cerr << line_ << std::flush;
}

}  // namespace pcgx::cli
