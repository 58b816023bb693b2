// Recomputation per operator through the binary: `optimize --recompute
// operators --recompute-operators PATTERNS`, or a plan's
// "recompute_operators"; the strategy file records the names the patterns
// stand for, `run` trains it, `plan show` states them again, and a pattern
// naming nothing, or the option without its policy, is one error line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_recompute_operators_test");
  return d;
}

nlohmann::json read(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

const std::vector<std::string> kFeedForward{"block0.mlp.ffn_output", "block0.mlp.intermediate", "block1.mlp.ffn_output", "block1.mlp.intermediate"};

TEST(RecomputeOperatorsCommand, TheFlagsNameThemTheStrategyRecordsThemRunTrainsThem) {
  const std::string s = (dir() / "ops.json").string();
  const auto r = run("optimize gpt-tiny --machine cpu-host --devices 2 --search data-parallel --recompute operators "
                     "--recompute-operators 'block*.mlp.*' -q -o " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("recompute             operators"), std::string::npos) << r.out;
  const auto j = read(s);
  EXPECT_EQ(j["recompute"], "operators");
  std::vector<std::string> names = j["recompute_operators"].get<std::vector<std::string>>();
  for (const std::string& n : kFeedForward) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  const auto t = run("run " + s + " --steps 2 --no-report --no-plot");
  EXPECT_EQ(t.code, 0) << t.out;
  // plan show states them; fed back, the same names and prediction.
  const std::string p = (dir() / "ops.plan.json").string(), back = (dir() / "back.json").string();
  const auto show = run("plan show " + s + " -o " + p);
  ASSERT_EQ(show.code, 0) << show.out;
  EXPECT_EQ(read(p)["recompute_operators"].get<std::vector<std::string>>(), names);
  const auto again = run("optimize gpt-tiny --machine cpu-host --devices 2 --plan " + p + " -q -o " + back);
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(read(back)["recompute_operators"].get<std::vector<std::string>>(), names);
  EXPECT_DOUBLE_EQ(read(back)["predicted"]["time"].get<double>(), j["predicted"]["time"].get<double>());
}

// Pipeline stages: each stage's search sees the model's names (its
// pieces too), no named operator is read across stages, and the runtime
// runs the schedule.
TEST(RecomputeOperatorsCommand, PipelineStagesRecomputeTheirOwn) {
  const std::string s = (dir() / "pipe.json").string();
  const auto r = run("optimize gpt-tiny --machine cpu-host --devices 4 --pipeline --stages 2 --micro-batches 2 --recompute operators "
                     "--recompute-operators 'block*.mlp.*,block*.ln*' -q -o " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(read(s)["recompute"], "operators");
  const auto t = run("run " + s + " --steps 2 --no-report --no-plot");
  EXPECT_EQ(t.code, 0) << t.out;
  const auto sim = run("simulate " + s);
  EXPECT_EQ(sim.code, 0) << sim.out;
  // A stage's boundary (read by the next stage) is never recomputed:
  // named alone, one error line, nothing written.
  const std::string b = (dir() / "boundary.json").string();
  const auto boundary = run("optimize gpt-tiny --machine cpu-host --devices 2 --pipeline --stages 2 --micro-batches 2 --search data-parallel "
                            "--recompute-operators block0.mlp_residual -q -o " + b);
  EXPECT_EQ(boundary.code, 2) << boundary.out;
  EXPECT_NE(boundary.out.find("error: --recompute-operators: none of the operators named is recomputed in the plan found"), std::string::npos)
      << boundary.out;
  EXPECT_FALSE(fs::exists(b));
}

TEST(RecomputeOperatorsCommand, MistakesAreOneErrorLine) {
  const std::string o = " -q -o " + (dir() / "bad.json").string();
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"--recompute operators", "error: --recompute-operators: required with recompute operators"},
           {"--recompute operators --recompute-operators 'nothing*'", "error: --recompute-operators: 'nothing*' names no operator of gpt-tiny"},
           {"--recompute operators --recompute-operators loss", "error: --recompute-operators: 'loss' names "},
           {"--recompute full --recompute-operators 'block*'", "error: --recompute-operators: applies to recompute operators"}}) {
    const auto r = run("optimize gpt-tiny --machine cpu-host --devices 2 " + args + o);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << args << "\n" << r.out;
    EXPECT_FALSE(fs::exists(dir() / "bad.json")) << args;
  }
  // Named without --recompute: recompute those.
  const std::string implied = (dir() / "implied.json").string();
  const auto i = run("optimize gpt-tiny --machine cpu-host --devices 2 --search data-parallel --recompute-operators 'block*.mlp.*' -q -o " + implied);
  ASSERT_EQ(i.code, 0) << i.out;
  EXPECT_EQ(read(implied)["recompute"], "operators");
  // A plan's pattern naming nothing is the plan's error.
  const std::string plan = (dir() / "bad.plan.json").string();
  {
    std::ofstream out(plan);
    out << R"({"format": "pcgx.plan", "format_version": 1, "recompute": "operators", "recompute_operators": ["nothing*"],
              "rules": [{"select": {}, "partition": {"samples": 2}}]})";
  }
  const auto p = run("optimize gpt-tiny --machine cpu-host --devices 2 --plan " + plan + o);
  EXPECT_EQ(p.code, 2) << p.out;
  EXPECT_NE(p.out.find("error: " + plan + ": recompute_operators: 'nothing*' names no operator of gpt-tiny"), std::string::npos) << p.out;
  // simulate cannot name operators a strategy does not.
  const std::string s = (dir() / "none.json").string();
  ASSERT_EQ(run("optimize gpt-tiny --machine cpu-host --devices 2 --search data-parallel -q -o " + s).code, 0);
  const auto sim = run("simulate " + s + " --recompute operators");
  EXPECT_EQ(sim.code, 2) << sim.out;
  EXPECT_NE(sim.out.find("error: --recompute: operators: the strategy names no operators to recompute"), std::string::npos) << sim.out;
}

}  // namespace
