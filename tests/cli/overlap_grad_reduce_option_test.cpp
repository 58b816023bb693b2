// --overlap-grad-reduce on optimize (on by default; --no-overlap-grad-reduce
// reduces the gradient buckets after the backward pass, as Megatron-LM's
// DDP did before Megatron-Core) and simulate (on or off): the report says
// where the buckets run (and that ZeRO 3 runs them beside the pass
// anyway), the strategy and a plan record it, the plan fed back is priced
// the same, pcgx run notes it, and a value other than on or off is one
// error line.
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
  static const fs::path d = pcgx::testing::temp_dir("pcgx_overlap_grad_reduce_test");
  return d;
}

// Data parallelism over two nodes, so that the buckets cross the network,
// in buckets small enough that the first hides behind the backward pass.
const std::string kCommon = "optimize gpt-tiny --machine dgx-h100 --devices 16 --search data-parallel --precision bf16 --bucket-mb 0.05 -q ";

TEST(OverlapGradReduceOption, AfterTheBackwardPassIsSlowerRecordedSimulatedAndPlanned) {
  const std::string after = (dir() / "after.json").string(), beside = (dir() / "beside.json").string();
  const auto a = run(kCommon + "--no-overlap-grad-reduce -o " + after);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("gradient buckets      reduced after the backward pass, the devices waiting for them (--no-overlap-grad-reduce)\n"),
            std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("after the backward pass, exposed (--no-overlap-grad-reduce)\n"), std::string::npos) << a.out;
  const auto b = run(kCommon + "-o " + beside);
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(b.out.find("gradient buckets "), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("hidden behind the backward pass"), std::string::npos) << b.out;
  EXPECT_GT(predicted_ms(a.out), predicted_ms(b.out)) << a.out << b.out;
  {
    std::ifstream in(after);
    EXPECT_EQ(nlohmann::json::parse(in).at("overlap_grad_reduce"), false);
    std::ifstream other(beside);
    EXPECT_FALSE(nlohmann::json::parse(other).contains("overlap_grad_reduce")) << "the default is not written";
  }
  const auto s = run("simulate " + after + " --bucket-mb 0.05");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("gradient buckets      reduced after the backward pass"), std::string::npos) << s.out;
  EXPECT_NEAR(ratio(s.out), 1.0, 0.02) << s.out;
  // Simulated with the buckets beside the backward pass: faster than the
  // strategy's own estimate.
  const auto on = run("simulate " + after + " --bucket-mb 0.05 --overlap-grad-reduce on");
  ASSERT_EQ(on.code, 0) << on.out;
  EXPECT_EQ(on.out.find("gradient buckets "), std::string::npos) << on.out;
  EXPECT_LT(ratio(on.out), ratio(s.out)) << on.out << s.out;
  // Simulated at ZeRO 3, every weight gathered before use: the buckets run
  // beside the backward pass whatever the strategy says, and the report
  // says so (from the simulation, not the strategy's ZeRO 0).
  const auto zero3 = run("simulate " + after + " --bucket-mb 0.05 --zero 3 --zero-persistence-threshold 0");
  ASSERT_EQ(zero3.code, 0) << zero3.out;
  EXPECT_NE(zero3.out.find("gradient buckets      ZeRO 3 gathers weights before use and reduces every bucket beside the backward pass "
                           "(--no-overlap-grad-reduce has no effect)"),
            std::string::npos)
      << zero3.out;
  // pcgx's runtime reduces as its devices do, says so and predicts that.
  const auto trained = run("run " + after + " --steps 1 --no-report --no-plot");
  ASSERT_EQ(trained.code, 0) << trained.out;
  EXPECT_NE(trained.out.find("note: " + after + " was planned with the gradient buckets reduced after the backward pass (overlap_grad_reduce)"),
            std::string::npos)
      << trained.out;
  const auto bad = run("simulate " + after + " --overlap-grad-reduce maybe");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --overlap-grad-reduce: expected on or off, got 'maybe'"), std::string::npos) << bad.out;
  // The found strategy's plan states it; fed back it is priced the same,
  // and the flag wins over the plan.
  const auto fed = pcgx::testing::plan_fed_back(after, dir(), "overlap_grad_reduce", false,
                                                "optimize gpt-tiny --machine dgx-h100 --devices 16 --precision bf16 --bucket-mb 0.05 -q",
                                                predicted_ms(a.out), "--overlap-grad-reduce");
  EXPECT_NE(fed.back.out.find("gradient buckets      reduced after the backward pass"), std::string::npos) << fed.back.out;
  EXPECT_EQ(fed.flagged.out.find("gradient buckets "), std::string::npos) << fed.flagged.out;
  const fs::path bad_plan = dir() / "bad.json", out = dir() / "bad-s.json";
  std::ofstream(bad_plan) << R"({"format": "pcgx.plan", "format_version": 1, "overlap_grad_reduce": "no",
                                "rules": [{"select": {}, "partition": {"samples": 16}}]})";
  expect_one_error_line(run("optimize gpt-tiny --machine dgx-h100 --devices 16 -q --plan " + bad_plan.string() + " -o " + out.string()),
                        "overlap_grad_reduce: expected true or false", out);
}

}  // namespace
