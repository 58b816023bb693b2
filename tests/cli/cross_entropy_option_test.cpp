// --cross-entropy on optimize and simulate: eager printed by optimize,
// recorded, read back by simulate (which can price the plan fused
// instead), slower than fused at a large vocabulary; a plan states it; an
// unknown kernel is one error line naming the choices, and no file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

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
  static const fs::path d = pcgx::testing::temp_dir("pcgx_cross_entropy_test");
  return d;
}

const std::string kCommon =
    "optimize gpt-tiny --set vocab=16384 --set seq=256 --machine dgx-h100 --devices 2 --search data-parallel --precision bf16 -q ";

TEST(CrossEntropyOption, EagerIsPricedRecordedAndSimulated) {
  const std::string eager = (dir() / "eager.json").string(), fused = (dir() / "fused.json").string();
  const auto e = run(kCommon + "--cross-entropy eager -o " + eager);
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("cross-entropy         eager (1 softmax over the logits in FP32 passes, the FP32 probabilities kept for backward)\n"),
            std::string::npos)
      << e.out;
  const auto f = run(kCommon + "-o " + fused);
  ASSERT_EQ(f.code, 0) << f.out;
  EXPECT_EQ(f.out.find("cross-entropy "), std::string::npos) << f.out;
  EXPECT_GT(predicted_ms(e.out), predicted_ms(f.out)) << e.out << f.out;
  const auto s = run("simulate " + eager);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("cross-entropy         eager"), std::string::npos) << s.out;
  EXPECT_NEAR(ratio(s.out), 1.0, 0.005) << s.out;
  // Priced fused, faster than the eager plan's estimate.
  const auto as_fused = run("simulate " + eager + " --cross-entropy fused");
  ASSERT_EQ(as_fused.code, 0) << as_fused.out;
  EXPECT_EQ(as_fused.out.find("cross-entropy "), std::string::npos) << as_fused.out;
  EXPECT_LT(ratio(as_fused.out), 0.995) << as_fused.out;
  // pcgx's runtime trains it with its fused kernel, says so, and predicts that.
  const auto trained = run("run " + eager + " --steps 1 --no-report --no-plot");
  ASSERT_EQ(trained.code, 0) << trained.out;
  EXPECT_NE(trained.out.find("note: " + eager + " was planned with an eager cross-entropy (cross_entropy); the runtime runs its fused kernel"),
            std::string::npos)
      << trained.out;
}

TEST(CrossEntropyOption, APlanStatesIt) {
  const std::string kCommon = "optimize gpt-tiny --set vocab=16384 --set seq=256 --machine dgx-h100 --devices 2 --precision bf16 -q ";
  const fs::path plan = dir() / "plan.json";
  {
    std::ofstream out(plan);
    out << R"({"format": "pcgx.plan", "format_version": 1, "cross_entropy": "eager", "rules": [{"select": {}, "partition": {"samples": 2}}]})";
  }
  const auto p = run(kCommon + "--plan " + plan.string() + " -o " + (dir() / "planned.json").string());
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("cross-entropy         eager"), std::string::npos) << p.out;
  // The flag wins over the plan.
  const auto flag = run(kCommon + "--plan " + plan.string() + " --cross-entropy fused -o " + (dir() / "flag.json").string());
  ASSERT_EQ(flag.code, 0) << flag.out;
  EXPECT_EQ(flag.out.find("cross-entropy "), std::string::npos) << flag.out;
  {
    std::ofstream out(plan);
    out << R"({"format": "pcgx.plan", "format_version": 1, "cross_entropy": "apex", "rules": [{"select": {}, "partition": {"samples": 2}}]})";
  }
  const auto bad = run(kCommon + "--plan " + plan.string() + " -o " + (dir() / "bad-plan.json").string());
  expect_one_error_line(bad, "cross_entropy: expected one of fused, eager", dir() / "bad-plan.json");
}

TEST(CrossEntropyOption, AnUnknownKernelIsOneErrorLine) {
  const auto bad = run(kCommon + "--cross-entropy liger -o " + (dir() / "bad.json").string());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_EQ(bad.out, "error: --cross-entropy: unknown cross-entropy kernel 'liger' (fused, eager)\n");
  EXPECT_FALSE(fs::exists(dir() / "bad.json"));
  const std::string fused = (dir() / "for-simulate.json").string();
  ASSERT_EQ(run(kCommon + "-o " + fused).code, 0);
  const auto sim = run("simulate " + fused + " --cross-entropy liger");
  EXPECT_EQ(sim.code, 2) << sim.out;
  EXPECT_EQ(sim.out, "error: --cross-entropy: unknown cross-entropy kernel 'liger' (fused, eager)\n");
}

}  // namespace
