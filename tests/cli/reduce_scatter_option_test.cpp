// --reduce-scatter on optimize (on by default; --no-reduce-scatter makes
// ZeRO 1 all-reduce the gradients whole, as DeepSpeed's BF16 optimizer
// does) and simulate (on or off): the report says so, the step is slower,
// the strategy and a plan record it, the plan fed back is priced the
// same, pcgx run notes that its runtime reduce-scatters, and off at a
// stage other than 1, or a value other than on or off, is one error line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/plan_test_helpers.h"
#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::expect_one_error_line;
using pcgx::testing::predicted_ms;
using pcgx::testing::ratio;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_reduce_scatter_test");
  return d;
}

// ZeRO 1 data parallelism over two nodes, so that the buckets cross the network.
const std::string kCommon = "optimize gpt-tiny --machine dgx-h100 --devices 16 --search data-parallel --precision bf16 --zero 1 --bucket-mb 0.05 -q ";
const std::string kLine = "gradient reduction    all-reduced whole, each device then updating its shard of the sum (ZeRO 1, --no-reduce-scatter";

TEST(ReduceScatterOption, AllReducedWholeIsSlowerRecordedSimulatedAndPlanned) {
  const std::string whole = (dir() / "whole.json").string(), scatter = (dir() / "scatter.json").string();
  const auto a = run(kCommon + "--no-reduce-scatter -o " + whole);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find(kLine), std::string::npos) << a.out;
  const auto b = run(kCommon + "-o " + scatter);
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(b.out.find("gradient reduction "), std::string::npos) << b.out;
  EXPECT_GT(predicted_ms(a.out), predicted_ms(b.out)) << a.out << b.out;
  {
    std::ifstream in(whole);
    EXPECT_EQ(nlohmann::json::parse(in).at("reduce_scatter"), false);
    std::ifstream other(scatter);
    EXPECT_FALSE(nlohmann::json::parse(other).contains("reduce_scatter")) << "the default is not written";
  }
  const auto s = run("simulate " + whole + " --bucket-mb 0.05");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find(kLine), std::string::npos) << s.out;
  EXPECT_NEAR(ratio(s.out), 1.0, 0.02) << s.out;
  const auto on = run("simulate " + whole + " --bucket-mb 0.05 --reduce-scatter on");
  ASSERT_EQ(on.code, 0) << on.out;
  EXPECT_EQ(on.out.find("gradient reduction "), std::string::npos) << on.out;
  EXPECT_LT(ratio(on.out), ratio(s.out)) << on.out << s.out;
  // At stage 2 the gradients are sharded: reduce-scattered whatever the
  // strategy says, no line; saying off there is a mistake.
  const auto zero2 = run("simulate " + whole + " --bucket-mb 0.05 --zero 2");
  ASSERT_EQ(zero2.code, 0) << zero2.out;
  EXPECT_EQ(zero2.out.find("gradient reduction "), std::string::npos) << zero2.out;
  const fs::path trace = dir() / "t.json";
  expect_one_error_line(run("simulate " + whole + " --zero 2 --reduce-scatter off --trace " + trace.string()),
                        "error: --reduce-scatter: off applies to ZeRO stage 1, and the plan is priced at stage 2", trace);
  const auto bad = run("simulate " + whole + " --reduce-scatter maybe");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --reduce-scatter: expected on or off, got 'maybe'"), std::string::npos) << bad.out;
  const fs::path refused = dir() / "refused.json";
  expect_one_error_line(run("optimize gpt-tiny --machine dgx-h100 --devices 16 --search data-parallel --zero 2 --no-reduce-scatter -q -o " +
                            refused.string()),
                        "error: --no-reduce-scatter: off applies to ZeRO stage 1 (every weight at 1), not 2, which shards the gradients", refused);
  // With the stage searched, the strategy records it only where the stage
  // chosen is 1 (and its plan is one optimize takes).
  const std::string any = (dir() / "any.json").string();
  const auto searched = run("optimize gpt-tiny --machine dgx-h100 --devices 16 --search data-parallel --precision bf16 --bucket-mb 0.05 "
                            "--no-reduce-scatter -q -o " + any);
  ASSERT_EQ(searched.code, 0) << searched.out;
  {
    std::ifstream in(any);
    const nlohmann::json j = nlohmann::json::parse(in);
    EXPECT_EQ(j.contains("reduce_scatter"), j.at("zero") == 1) << j.at("zero");
    EXPECT_EQ(searched.out.find("gradient reduction ") != std::string::npos, j.at("zero") == 1) << searched.out;
  }
  const fs::path any_plan = dir() / "any-plan.json";
  ASSERT_EQ(run("plan show " + any + " -o " + any_plan.string()).code, 0);
  EXPECT_EQ(run("optimize gpt-tiny --machine dgx-h100 --devices 16 --precision bf16 -q --plan " + any_plan.string() + " -o " +
                (dir() / "any-back.json").string())
                .code,
            0);
  // pcgx's runtime reduce-scatters, says so and predicts that.
  const auto trained = run("run " + whole + " --steps 1 --no-report --no-plot");
  ASSERT_EQ(trained.code, 0) << trained.out;
  EXPECT_NE(trained.out.find("note: " + whole + " was planned with ZeRO 1's gradients all-reduced whole (reduce_scatter)"), std::string::npos)
      << trained.out;
  // The found strategy's plan states it; fed back it is priced the same,
  // and the flag wins over the plan.
  const auto fed = pcgx::testing::plan_fed_back(whole, dir(), "reduce_scatter", false,
                                                "optimize gpt-tiny --machine dgx-h100 --devices 16 --precision bf16 --bucket-mb 0.05 -q",
                                                predicted_ms(a.out), "--reduce-scatter");
  EXPECT_NE(fed.back.out.find(kLine), std::string::npos) << fed.back.out;
  EXPECT_EQ(fed.flagged.out.find("gradient reduction "), std::string::npos) << fed.flagged.out;
}

}  // namespace
