#pragma once
// What the command-line tests (the plan tests, simulate's, the schedule
// file's, --cross-entropy's) read from a run of the pcgx binary.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

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

// A found strategy's recipe field through `plan show` and back: the plan
// (written in `dir`) states `field` as `value`; `optimize` (a command
// taking it with --plan, -o appended) prices it as `predicted_ms` did;
// the outputs of that and of the same with `flag` (which overrides the
// plan), for the caller's checks.
struct PlanFedBack {
  Result back, flagged;
};
inline PlanFedBack plan_fed_back(const std::string& strategy, const std::filesystem::path& dir, const char* field, const nlohmann::json& value,
                                 const std::string& optimize, double predicted, const std::string& flag) {
  const std::filesystem::path plan = dir / "plan.json";
  const Result shown = run("plan show " + strategy + " -o " + plan.string());
  EXPECT_EQ(shown.code, 0) << shown.out;
  std::ifstream in(plan);
  EXPECT_EQ(nlohmann::json::parse(in).at(field), value);
  const std::string planned = optimize + " --plan " + plan.string();
  PlanFedBack r{run(planned + " -o " + (dir / "back.json").string()), run(planned + " " + flag + " -o " + (dir / "flag.json").string())};
  EXPECT_EQ(r.back.code, 0) << r.back.out;
  EXPECT_EQ(predicted_ms(r.back.out), predicted) << r.back.out;
  EXPECT_EQ(r.flagged.code, 0) << r.flagged.out;
  return r;
}

// The step a run predicts for what it runs ("X ms predicted on ..."); -1 when it says none.
inline double run_predicted_ms(const std::string& out) {
  const size_t at = out.find(" ms predicted on");
  if (at == std::string::npos) return -1;
  const size_t from = out.find_last_not_of("0123456789.", at - 1) + 1;
  return std::stod(out.substr(from, at - from));
}

// The ratio `pcgx simulate` prints (simulated over the strategy's estimate); 0 where none.
inline double ratio(const std::string& out) {
  const size_t at = out.find("ratio ");
  return at == std::string::npos ? 0.0 : std::stod(out.substr(at + 6));
}

// A run's "loss FIRST -> LAST" line (the whole output when it has none).
inline std::string loss_line(const std::string& out) {
  const size_t at = out.find("\nloss ");
  return at == std::string::npos ? out : out.substr(at, out.find('\n', at + 1) - at);
}

// Two runs' losses, first and last, as printed (6 digits) and within
// `relative` of each other: for plans whose kernels split the same sums
// differently (co-sharded heads against whole ones), which agree to the
// last few float bits, not to every bit.
inline void expect_close_losses(const std::string& a, const std::string& b, double relative = 1e-5) {
  const std::regex loss("\nloss +([0-9.e+-]+) -> ([0-9.e+-]+)");
  std::smatch x, y;
  ASSERT_TRUE(std::regex_search(a, x, loss)) << a;
  ASSERT_TRUE(std::regex_search(b, y, loss)) << b;
  for (size_t k : {1u, 2u}) EXPECT_NEAR(std::stod(x[k].str()), std::stod(y[k].str()), relative * std::fabs(std::stod(y[k].str()))) << x[0] << " vs " << y[0];
}

// Runs `run ARGS` and `run REFERENCE` (3 steps each) and expects the same
// losses; returns the first's output.
inline std::string trains_like(const std::string& args, const std::string& reference) {
  const auto a = run("run " + args + " --steps 3 --no-report --no-plot");
  const auto b = run("run " + reference + " --steps 3 --no-report --no-plot");
  EXPECT_EQ(a.code, 0) << a.out;
  EXPECT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(loss_line(a.out), loss_line(b.out)) << args;
  return a.out;
}

// A run's bytes between devices per step, measured, are the predicted
// ones (and some are sent).
inline void expect_bytes_as_predicted(const std::string& out) {
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("between devices +([0-9.]+ [KMG]?i?B) per step measured, ([0-9.]+ [KMG]?i?B) predicted"))) << out;
  EXPECT_EQ(m[1].str(), m[2].str());
  EXPECT_NE(m[1].str(), "0 B");
}

}  // namespace pcgx::testing
