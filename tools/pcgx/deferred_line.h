#pragma once
// A line on stderr saying what a long job does ("optimizing gpt ..."),
// printed once the job has run a second, or has progress to show after it,
// or has finished, and never when it fails first: a request refused within
// a second (a plan that cannot run as it states, no strategy that fits)
// prints its one `error:` line and nothing else.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace pcgx::cli {

class DeferredLine {
 public:
  explicit DeferredLine(std::string line, std::chrono::milliseconds after = std::chrono::seconds(1));
  // Stops waiting; prints nothing more (the job failed or has printed it).
  ~DeferredLine();
  DeferredLine(const DeferredLine&) = delete;
  DeferredLine& operator=(const DeferredLine&) = delete;
  // Prints the line now, unless it is printed already; from any thread.
  void print();

 private:
  std::string line_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool printed_ = false, stopped_ = false;
  std::thread timer_;
};

}  // namespace pcgx::cli
