// optimize --plan FILE: a plan written by hand (docs/plans.md) lowered as
// stated, written as an ordinary strategy that run and simulate take; a
// mistake in it is one error line, exit code 2, no strategy written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_plan_option_test");
  return d;
}

const std::string kPlans = std::string(PCGX_SOURCE_DIR) + "/data/plans/";

void expect_one_error_line(const pcgx::testing::Result& r, const std::string& text, const fs::path& out) {
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(text), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  EXPECT_FALSE(fs::exists(out));
}

TEST(PlanOption, LowersThePlanAndTheStrategyRuns) {
  const fs::path out = dir() / "tp.json";
  const auto r = run("optimize gpt-tiny --plan " + kPlans + "gpt-megatron-2x2.json --machine dgx-h100 --devices 4 -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("with --search plan"), std::string::npos) << r.out;
  // The query projection's output features split 2 ways.
  const size_t at = r.out.find("attn.query");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(at, r.out.find('\n', at) - at).find("/2]"), std::string::npos) << r.out;
  const auto trained = run("run " + out.string() + " --steps 3 --no-report --no-plot");
  EXPECT_EQ(trained.code, 0) << trained.out;
  const auto simulated = run("simulate " + out.string());
  EXPECT_EQ(simulated.code, 0) << simulated.out;
}

TEST(PlanOption, MistakesAreOneErrorLine) {
  const fs::path out = dir() / "bad.json";
  const fs::path plan = dir() / "plan.json";
  std::ofstream(plan) << R"({"format": "pcgx.plan", "format_version": 1, "rules": [{"select": {"name": "block0.attn.query"}, "partition": {"heads": 2}}]})";
  const std::string base = " --machine dgx-h100 --devices 4 -o " + out.string();
  expect_one_error_line(run("optimize gpt-tiny --plan " + plan.string() + base), "has no parallel kind 'heads'", out);
  expect_one_error_line(run("optimize gpt-tiny --plan " + (dir() / "missing.json").string() + base), "missing.json", out);
  expect_one_error_line(run("optimize gpt-tiny --search mcmc --plan " + kPlans + "data-parallel-4.json" + base),
                        "--plan: a plan is lowered as stated (--search plan), not searched with mcmc", out);
  expect_one_error_line(run("optimize gpt-tiny --pipeline --plan " + kPlans + "data-parallel-4.json" + base), "--pipeline: a plan states no pipeline", out);
  expect_one_error_line(run("optimize gpt-tiny --search plan" + base), "--plan: the plan algorithm lowers a plan, and none is given", out);
}

}  // namespace
