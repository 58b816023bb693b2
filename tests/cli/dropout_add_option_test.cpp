// --dropout-add on optimize and simulate: fused printed by optimize with
// how many dropouts run in their sums' pass, recorded, read back by
// simulate (which can price the plan eager instead), faster than eager;
// pcgx run trains it as two kernels and says so; a plan states it; an
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
using pcgx::testing::run_predicted_ms;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_dropout_add_test");
  return d;
}

const std::string kCommon = "optimize gpt-tiny --set seq=256 --machine dgx-h100 --devices 2 --search data-parallel --precision bf16 -q ";

TEST(DropoutAddOption, FusedIsPricedRecordedAndSimulated) {
  const std::string fused = (dir() / "fused.json").string(), eager = (dir() / "eager.json").string();
  const auto f = run(kCommon + "--dropout-add fused -o " + fused);
  ASSERT_EQ(f.code, 0) << f.out;
  EXPECT_NE(f.out.find("dropout-add           fused (4 dropouts in their sums' pass)\n"), std::string::npos) << f.out;
  const auto e = run(kCommon + "-o " + eager);
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_EQ(e.out.find("dropout-add "), std::string::npos) << e.out;
  EXPECT_LT(predicted_ms(f.out), predicted_ms(e.out)) << f.out << e.out;
  const auto s = run("simulate " + fused);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("dropout-add           fused (4 dropouts"), std::string::npos) << s.out;
  EXPECT_NEAR(ratio(s.out), 1.0, 0.005) << s.out;
  // Priced eager, slower than the fused plan's estimate.
  const auto as_eager = run("simulate " + fused + " --dropout-add eager");
  ASSERT_EQ(as_eager.code, 0) << as_eager.out;
  EXPECT_EQ(as_eager.out.find("dropout-add "), std::string::npos) << as_eager.out;
  EXPECT_GT(ratio(as_eager.out), 1.0) << as_eager.out;
  // pcgx's runtime trains it as two kernels, says so, and predicts that:
  // the eager plan's step.
  const auto trained = run("run " + fused + " --steps 1 --no-report --no-plot");
  ASSERT_EQ(trained.code, 0) << trained.out;
  EXPECT_NE(trained.out.find("note: " + fused + " was planned with each dropout fused with the sum reading it (dropout_add); the runtime runs "
                                                "them as two kernels"),
            std::string::npos)
      << trained.out;
  const auto as_planned_eager = run("run " + eager + " --steps 1 --no-report --no-plot");
  ASSERT_EQ(as_planned_eager.code, 0) << as_planned_eager.out;
  EXPECT_EQ(as_planned_eager.out.find("(dropout_add)"), std::string::npos) << as_planned_eager.out;
  EXPECT_GT(run_predicted_ms(trained.out), 0) << trained.out;
  EXPECT_EQ(run_predicted_ms(trained.out), run_predicted_ms(as_planned_eager.out)) << trained.out << as_planned_eager.out;
}

TEST(DropoutAddOption, APlanStatesIt) {
  const std::string kPlanned = "optimize gpt-tiny --set seq=256 --machine dgx-h100 --devices 2 --precision bf16 -q ";
  const fs::path plan = dir() / "plan.json";
  {
    std::ofstream out(plan);
    out << R"({"format": "pcgx.plan", "format_version": 1, "dropout_add": "fused", "rules": [{"select": {}, "partition": {"samples": 2}}]})";
  }
  const auto p = run(kPlanned + "--plan " + plan.string() + " -o " + (dir() / "planned.json").string());
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("dropout-add           fused"), std::string::npos) << p.out;
  // The flag wins over the plan.
  const auto flag = run(kPlanned + "--plan " + plan.string() + " --dropout-add eager -o " + (dir() / "flag.json").string());
  ASSERT_EQ(flag.code, 0) << flag.out;
  EXPECT_EQ(flag.out.find("dropout-add "), std::string::npos) << flag.out;
  // A found strategy's plan states it.
  const auto shown = run("plan show " + (dir() / "planned.json").string());
  ASSERT_EQ(shown.code, 0) << shown.out;
  EXPECT_NE(shown.out.find("\"dropout_add\": \"fused\""), std::string::npos) << shown.out;
  {
    std::ofstream out(plan);
    out << R"({"format": "pcgx.plan", "format_version": 1, "dropout_add": "apex", "rules": [{"select": {}, "partition": {"samples": 2}}]})";
  }
  const auto bad = run(kPlanned + "--plan " + plan.string() + " -o " + (dir() / "bad-plan.json").string());
  expect_one_error_line(bad, "dropout_add: expected one of eager, fused", dir() / "bad-plan.json");
}

TEST(DropoutAddOption, AnUnknownKernelIsOneErrorLine) {
  const auto bad = run(kCommon + "--dropout-add apex -o " + (dir() / "bad.json").string());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_EQ(bad.out, "error: --dropout-add: unknown dropout-add kernel 'apex' (eager, fused)\n");
  EXPECT_FALSE(fs::exists(dir() / "bad.json"));
  const std::string eager = (dir() / "for-simulate.json").string();
  ASSERT_EQ(run(kCommon + "-o " + eager).code, 0);
  const auto sim = run("simulate " + eager + " --dropout-add apex");
  EXPECT_EQ(sim.code, 2) << sim.out;
  EXPECT_EQ(sim.out, "error: --dropout-add: unknown dropout-add kernel 'apex' (eager, fused)\n");
}

}  // namespace
