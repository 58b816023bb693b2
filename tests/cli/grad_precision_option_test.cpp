// --grad-precision on optimize and simulate: compute (gradients kept and
// reduced in the training precision) printed beside the precision, fewer
// gradient bytes kept, recorded, read back by simulate (which can price
// the plan with FP32 gradients instead); pcgx run keeps FP32 gradients and
// says so; a plan states it; an unknown value is one error line naming
// the choices, and no file.
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
  static const fs::path d = pcgx::testing::temp_dir("pcgx_grad_precision_test");
  return d;
}

// (The buckets after the backward pass, so that all of their time shows.)
const std::string kCommon =
    "optimize gpt-tiny --machine dgx-h100 --devices 16 --search data-parallel --precision bf16 --bucket-mb 0.05 --no-overlap-grad-reduce ";

// The gradients of a memory breakdown's first line ("  devices 0..15  1.25 GiB: weights ..., gradients 114.00 KiB, ...").
double gradients_kib(const std::string& out) {
  const size_t line = out.find("  devices 0..15 ");
  if (line == std::string::npos || out.find(" KiB,", line) == std::string::npos) return 0.0;
  const size_t at = out.find("gradients ", line);
  return at == std::string::npos ? 0.0 : std::stod(out.substr(at + 10));
}

TEST(GradPrecisionOption, ComputeIsPricedRecordedSimulatedAndPlanned) {
  const std::string half = (dir() / "half.json").string(), whole = (dir() / "whole.json").string();
  const auto h = run(kCommon + "--grad-precision compute -o " + half);
  ASSERT_EQ(h.code, 0) << h.out;
  EXPECT_NE(h.out.find("precision             bf16 (FP32 master weights and optimizer state; gradients in bf16: --grad-precision compute)\n"),
            std::string::npos)
      << h.out;
  const auto w = run(kCommon + "-o " + whole);
  ASSERT_EQ(w.code, 0) << w.out;
  EXPECT_NE(w.out.find("precision             bf16 (FP32 master weights, gradients and optimizer state)\n"), std::string::npos) << w.out;
  EXPECT_LT(predicted_ms(h.out), predicted_ms(w.out)) << h.out << w.out;
  ASSERT_GT(gradients_kib(w.out), 0) << w.out;
  EXPECT_NEAR(gradients_kib(h.out) / gradients_kib(w.out), 0.5, 0.02) << h.out << w.out;
  // The update's FP32 copies of them, as many bytes as the masters it
  // updates, are named in the breakdown; with FP32 gradients there are none.
  const size_t line = h.out.find("  devices 0..15 ");
  ASSERT_NE(line, std::string::npos) << h.out;
  const std::string breakdown = h.out.substr(line, h.out.find('\n', line) - line);
  const size_t master = breakdown.find("master "), copies = breakdown.find("the update's FP32 gradients ");
  ASSERT_NE(copies, std::string::npos) << breakdown;
  ASSERT_NE(master, std::string::npos) << breakdown;
  EXPECT_EQ(breakdown.substr(master + 7, breakdown.find(',', master) - master - 7), breakdown.substr(copies + 28)) << breakdown;
  EXPECT_EQ(w.out.find("the update's FP32 gradients"), std::string::npos) << w.out;
  {
    std::ifstream in(half);
    EXPECT_EQ(nlohmann::json::parse(in).at("grad_precision"), "compute");
  }
  const auto s = run("simulate " + half + " --bucket-mb 0.05");  // (the strategy's buckets after the backward pass)
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("gradients in bf16: --grad-precision compute"), std::string::npos) << s.out;
  EXPECT_NEAR(ratio(s.out), 1.0, 0.02) << s.out;
  const auto as_fp32 = run("simulate " + half + " --bucket-mb 0.05 --grad-precision fp32");
  ASSERT_EQ(as_fp32.code, 0) << as_fp32.out;
  EXPECT_GT(ratio(as_fp32.out), ratio(s.out)) << as_fp32.out;
  // pcgx's runtime keeps FP32 gradients and says so.
  const auto trained = run("run " + half + " --steps 1 --no-report --no-plot");
  ASSERT_EQ(trained.code, 0) << trained.out;
  EXPECT_NE(trained.out.find("note: " + half + " was planned with gradients accumulated and reduced in bf16 (grad_precision); the runtime keeps "
                                               "them in FP32"),
            std::string::npos)
      << trained.out;
  // A plan states it; the flag wins over the plan.
  // (plan show states overlap_grad_reduce false too.)
  const auto fed = pcgx::testing::plan_fed_back(half, dir(), "grad_precision", "compute",
                                                "optimize gpt-tiny --machine dgx-h100 --devices 16 --precision bf16 --bucket-mb 0.05",
                                                predicted_ms(h.out), "--grad-precision fp32");
  EXPECT_NE(fed.flagged.out.find("(FP32 master weights, gradients and optimizer state)"), std::string::npos) << fed.flagged.out;
  // Unknown values.
  const fs::path out = dir() / "bad-s.json";
  expect_one_error_line(run(kCommon + "--grad-precision bf16 -o " + out.string()), "error: --grad-precision: unknown gradient precision 'bf16' (fp32, compute, fp32-cast)", out);
  const fs::path bad_plan = dir() / "bad.json";
  std::ofstream(bad_plan) << R"({"format": "pcgx.plan", "format_version": 1, "grad_precision": "half",
                                "rules": [{"select": {}, "partition": {"samples": 16}}]})";
  expect_one_error_line(run("optimize gpt-tiny --machine dgx-h100 --devices 16 -q --plan " + bad_plan.string() + " -o " + out.string()),
                        "grad_precision: expected one of fp32, compute, fp32-cast", out);
}

// fp32-cast (DeepSpeed's BF16 optimizer): FP32 gradients as with fp32,
// and after each micro-batch's backward the BF16 ones cast and added, a
// pass the step pays and the simulator runs; both kept (1.5x fp32's
// gradient bytes); recorded and read back; pcgx run says its kernels
// accumulate FP32 themselves; a plan states it.
TEST(GradPrecisionOption, Fp32CastIsPricedRecordedSimulatedAndPlanned) {
  const std::string cast = (dir() / "cast.json").string(), whole = (dir() / "whole-cast.json").string();
  const auto c = run(kCommon + "--grad-precision fp32-cast -o " + cast);
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("precision             bf16 (FP32 master weights, gradients and optimizer state; each micro-batch's gradients "
                       "written in bf16, then cast and added to the FP32 ones: --grad-precision fp32-cast)\n"),
            std::string::npos)
      << c.out;
  const auto w = run(kCommon + "-o " + whole);
  ASSERT_EQ(w.code, 0) << w.out;
  EXPECT_GT(predicted_ms(c.out), predicted_ms(w.out)) << c.out << w.out;
  ASSERT_GT(gradients_kib(w.out), 0) << w.out;
  EXPECT_NEAR(gradients_kib(c.out) / gradients_kib(w.out), 1.5, 0.02) << c.out << w.out;
  {
    std::ifstream in(cast);
    EXPECT_EQ(nlohmann::json::parse(in).at("grad_precision"), "fp32-cast");
  }
  const auto s = run("simulate " + cast + " --bucket-mb 0.05");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("--grad-precision fp32-cast"), std::string::npos) << s.out;
  EXPECT_NEAR(ratio(s.out), 1.0, 0.02) << s.out;
  const auto trained = run("run " + cast + " --steps 1 --no-report --no-plot");
  ASSERT_EQ(trained.code, 0) << trained.out;
  EXPECT_NE(trained.out.find("(grad_precision fp32-cast); the runtime's kernels accumulate them in FP32 themselves"), std::string::npos)
      << trained.out;
  (void)pcgx::testing::plan_fed_back(cast, dir(), "grad_precision", "fp32-cast",
                                     "optimize gpt-tiny --machine dgx-h100 --devices 16 --precision bf16 --bucket-mb 0.05", predicted_ms(c.out),
                                     "--grad-precision fp32");
}

}  // namespace
