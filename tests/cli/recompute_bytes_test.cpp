// The bytes a recomputing plan sends between devices, through the binary:
// optimize's prediction, simulate's and what `pcgx run` predicts and
// measures are one figure, the re-runs' collectives and messages included
// (pcg/step_communication.h's recompute_step_bytes): sequence
// parallelism's gathers again, a tensor-parallel layer's all-reduces
// again, and under a pipeline schedule the re-runs' collectives alone (a
// re-run task reads the inputs it received), with a count of layers per
// chunk, and one stage accumulating over micro-batches.
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
using pcgx::testing::per_step_figure;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_recompute_bytes_test");
  return d;
}

TEST(RecomputeBytes, OptimizeSimulateAndRunCountTheReRunsAlike) {
  struct Case {
    std::string name, flags, policy;
  };
  const std::vector<Case> cases{
      {"gathers", "--devices 2 --search expert --tensor-parallel 2 --sequence-parallel", "gathers"},
      {"full-tp", "--devices 2 --search megatron --tensor-parallel 2", "full"},
      {"full-pipelined", "--devices 4 --search megatron --tensor-parallel 2 --pipeline-parallel 2 --micro-batches 4", "full"},
      // A count per chunk (the plan made with the chunks).
      {"layer-pipelined", "--devices 4 --search megatron --tensor-parallel 2 --pipeline-parallel 2 --micro-batches 4", "full --recompute-layers 1"},
      {"full-gathers", "--devices 2 --search megatron --tensor-parallel 2 --sequence-parallel", "full+gathers --recompute-layers 1"},
      // One stage accumulating over micro-batches: each re-runs.
      {"full-accumulating", "--devices 2 --search megatron --tensor-parallel 2 --micro-batches 2", "full"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string s = (dir() / (c.name + ".json")).string(), kept = (dir() / (c.name + "-none.json")).string();
    const std::string report = (dir() / (c.name + "-run.json")).string();
    const auto o = run("optimize gpt-tiny --machine dgx-h100 " + c.flags + " --recompute " + c.policy + " -q -o " + s);
    ASSERT_EQ(o.code, 0) << o.out;
    const std::string predicted = per_step_figure(o.out, "  between devices     ");
    ASSERT_FALSE(predicted.empty()) << o.out;
    // The re-runs send something: the same plan keeping everything sends less.
    const auto none = run("optimize gpt-tiny --machine dgx-h100 " + c.flags + " --recompute none -q -o " + kept);
    ASSERT_EQ(none.code, 0) << none.out;
    EXPECT_NE(per_step_figure(none.out, "  between devices     "), predicted) << none.out;
    const auto sim = run("simulate " + s);
    ASSERT_EQ(sim.code, 0) << sim.out;
    EXPECT_EQ(per_step_figure(sim.out, "  between devices     "), predicted) << sim.out;
    const auto r = run("run " + s + " --steps 2 --no-plot --report " + report);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(per_step_figure(r.out, "between devices       "), predicted) << r.out;
    std::ifstream in(report);
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j.at("bytes_per_step").get<double>(), j.at("predicted_bytes_per_step").get<double>());
  }
}

}  // namespace
