#pragma once
// A scratch directory per test process (tests that write files).
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <set>
#include <string>

namespace pcgx::testing {

// <tmp>/<prefix>_<pid>, emptied the first time this process asks for it:
// a directory left by an earlier run whose process had the same id would
// otherwise hand a test files it did not write (a directory it expects
// absent, found there).
inline std::filesystem::path temp_dir(const std::string& prefix) {
  static std::mutex lock;
  static std::set<std::string> made;
  const std::filesystem::path p = std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()));
  const std::lock_guard<std::mutex> hold(lock);
  if (made.insert(p.string()).second) std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

}  // namespace pcgx::testing
