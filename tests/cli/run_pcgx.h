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

}  // namespace pcgx::testing
