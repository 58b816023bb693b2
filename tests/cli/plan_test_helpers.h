#pragma once
// What the plan tests (plan_option_test.cpp, plan_show_test.cpp) read from
// a run of the pcgx binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/run_pcgx.h"

namespace pcgx::testing {

// A mistake is one "error: " line naming `text`, exit code 2, and `out`
// not written.
inline void expect_one_error_line(const Result& r, const std::string& text, const std::filesystem::path& out) {
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(text), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The "iteration time" optimize printed, in ms; -1 without one.
inline double predicted_ms(const std::string& out) {
  const size_t at = out.find("iteration time");
  if (at == std::string::npos) return -1;
  return std::stod(out.substr(out.find_first_of("0123456789", at)));
}

}  // namespace pcgx::testing
