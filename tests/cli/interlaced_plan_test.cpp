// SuperScaler's interlaced pipeline as a plan states it (docs/plans.md,
// "Interlaced pipelines"): chunks every stage runs together, on every
// device. The shipped example trains to data parallelism's losses with
// the bytes it predicts, under 1f1b and gpipe; the cost model (the steps'
// makespan) and the simulator agree; plan show writes it back and it is
// priced the same; mistakes are one error line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "cli/plan_test_helpers.h"
#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::expect_bytes_as_predicted;
using pcgx::testing::expect_one_error_line;
using pcgx::testing::predicted_ms;
using pcgx::testing::run;
using pcgx::testing::trains_like;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_interlaced_plan_test");
  return d;
}

const std::string kPlan = std::string(PCGX_SOURCE_DIR) + "/data/plans/gpt-interlaced-4.json";

nlohmann::json shipped() { return nlohmann::json::parse(std::ifstream(kPlan)); }

fs::path written(const std::string& name, const nlohmann::json& plan) {
  const fs::path p = dir() / name;
  std::ofstream(p) << plan.dump();
  return p;
}

TEST(InterlacedPlan, TrainsAsDataParallelismUnderEverySchedule) {
  expect_bytes_as_predicted(trains_like("gpt-tiny --plan " + kPlan + " --devices 4 --batch 8", "gpt-tiny --devices 4 --batch 8"));
  nlohmann::json gpipe = shipped();
  gpipe["pipeline"]["schedule"] = "gpipe";
  trains_like("gpt-tiny --plan " + written("gpipe.json", gpipe).string() + " --devices 4 --batch 8", "gpt-tiny --devices 4 --batch 8");
}

TEST(InterlacedPlan, PricedAsItsStepsAndSimulatedAlike) {
  const fs::path out = dir() / "interlaced.json";
  const auto r = run("optimize gpt-tiny --plan " + kPlan + " --machine dgx-h100 --devices 4 -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("  interlaced          chunks 0 and 3 on every device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  stage every  devices 0..3  4 operators (wte .. emb_dropout)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  stage 2  devices 2..3  25 operators (block1.ln1 .. block1.mlp_residual)"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(std::ifstream(out));
  EXPECT_EQ(j.at("pipeline").at("interlaced"), nlohmann::json::array({0, 3}));
  // The simulator runs the joint steps task by task, each holding every
  // device: within 5% of the makespan priced (the same plan with its
  // embeddings in the first stage and its head in the last agrees as
  // closely: docs/plans.md).
  const auto sim = run("simulate " + out.string());
  ASSERT_EQ(sim.code, 0) << sim.out;
  const size_t at = sim.out.find("iteration time");
  ASSERT_NE(at, std::string::npos) << sim.out;
  const double simulated = std::stod(sim.out.substr(sim.out.find_first_of("0123456789", at)));
  EXPECT_NEAR(simulated / predicted_ms(r.out), 1.0, 0.05) << sim.out;
  // plan show writes the interlaced chunks and where each chunk ends; fed
  // back, the plan is priced the same.
  const fs::path shown = dir() / "shown.json";
  ASSERT_EQ(run("plan show " + out.string() + " -o " + shown.string()).code, 0);
  const auto plan = nlohmann::json::parse(std::ifstream(shown));
  EXPECT_EQ(plan.at("pipeline").at("interlaced"), nlohmann::json::array({0, 3}));
  EXPECT_EQ(plan.at("pipeline").at("boundaries"), nlohmann::json::array({"emb_dropout", "block0.mlp_residual", "block1.mlp_residual"}));
  const auto again = run("optimize gpt-tiny --plan " + shown.string() + " --machine dgx-h100 --devices 4 -o " + (dir() / "again.json").string());
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_DOUBLE_EQ(predicted_ms(again.out), predicted_ms(r.out));
}

// A written order: joint steps in every stage's program, run as written;
// one the runtime cannot run (another micro-batch's backward between a
// stage's two adjacent chunks) is one error line, and so is an order whose
// joint steps the stages run in different orders (a deadlock).
TEST(InterlacedPlan, WrittenOrdersAreRunOrRefused) {
  nlohmann::json plan = shipped();
  plan["pipeline"]["micro_batches"] = 2;
  plan["pipeline"]["programs"] = {"F0@0 F0@1 F1@0 F1@1 F0@3 B0@3 B0@1 B0@0 F1@3 B1@3 B1@1 B1@0",
                                  "F0@0 F0@2 F1@0 F0@3 B0@3 B0@2 B0@0 F1@2 F1@3 B1@3 B1@2 B1@0"};
  trains_like("gpt-tiny --plan " + written("order.json", plan).string() + " --devices 4 --batch 8", "gpt-tiny --devices 4 --batch 8");
  plan["pipeline"]["programs"] = {"F0@0 F0@1 F1@0 F1@1 F0@3 B0@3 F1@3 B1@3 B0@1 B1@1 B0@0 B1@0",
                                  "F0@0 F0@2 F1@0 F0@3 B0@3 F1@2 F1@3 B1@3 B0@2 B1@2 B0@0 B1@0"};
  const auto between = run("run gpt-tiny --plan " + written("between.json", plan).string() + " --devices 4 --batch 8 --steps 1 --no-report --no-plot");
  EXPECT_EQ(between.code, 2) << between.out;
  EXPECT_NE(between.out.find("error: pipeline: stage 0 runs the backward of micro-batch 1 through chunk 1 after the backward of micro-batch 0 "
                             "through chunk 1"),
            std::string::npos)
      << between.out;
  plan["pipeline"]["programs"] = {"F0@0 F0@1 F1@0 F1@1 F0@3 B0@3 B0@1 B0@0 F1@3 B1@3 B1@1 B1@0",
                                  "F0@0 F0@2 F0@3 B0@3 F1@0 B0@2 B0@0 F1@2 F1@3 B1@3 B1@2 B1@0"};
  const fs::path out = dir() / "dead-s.json";
  expect_one_error_line(run("optimize gpt-tiny --plan " + written("dead.json", plan).string() + " --machine dgx-h100 --devices 4 -o " +
                            out.string()),
                        "pipeline.programs: pipeline schedule deadlocks: stage 0 waits at the forward of micro-batch 1 through chunk 0 for "
                        "stage 1 to run it too",
                        out);
}

TEST(InterlacedPlan, MistakesAreOneErrorLine) {
  const fs::path out = dir() / "bad-s.json";
  auto refused = [&](const std::string& name, const nlohmann::json& plan, const std::string& text) {
    SCOPED_TRACE(name);
    expect_one_error_line(run("optimize gpt-tiny --plan " + written(name, plan).string() + " --machine dgx-h100 --devices 4 -o " + out.string()),
                          text, out);
  };
  nlohmann::json plan = shipped();
  plan["pipeline"]["interlaced"] = {0, 4};
  refused("past.json", plan, "pipeline.interlaced: pipeline schedule: interlaced chunk 4 of 4 chunks");
  plan["pipeline"]["interlaced"] = {3, 0};
  refused("order.json", plan, "pipeline.interlaced: pipeline schedule: interlaced chunks not ascending");
  plan["pipeline"]["interlaced"] = {1};
  refused("middle.json", plan, "chunk 1 of 3 is neither the first nor the last: state where the chunks end (boundaries)");
  plan["pipeline"]["interlaced"] = "first";
  refused("type.json", plan, "pipeline.interlaced: expected an array of chunk indices");
  // An interlaced chunk whose operator runs on one stage's devices only:
  // found once the chunk is lowered and placed, within a second, so
  // optimize's header ("optimizing ...") is not printed before the error.
  plan = shipped();
  plan["rules"].push_back({{"select", {{"name", "emb_dropout"}}}, {"partition", nlohmann::json::object()}});
  // The error names the stage's devices and the rule that decided it.
  const auto one = run("optimize gpt-tiny --plan " + written("one-stage.json", plan).string() + " --machine dgx-h100 --devices 4 -o " + out.string());
  expect_one_error_line(one,
                        "one-stage.json: pipeline: no feasible pipelined strategy (2 stages, 4 micro-batches: interlaced chunk 0: node 18 'emb_dropout' (Dropout) "
                        "runs on stage 1's devices (0..1) only", out);
  EXPECT_NE(one.out.find("; rules[" + std::to_string(plan["rules"].size() - 1) + "] selects it)"), std::string::npos) << one.out;
  // One no rule selects (the embeddings' sum, its rule "emb_*" dropped)
  // runs as one task on one stage: refused, saying so.
  plan = shipped();
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& rule : plan["rules"])
    if (rule["select"].value("name", "") != "emb_*") kept.push_back(rule);
  ASSERT_EQ(kept.size() + 1, plan["rules"].size());
  plan["rules"] = kept;
  expect_one_error_line(run("optimize gpt-tiny --plan " + written("unselected.json", plan).string() + " --machine dgx-h100 --devices 4 -o " + out.string()),
                        "'emb_add' (EwAdd) runs on stage 1's devices (0..1) only: an interlaced chunk's operators run on several stages' (more tasks "
                        "than a stage has devices); no rule selects it)", out);
  // ZeRO's weights gathered beside the forward pass: not modelled with
  // interlaced chunks, refused by optimize (naming the flag) and by
  // simulate.
  expect_one_error_line(run("optimize gpt-tiny --plan " + kPlan + " --machine dgx-h100 --devices 4 --zero 1 --overlap-param-gather -o " + out.string()),
                        "error: --overlap-param-gather: ZeRO's weights gathered beside the forward pass are not modelled with interlaced chunks", out);
  const fs::path zero1 = dir() / "interlaced-zero1.json";
  ASSERT_EQ(run("optimize gpt-tiny --plan " + kPlan + " --machine dgx-h100 --devices 4 --zero 1 -q -o " + zero1.string()).code, 0);
  const auto sim = run("simulate " + zero1.string() + " --overlap-param-gather on");
  EXPECT_EQ(sim.code, 2) << sim.out;
  EXPECT_NE(sim.out.find("error: simulate: ZeRO's weights gathered beside the forward pass (overlap_param_gather) are not modelled with "
                         "interlaced chunks (simulate with --overlap-param-gather off)\n"), std::string::npos) << sim.out;
}

// The operators a plan with interlaced chunks leaves unstated, searched
// by unity ("unstated": "search"): here all but the embedding tables. The
// layers are searched on their stages' devices; an interlaced chunk's
// operators on every device, each spanning several stages (a mapping that
// leaves one on a stage's devices is infeasible, and the micro-batch's 2
// samples do not split 4 ways, so the search starts from the rest spread
// over every device). The plan found trains to data parallelism's losses
// and its plan, shown and fed back, is priced the same.
TEST(InterlacedPlan, TheUnstatedRestIsSearched) {
  nlohmann::json plan = shipped();
  plan["rules"] = nlohmann::json::array({{{"select", {{"name", "w?e"}, {"op", "Embedding"}}}, {"partition", {{"rows", 4}}}}});
  plan["unstated"] = "search";
  const fs::path found = dir() / "searched.json", shown = dir() / "searched-plan.json", again = dir() / "searched-again.json";
  const std::string machine = " --machine dgx-h100 --devices 4";
  const auto r = run("optimize gpt-tiny --plan " + written("unstated.json", plan).string() + machine + " -o " + found.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("  stage every  devices 0..3  4 operators (wte .. emb_dropout)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  stage every  devices 0..3  4 operators (ln_f .. loss)"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(found)).at("pipeline").at("interlaced"), nlohmann::json::array({0, 3}));
  const fs::path dp = dir() / "searched-dp.json";
  ASSERT_EQ(run("optimize gpt-tiny --search data-parallel" + machine + " -q -o " + dp.string()).code, 0);
  auto losses = [](const std::string& strategy) {
    const auto t = run("run " + strategy + " --steps 3 --no-report --no-plot");
    EXPECT_EQ(t.code, 0) << t.out;
    std::smatch m;
    const std::string line = pcgx::testing::loss_line(t.out);
    EXPECT_TRUE(std::regex_search(line, m, std::regex("([0-9.]+) -> ([0-9.]+)"))) << t.out;
    return std::make_pair(std::stod(m[1]), std::stod(m[2]));
  };
  const auto [first, last] = losses(found.string());
  const auto [dp_first, dp_last] = losses(dp.string());
  EXPECT_NEAR(first, dp_first, 1e-4);
  EXPECT_NEAR(last, dp_last, 1e-4);
  ASSERT_EQ(run("plan show " + found.string() + " -o " + shown.string()).code, 0);
  const auto back = run("optimize gpt-tiny --plan " + shown.string() + machine + " -q -o " + again.string());
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_EQ(predicted_ms(back.out), predicted_ms(r.out)) << r.out << back.out;
}

// Recomputation inside every chunk, the interlaced ones too (their joint
// backward steps re-run what they recompute on every device): the same
// losses, and the simulator agrees with the prediction. A conversion
// reading another chunk's tensor, and a layout change a kept tensor cuts,
// stay kept (pcg/recompute_plan.h).
TEST(InterlacedPlan, RecomputesAsEveryPlanDoes) {
  for (const std::string recompute : {"full", "selective", "full+selective --recompute-layers 1"}) {
    SCOPED_TRACE(recompute);
    const fs::path out = dir() / "recompute.json";
    const auto o = run("optimize gpt-tiny --plan " + kPlan + " --recompute " + recompute + " --machine cpu-host --devices 4 -o " + out.string());
    ASSERT_EQ(o.code, 0) << o.out;
    const size_t at = o.out.find("simulated             ");
    ASSERT_NE(at, std::string::npos) << o.out;
    EXPECT_NEAR(std::stod(o.out.substr(at + 22)) / predicted_ms(o.out), 1.0, 0.05) << o.out;
    // (The bytes counted as the runtime's chunks recompute them.)
    expect_bytes_as_predicted(trains_like(out.string(), "gpt-tiny --devices 4 --batch 8"));
  }
}

}  // namespace
