// --schedule FILE on run and simulate: a pipelined strategy run under a
// stage order a person wrote (data/schedules/); one that deadlocks is one
// error line printing its cycle, exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/plan_test_helpers.h"
#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::ratio;
using pcgx::testing::run;

const std::string kSchedules = std::string(PCGX_SOURCE_DIR) + "/data/schedules/";

fs::path pipelined() {
  static const fs::path s = [] {
    const fs::path out = pcgx::testing::temp_dir("pcgx_schedule_file_test") / "pp.json";
    const auto r = run("optimize gpt-tiny --machine dgx-h100 --devices 4 --pipeline --stages 2 --micro-batches 4 --search data-parallel -q -o " +
                       out.string());
    EXPECT_EQ(r.code, 0) << r.out;
    return out;
  }();
  return s;
}

std::string last_loss(const std::string& out) {
  const size_t at = out.rfind("loss ");
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

TEST(ScheduleFile, AnOrderAsWrittenTrainsAndSimulates) {
  const auto sim = run("simulate " + pipelined().string() + " --schedule " + kSchedules + "three-forwards-2x4.txt");
  ASSERT_EQ(sim.code, 0) << sim.out;
  EXPECT_NE(sim.out.find("explicit schedule"), std::string::npos) << sim.out;
  // The strategy's chunks priced in the order written, beside what the
  // search priced in its own (1F1B).
  EXPECT_NE(sim.out.find("(the search's estimate of its stages in this order: "), std::string::npos) << sim.out;
  EXPECT_NE(sim.out.find("; in its own order "), std::string::npos) << sim.out;
  EXPECT_NEAR(ratio(sim.out), 1.0, 0.05) << sim.out;
  const auto own_sim = run("simulate " + pipelined().string());
  ASSERT_EQ(own_sim.code, 0) << own_sim.out;
  EXPECT_NE(own_sim.out.find("(the search's estimate: "), std::string::npos) << own_sim.out;
  // A file without its chunks' times (written before they were kept):
  // the ratio is to the strategy's own order's estimate, and says so.
  nlohmann::json j;
  {
    std::ifstream in(pipelined());
    j = nlohmann::json::parse(in);
  }
  ASSERT_TRUE(j["pipeline"].contains("chunks"));
  j["pipeline"].erase("chunks");
  const fs::path old = pipelined().parent_path() / "pp-without-chunks.json";
  std::ofstream(old) << j.dump();
  const auto unpriced = run("simulate " + old.string() + " --schedule " + kSchedules + "three-forwards-2x4.txt");
  ASSERT_EQ(unpriced.code, 0) << unpriced.out;
  EXPECT_NE(unpriced.out.find("(the search's estimate under the strategy's own schedule: "), std::string::npos) << unpriced.out;
  // Another recipe too: the chunks' times are the strategy's recipe's.
  const auto other = run("simulate " + pipelined().string() + " --precision bf16 --schedule " + kSchedules + "three-forwards-2x4.txt");
  ASSERT_EQ(other.code, 0) << other.out;
  EXPECT_NE(other.out.find("(the search's estimate under the strategy's own recipe and schedule: "), std::string::npos) << other.out;
  const auto own = run("run " + pipelined().string() + " --steps 3 --no-report --no-plot");
  const auto written = run("run " + pipelined().string() + " --steps 3 --no-report --no-plot --schedule " + kSchedules + "three-forwards-2x4.txt");
  ASSERT_EQ(written.code, 0) << written.out;
  EXPECT_FALSE(last_loss(own.out).empty()) << own.out;
  EXPECT_EQ(last_loss(written.out), last_loss(own.out));  // the same sums in the same order
}

TEST(ScheduleFile, ADeadlockIsOneErrorLineWithItsCycle) {
  for (const char* cmd : {"simulate ", "run "}) {
    const auto r = run(cmd + pipelined().string() + " --schedule " + kSchedules + "deadlock-2x4.txt");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_EQ(r.out.rfind("error: --schedule: pipeline schedule deadlocks: stage 0 waits at the backward of micro-batch 0 through chunk 0", 0), 0u)
        << r.out;
    EXPECT_NE(r.out.find("-> stage 0\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  }
  const auto missing = run("simulate " + pipelined().string() + " --schedule nonesuch");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.out.find("--schedule"), std::string::npos) << missing.out;
}

}  // namespace
