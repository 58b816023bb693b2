// --tensor-parallel T: the expert search's Megatron-style degree, as a plan
// a user runs states it; for any other search, or out of range, one error
// line naming the flags, exit code 2, no strategy written.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_tensor_parallel_test");
  return d;
}

TEST(TensorParallelOption, StatesTheExpertsDegree) {
  const std::string out = (dir() / "t.json").string();
  for (const char* t : {"1", "2", "4"}) {
    const auto r = run(std::string("optimize gpt-tiny --machine dgx-h100 --devices 4 --search expert --tensor-parallel ") + t + " -o " + out);
    ASSERT_EQ(r.code, 0) << r.out;
    // The query projection's output features split t ways (shown as /t unless 1).
    const size_t at = r.out.find("attn.query");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string row = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_EQ(row.find(std::string("/") + t + "]") != std::string::npos, std::string(t) != "1") << row;
  }
}

// With sequence parallelism auto starts from gathers (Megatron-LM keeps no
// gathered input); at t = 1 nothing is gathered, and the report says what
// the strategy records: none.
TEST(TensorParallelOption, SequenceParallelismRecomputesWhatItReports) {
  for (const char* t : {"1", "2"}) {
    const std::string out = (dir() / (std::string("sp") + t + ".json")).string();
    const auto r = run(std::string("optimize gpt-tiny --machine dgx-h100 --devices 2 --search megatron --sequence-parallel --tensor-parallel ") + t +
                       " -q -o " + out);
    ASSERT_EQ(r.code, 0) << r.out;
    const std::string policy = std::string(t) == "1" ? "none" : "gathers";
    EXPECT_NE(r.out.find("recompute             " + policy + " (auto)"), std::string::npos) << r.out;
    EXPECT_NE(run("simulate " + out).out.find("recompute             " + policy + "\n"), std::string::npos);
  }
}

TEST(TensorParallelOption, OnlyForTheExpertAndNotNegative) {
  const std::string out = (dir() / "bad.json").string();
  const auto unity = run("optimize gpt-tiny --machine dgx-h100 --devices 4 --tensor-parallel 2 -o " + out);
  EXPECT_EQ(unity.code, 2) << unity.out;
  EXPECT_EQ(unity.out.rfind("error: --tensor-parallel: states the expert or megatron search's degree (--search expert or megatron)", 0), 0u) << unity.out;
  const auto negative = run("optimize gpt-tiny --machine dgx-h100 --devices 4 --search expert --tensor-parallel -1 -o " + out);
  EXPECT_EQ(negative.code, 2) << negative.out;
  EXPECT_NE(negative.out.find("error: --tensor-parallel: must not be negative"), std::string::npos) << negative.out;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
