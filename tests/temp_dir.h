#pragma once
// A scratch directory per test process (tests that write files).
#include <unistd.h>

#include <filesystem>
#include <string>

namespace pcgx::testing {

inline std::filesystem::path temp_dir(const std::string& prefix) {
  std::filesystem::path p = std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(p);
  return p;
}

}  // namespace pcgx::testing
