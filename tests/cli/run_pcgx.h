#pragma once
// Runs the pcgx binary under test and captures its exit code and output.
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace pcgx::testing {

struct Result {
  int code;
  std::string out;
};

// Any shell command line (stderr joins stdout).
inline Result run_shell(const std::string& command) {
  const std::string cmd = command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline Result run(const std::string& args) { return run_shell(std::string(PCGX_BINARY) + " " + args); }

// The figure after `key` in a report, up to " per step" ("  between devices
// 1.25 MiB per step": "1.25 MiB"); empty where `key` is not printed.
inline std::string per_step_figure(const std::string& out, const std::string& key) {
  const size_t at = out.find(key);
  return at == std::string::npos ? std::string() : out.substr(at + key.size(), out.find(" per step", at) - at - key.size());
}

}  // namespace pcgx::testing
