// `pcgx simulate`: prints the simulated iteration and its terms, writes a
// trace that parses; bad input is one error line and exit code 2.
#include <gtest/gtest.h>

#include <regex>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/plan_test_helpers.h"
#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::ratio;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_simulate_test");
  return d;
}

std::string strategy() {
  static const std::string s = [] {
    const std::string path = (dir() / "dp.json").string();
    const auto r = run("optimize mlp-tiny --machine dgx-h100 --devices 8 --search data-parallel -q -o " + path);
    EXPECT_EQ(r.code, 0) << r.out;
    return path;
  }();
  return s;
}

TEST(SimulateCommand, PrintsTheIterationAndWritesATrace) {
  const std::string trace = (dir() / "trace.json").string();
  const auto r = run("simulate " + strategy() + " --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* line : {"ms simulated", "the search's estimate", "along the critical path", "gradient sync", "longest tasks"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  std::ifstream in(trace);
  const auto j = nlohmann::json::parse(in);
  int complete = 0;
  for (const auto& e : j.at("traceEvents")) complete += e.at("ph") == "X";
  EXPECT_GT(complete, 8);
}

// mcmc's prediction is its simulation: pcgx simulate reads it back at ratio 1.
TEST(SimulateCommand, AnMcmcStrategySimulatesAtItsPrediction) {
  const std::string s = (dir() / "mcmc.json").string();
  const auto o = run("optimize mlp-tiny --machine dgx-h100 --devices 4 --search mcmc --proposals 100 --seed 3 -q -o " + s);
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("predicted (simulated)"), std::string::npos) << o.out;
  const auto r = run("simulate " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ratio 1.00)"), std::string::npos) << r.out;
  const auto bad = run("optimize mlp-tiny --machine dgx-h100 --devices 4 --search mcmc --proposals 0 -o " + s);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--proposals"), std::string::npos) << bad.out;
}

// unity chooses among its best and the baselines by simulation, and says
// so; --rank estimate keeps the DP's choice.
TEST(SimulateCommand, OptimizeRanksTheFinalistsBySimulation) {
  const std::string out = (dir() / "u.json").string();
  const auto r = run("optimize mlp-tiny --machine dgx-h100 --devices 8 --budget 4 -q -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("chosen by simulation  search "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data parallel "), std::string::npos) << r.out;
  const auto e = run("optimize mlp-tiny --machine dgx-h100 --devices 8 --budget 4 --rank estimate -q -o " + out);
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_EQ(e.out.find("chosen by simulation"), std::string::npos) << e.out;
  const auto bad = run("optimize mlp-tiny --machine dgx-h100 --devices 8 --rank fastest -o " + out);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --rank: unknown ranking 'fastest' (simulation, estimate)"), std::string::npos) << bad.out;
}

// --search autoddl writes a strategy that simulates; --evaluations bounds it.
TEST(SimulateCommand, AutoddlStrategySimulates) {
  const std::string out = (dir() / "ddl.json").string();
  const auto r = run("optimize mlp-tiny --machine dgx-h100 --devices 4 --search autoddl --evaluations 60 -q -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("search                autoddl ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("60 evaluated"), std::string::npos) << r.out;
  const auto s = run("simulate " + out);
  EXPECT_EQ(s.code, 0) << s.out;
  const auto bad = run("optimize mlp-tiny --machine dgx-h100 --devices 4 --search autoddl --evaluations 0 -o " + out);
  EXPECT_EQ(bad.code, 2) << bad.out;
}

// --precision: optimize prices, counts and records it; simulate reads it
// from the strategy (the same iteration, ratio 1 on one device); a
// precision pcgx does not know, or one the machine gives no figure for, is
// one error line naming the flag.
TEST(SimulateCommand, PrecisionIsPricedRecordedAndSimulated) {
  const std::string tf32 = (dir() / "tf32.json").string(), bf16 = (dir() / "bf16.json").string();
  const auto t = run("optimize mlp-tiny --machine dgx-a100 --devices 1 --search data-parallel -q -o " + tf32);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("precision             tf32\n"), std::string::npos) << t.out;
  const auto b = run("optimize mlp-tiny --machine dgx-a100 --devices 1 --search data-parallel --precision bf16 -q -o " + bf16);
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("precision             bf16 (FP32 master weights"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("  device 0            "), std::string::npos) << b.out;
  EXPECT_NE(b.out.find(": weights "), std::string::npos) << b.out;
  const auto s = run("simulate " + bf16);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("precision             bf16\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("ratio 1.00)"), std::string::npos) << s.out;
  // The runtime trains it in its precision (tests/runtime/mixed_precision_test.cpp
  // checks the arithmetic), and records it; --precision trains it in another,
  // saying so, and rejects what it does not know.
  const std::string report = (dir() / "bf16-run.json").string();
  const auto train = run("run " + bf16 + " --steps 3 --no-plot --report " + report);
  ASSERT_EQ(train.code, 0) << train.out;
  EXPECT_NE(train.out.find("precision             bf16: activations and weight copies rounded to it"), std::string::npos) << train.out;
  std::ifstream in(report);
  EXPECT_EQ(nlohmann::json::parse(in).at("precision"), "bf16");
  const auto fp16 = run("run " + bf16 + " --steps 3 --no-plot --no-report --precision fp16");
  ASSERT_EQ(fp16.code, 0) << fp16.out;
  EXPECT_NE(fp16.out.find("was planned in bf16; training in fp16 as --precision says"), std::string::npos) << fp16.out;
  EXPECT_NE(fp16.out.find("loss scaling          0 steps skipped on overflow, final scale 65536"), std::string::npos) << fp16.out;
  const auto bad = run("run mlp-tiny --steps 1 --no-plot --no-report --precision half");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --precision: unknown precision 'half' (fp32, tf32, bf16, fp16)"), std::string::npos) << bad.out;
  const auto fp8 = run("optimize mlp-tiny --machine dgx-a100 --precision fp8 -o " + bf16);
  EXPECT_EQ(fp8.code, 2) << fp8.out;
  EXPECT_NE(fp8.out.find("error: --precision: unknown precision 'fp8' (auto, fp32, tf32, bf16, fp16)"), std::string::npos) << fp8.out;
  const auto chosen = run("optimize mlp-tiny --machine dgx-a100 --devices 1 --search data-parallel --precision auto -o " + (dir() / "auto.json").string());
  ASSERT_EQ(chosen.code, 0) << chosen.out;
  EXPECT_NE(chosen.out.find("precision             bf16 (auto)"), std::string::npos) << chosen.out;
  EXPECT_NE(chosen.out.find("bf16 recompute none ZeRO 0: "), std::string::npos) << chosen.out;
  const auto volta = run("optimize mlp-tiny --machine summit --devices 6 --precision bf16 -o " + (dir() / "v.json").string());
  EXPECT_EQ(volta.code, 2) << volta.out;
  EXPECT_NE(volta.out.find("error: --precision: V100-SXM2-16GB has no peak FLOP/s for bf16"), std::string::npos) << volta.out;
  EXPECT_FALSE(fs::exists(dir() / "v.json"));
}

// The recomputation policy: chosen and printed by optimize, recorded, read
// back by simulate (which can also price another), trained by the runtime;
// an unknown one is one error line.
TEST(SimulateCommand, RecomputationIsPricedRecordedAndSimulated) {
  const std::string plain = (dir() / "plain.json").string(), full = (dir() / "full.json").string();
  const auto a = run("optimize gpt-tiny --machine dgx-a100 --devices 2 --search data-parallel -q -o " + plain);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("recompute             none (auto)\n"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("recipes searched      1 (no plan searched was over memory)"), std::string::npos) << a.out;
  const auto f = run("optimize gpt-tiny --machine dgx-a100 --devices 2 --search data-parallel --recompute full -q -o " + full);
  ASSERT_EQ(f.code, 0) << f.out;
  EXPECT_NE(f.out.find("recompute             full\n"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find(", transient "), std::string::npos) << f.out;
  const auto s = run("simulate " + full);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("recompute             full\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("ratio 1.00)"), std::string::npos) << s.out;
  // The plan without recomputation priced with it: slower than its estimate.
  const auto again = run("simulate " + plain + " --recompute full");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out.find("ratio 1.00)"), std::string::npos) << again.out;
  // Run as planned: the same losses as keeping every activation, in less memory.
  const std::string report = " --steps 2 --no-plot --report " + (dir() / "r.json").string();
  const auto train = run("run " + full + report), kept = run("run " + plain + report);
  ASSERT_EQ(train.code, 0) << train.out;
  ASSERT_EQ(kept.code, 0) << kept.out;
  EXPECT_NE(train.out.find("recompute             full: "), std::string::npos) << train.out;
  EXPECT_EQ(kept.out.find("recompute  "), std::string::npos) << kept.out;
  auto line = [](const std::string& out, const std::string& key) { return out.substr(out.find(key), out.find('\n', out.find(key)) - out.find(key)); };
  EXPECT_EQ(line(train.out, "loss                  "), line(kept.out, "loss                  "));
  EXPECT_NE(line(train.out, "buffers  "), line(kept.out, "buffers  "));
  const auto bad = run("optimize gpt-tiny --machine dgx-a100 --recompute some -o " + (dir() / "b.json").string());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --recompute: unknown recomputation policy 'some' (auto, none, gathers, selective, full, full+selective, full+gathers, operators)"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(dir() / "b.json"));
  const auto sim_bad = run("simulate " + plain + " --recompute auto");
  EXPECT_EQ(sim_bad.code, 2) << sim_bad.out;
  EXPECT_NE(sim_bad.out.find("error: --recompute: unknown recomputation policy 'auto' (none, gathers, selective, full, full+selective, full+gathers, operators)"), std::string::npos) << sim_bad.out;
}

// Full recomputation of some layers: stated on optimize, printed, recorded,
// simulated and run (same losses, less memory than keeping everything,
// more than recomputing every layer); a count beside another policy, or
// not positive, is one error line.
TEST(SimulateCommand, SomeLayersRecomputed) {
  const std::string some = (dir() / "some.json").string();
  const auto o = run("optimize gpt-tiny --set layers=3 --machine dgx-a100 --devices 2 --search data-parallel --recompute full "
                     "--recompute-layers 2 -q -o " + some);
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("recompute             full, first 2 layers\n"), std::string::npos) << o.out;
  const auto s = run("simulate " + some);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("recompute             full, first 2 layers\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("ratio 1.00)"), std::string::npos) << s.out;
  const auto priced = run("simulate " + some + " --recompute-layers 1");
  ASSERT_EQ(priced.code, 0) << priced.out;
  EXPECT_NE(priced.out.find("recompute             full, first 1 layer\n"), std::string::npos) << priced.out;
  EXPECT_EQ(priced.out.find("ratio 1.00)"), std::string::npos) << priced.out;
  const auto train = run("run " + some + " --steps 2 --no-plot");
  ASSERT_EQ(train.code, 0) << train.out;
  EXPECT_NE(train.out.find("recompute             full, first 2 layers: "), std::string::npos) << train.out;
  // With pipeline stages: that many layers of each chunk, searched, simulated and trained alike.
  const std::string staged = (dir() / "staged.json").string();
  const auto pipelined = run("optimize gpt-tiny --machine dgx-a100 --devices 4 --pipeline --stages 2 --micro-batches 2 --recompute full "
                             "--recompute-layers 1 -o " + staged);
  ASSERT_EQ(pipelined.code, 0) << pipelined.out;
  EXPECT_NE(pipelined.out.find("recompute             full, first 1 layer"), std::string::npos) << pipelined.out;
  const auto staged_run = run("run " + staged + " --steps 2 --no-plot --no-report");
  ASSERT_EQ(staged_run.code, 0) << staged_run.out;
  std::smatch bytes;  // what the re-runs send, as predicted on the chunks
  ASSERT_TRUE(std::regex_search(staged_run.out, bytes, std::regex(R"(([0-9.]+ [KMG]?i?B) per step measured, ([0-9.]+ [KMG]?i?B) predicted)")))
      << staged_run.out;
  EXPECT_EQ(bytes[1].str(), bytes[2].str()) << staged_run.out;
  // run predicts the step as the schedule runs it: simulate's time, with
  // the optimizer the run trains with (SGD with momentum, its default; the
  // strategy was priced with Adam).
  const auto staged_sim = run("simulate " + staged + " --optimizer momentum");
  std::smatch simulated, predicted;
  ASSERT_TRUE(std::regex_search(staged_sim.out, simulated, std::regex(R"(iteration time +([0-9.]+) ms simulated)"))) << staged_sim.out;
  ASSERT_TRUE(std::regex_search(staged_run.out, predicted, std::regex(R"(([0-9.]+) ms predicted on dgx-a100)"))) << staged_run.out;
  EXPECT_EQ(predicted[1].str(), simulated[1].str()) << staged_run.out;
  for (const auto& [args, error] : std::vector<std::pair<std::string, std::string>>{
           {"optimize gpt-tiny --machine dgx-a100 --recompute selective --recompute-layers 2 -o " + (dir() / "b.json").string(),
            "error: --recompute-layers: applies to full recomputation (--recompute full, full+selective or full+gathers)"},
           {"optimize gpt-tiny --machine dgx-a100 --recompute full --recompute-layers 0 -o " + (dir() / "b.json").string(),
            "error: --recompute-layers: "},
           {"optimize gpt-tiny --machine dgx-a100 --recompute full+selective -o " + (dir() / "b.json").string(),
            "error: --recompute-layers: required with full+selective"},
           {"simulate " + some + " --recompute full+selective",
            "error: --recompute-layers: required with full+selective"},
           {"simulate " + some + " --recompute selective --recompute-layers 1",
            "error: --recompute-layers: applies to full recomputation (or full+selective, full+gathers), and the plan is priced with selective"}}) {
    const auto bad = run(args);
    EXPECT_EQ(bad.code, 2) << args << "\n" << bad.out;
    EXPECT_NE(bad.out.find(error), std::string::npos) << args << "\n" << bad.out;
    EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
  }
  EXPECT_FALSE(fs::exists(dir() / "b.json"));
}

// An accumulating plan's report states the bytes a step sends, and the
// runtime sends them (the joined pipeline estimate once said 0 B).
TEST(SimulateCommand, AnAccumulatingPlanSendsWhatItPredicts) {
  const std::string acc = (dir() / "acc.json").string();
  const auto o = run("optimize gpt-tiny --machine dgx-h100 --devices 4 --search data-parallel --micro-batches 2 -q -o " + acc);
  ASSERT_EQ(o.code, 0) << o.out;
  const std::string predicted = pcgx::testing::per_step_figure(o.out, "  between devices     ");
  ASSERT_FALSE(predicted.empty()) << o.out;
  EXPECT_NE(predicted, "0 B") << o.out;
  EXPECT_EQ(o.out.find("in 0 buckets"), std::string::npos) << o.out;
  const auto r = run("run " + acc + " --steps 2 --no-plot --no-report");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(pcgx::testing::per_step_figure(r.out, "between devices       "), predicted) << r.out;
}

// ZeRO stage 3 end to end: optimize prints it and the weights it shards,
// simulate runs the gathers before use (ratio 1.00 to the estimate it
// chose by), the runtime trains it and sends the bytes predicted.
TEST(SimulateCommand, ZeroStage3IsPricedSimulatedAndTrained) {
  const std::string sharded = (dir() / "z3.json").string(), report = (dir() / "z3-run.json").string();
  const auto z = run("optimize gpt-tiny --machine dgx-a100 --devices 4 --search data-parallel --zero 3 -q -o " + sharded);
  ASSERT_EQ(z.code, 0) << z.out;
  EXPECT_NE(z.out.find("ZeRO stage            3: weights, optimizer state and gradients sharded"), std::string::npos) << z.out;
  const auto s = run("simulate " + sharded);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("ZeRO stage            3\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("with ZeRO 3's weight all-gathers before each use"), std::string::npos) << s.out;
  const auto train = run("run " + sharded + " --steps 2 --no-plot --report " + report);
  ASSERT_EQ(train.code, 0) << train.out;
  EXPECT_NE(train.out.find("all-gathered before each forward and backward"), std::string::npos) << train.out;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("zero"), 3);
  EXPECT_EQ(j.at("bytes_per_step").get<double>(), j.at("predicted_bytes_per_step").get<double>());
}

// ZeRO 3's persistence threshold end to end: optimize prints and records
// it, simulate prices it as recorded (ratio 1.00), the runtime gathers the
// small blocks after the update and sends the bytes predicted; a negative
// threshold, or one beside another stage, is one error line and no file.
TEST(SimulateCommand, ZeroPersistenceThresholdIsRecordedSimulatedAndTrained) {
  const std::string kept = (dir() / "z3p.json").string(), report = (dir() / "z3p-run.json").string();
  const auto z = run("optimize gpt-tiny --machine dgx-a100 --devices 4 --search data-parallel --zero 3 --zero-persistence-threshold 1000 -q -o " + kept);
  ASSERT_EQ(z.code, 0) << z.out;
  EXPECT_NE(z.out.find("  persistence         weight blocks under 1000 parameters kept whole, gathered after the update\n"), std::string::npos) << z.out;
  EXPECT_NE(z.out.find(": weights, optimizer state and gradients sharded"), std::string::npos) << z.out;
  std::ifstream f(kept);
  const auto recorded = nlohmann::json::parse(f);
  EXPECT_EQ(recorded.at("zero_persistence_threshold"), 1000);
  EXPECT_GT(recorded.at("predicted").value("gathered_for_use", 0), 0);
  // A threshold above every block shards no weight between uses (stage 2
  // in all but name): the report says so rather than "weights sharded".
  const auto whole = run("optimize gpt-tiny --machine dgx-a100 --devices 4 --search data-parallel --zero 3 --zero-persistence-threshold 1000000000 -q -o " +
                         (dir() / "z3-whole.json").string());
  ASSERT_EQ(whole.code, 0) << whole.out;
  EXPECT_EQ(whole.out.find("weights, optimizer state and gradients sharded"), std::string::npos) << whole.out;
  EXPECT_NE(whole.out.find("every weight block kept whole between uses (under the persistence threshold): stage 2's communication"), std::string::npos)
      << whole.out;
  EXPECT_NE(whole.out.find("gathered after the update (here every block)\n"), std::string::npos) << whole.out;
  const auto whole_sim = run("simulate " + (dir() / "z3-whole.json").string());
  ASSERT_EQ(whole_sim.code, 0) << whole_sim.out;
  EXPECT_NE(whole_sim.out.find("ZeRO 3 with every weight block kept whole between uses (stage 2's communication)"), std::string::npos) << whole_sim.out;
  EXPECT_EQ(whole_sim.out.find("all-gathers before each use"), std::string::npos) << whole_sim.out;
  const auto whole_run = run("run " + (dir() / "z3-whole.json").string() + " --steps 2 --no-plot --report " + (dir() / "z3-whole-run.json").string());
  ASSERT_EQ(whole_run.code, 0) << whole_run.out;
  EXPECT_NE(whole_run.out.find("after the update (every weight block under the persistence threshold, kept whole between uses: stage 2's communication)"),
            std::string::npos)
      << whole_run.out;
  EXPECT_EQ(whole_run.out.find("before each forward and backward"), std::string::npos) << whole_run.out;
  const auto s = run("simulate " + kept);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("(blocks under 1000 parameters kept whole)"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("ratio 1.00)"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("weight gather"), std::string::npos) << s.out;
  // The longest tasks name an update's device once.
  const auto longest = run("simulate " + kept + " --show 100");
  ASSERT_EQ(longest.code, 0) << longest.out;
  EXPECT_NE(longest.out.find("update on device"), std::string::npos) << longest.out;
  for (int d = 0; d < 4; ++d)
    EXPECT_EQ(longest.out.find("on device " + std::to_string(d) + " on device " + std::to_string(d)), std::string::npos) << longest.out;
  // Priced with another threshold, the ratio is to the strategy's own recipe, and says so.
  const auto other = run("simulate " + kept + " --zero-persistence-threshold 0");
  ASSERT_EQ(other.code, 0) << other.out;
  EXPECT_NE(other.out.find("(the search's estimate under the strategy's own recipe: "), std::string::npos) << other.out;
  EXPECT_EQ(s.out.find("under the strategy's own recipe"), std::string::npos) << s.out;
  const auto train = run("run " + kept + " --steps 2 --no-plot --report " + report);
  ASSERT_EQ(train.code, 0) << train.out;
  EXPECT_NE(train.out.find("weight blocks under 1000 parameters kept whole"), std::string::npos) << train.out;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("zero_persistence_threshold"), 1000);
  EXPECT_EQ(j.at("bytes_per_step").get<double>(), j.at("predicted_bytes_per_step").get<double>());
  struct Bad {
    std::string args, message;
  };
  for (const Bad& b : {Bad{"--zero 3 --zero-persistence-threshold=-5",
                           "error: --zero-persistence-threshold: expected a number of parameters (0 or more) or auto, got '-5'"},
                       Bad{"--zero 3 --zero-persistence-threshold 1e5x",
                           "error: --zero-persistence-threshold: expected a number of parameters (0 or more) or auto, got '1e5x'"},
                       Bad{"--zero 2 --zero-persistence-threshold 100",
                           "error: --zero-persistence-threshold: applies to ZeRO stage 3 (--zero, or a weight group's in --zero-weights), not 2"},
                       Bad{"--zero 1 --zero-weights 'block0.*=2' --zero-persistence-threshold 100",
                           "error: --zero-persistence-threshold: applies to ZeRO stage 3 (--zero, or a weight group's in --zero-weights), not 1 "
                           "with no group at 3"}}) {
    const auto bad = run("optimize gpt-tiny --machine dgx-a100 --devices 4 " + b.args + " -o " + (dir() / "bp.json").string());
    EXPECT_EQ(bad.code, 2) << bad.out;
    EXPECT_NE(bad.out.find(b.message + "\n"), std::string::npos) << bad.out;
    EXPECT_FALSE(fs::exists(dir() / "bp.json"));
  }
  const auto sim_bad = run("simulate " + kept + " --zero 1 --zero-persistence-threshold 10");
  EXPECT_EQ(sim_bad.code, 2) << sim_bad.out;
  EXPECT_NE(sim_bad.out.find("error: --zero-persistence-threshold: applies to ZeRO stage 3"), std::string::npos) << sim_bad.out;
}

// ZeRO stages per weight group end to end: optimize prints and records
// them (names, not patterns), simulate prices them as recorded (within
// 2%), plan show writes them back and the plan is priced the same, the
// runtime trains them and sends the bytes predicted; bad groups are one
// error line and no file.
TEST(SimulateCommand, ZeroWeightGroupsAreRecordedSimulatedAndTrained) {
  const std::string grouped = (dir() / "zw.json").string(), report = (dir() / "zw-run.json").string();
  const auto z = run("optimize gpt-tiny --machine dgx-a100 --devices 4 --search data-parallel --zero 1 --zero-persistence-threshold 0 "
                     "--zero-weights 'block1.mlp.*.W=3,block0.*=2' -q -o " + grouped);
  ASSERT_EQ(z.code, 0) << z.out;
  EXPECT_NE(z.out.find("  weight groups       stage 2: 16 weights (block0."), std::string::npos) << z.out;
  EXPECT_NE(z.out.find("stage 3: 2 weights (block1.mlp.ffn_output.W, block1.mlp.intermediate.W) (the other weights at 1)\n"), std::string::npos) << z.out;
  std::ifstream f(grouped);
  const auto recorded = nlohmann::json::parse(f);
  EXPECT_EQ(recorded.at("zero"), 1);
  EXPECT_EQ(recorded.at("zero_weights").size(), 18u);
  EXPECT_EQ(recorded.at("zero_weights").at("block1.mlp.intermediate.W"), 3);
  EXPECT_EQ(recorded.at("zero_weights").at("block0.ln1.gamma"), 2);
  EXPECT_EQ(recorded.at("predicted").value("gathered_for_use", 0), 2);
  const auto s = run("simulate " + grouped);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("  weight groups       stage 2: 16 weights"), std::string::npos) << s.out;
  // (Within 2%: the stage-1 and stage-2 weights' buckets, kept apart,
  // interleave in the backward pass a little differently in the two.)
  const size_t ratio = s.out.find(", ratio ");
  ASSERT_NE(ratio, std::string::npos) << s.out;
  EXPECT_NEAR(std::stod(s.out.substr(ratio + 8)), 1.0, 0.02) << s.out;
  const std::string plan = (dir() / "zw-plan.json").string();
  const auto shown = run("plan show " + grouped + " -o " + plan);
  ASSERT_EQ(shown.code, 0) << shown.out;
  const auto again = run("optimize gpt-tiny --machine dgx-a100 --devices 4 --plan " + plan + " -q -o " + (dir() / "zw-again.json").string());
  ASSERT_EQ(again.code, 0) << again.out;
  auto predicted = [](const std::string& out) {
    const size_t at = out.find("iteration time        ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  ASSERT_FALSE(predicted(z.out).empty()) << z.out;
  EXPECT_EQ(predicted(again.out), predicted(z.out)) << again.out;
  EXPECT_NE(again.out.find("stage 3: 2 weights (block1.mlp.ffn_output.W, block1.mlp.intermediate.W)"), std::string::npos) << again.out;
  const auto train = run("run " + grouped + " --steps 2 --no-plot --report " + report);
  ASSERT_EQ(train.code, 0) << train.out;
  EXPECT_NE(train.out.find("  weight groups       stage 2: 16 weights"), std::string::npos) << train.out;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("zero_weights").at("block1.mlp.ffn_output.W"), 3);
  EXPECT_EQ(j.at("bytes_per_step").get<double>(), j.at("predicted_bytes_per_step").get<double>());
  struct Bad {
    std::string args, message;
  };
  for (const Bad& b : {Bad{"--zero-weights wte", "error: --zero-weights: expected PATTERN=STAGE (a weight name or pattern, a stage of 0, 1, 2, 3: 'block*.mlp.*=3'), got 'wte'"},
                       Bad{"--zero-weights 'wte.*=4'", "error: --zero-weights: expected PATTERN=STAGE"},
                       Bad{"--zero-weights 'x*=3'", "error: --zero-weights: 'x*' names no weight of gpt-tiny (its weights: wte.table, "},
                       Bad{"--zero 0 --zero-weights 'wte.*=3'", "error: --zero-weights: weight wte.* at ZeRO stage 3 beside the plan's stage 0"},
                       Bad{"--zero-weights 'wte.*=0,block0.*=3'", "error: --zero-weights: weight wte.* at ZeRO stage 0 beside block0.* at 3: stage 0 cannot mix"},
                       Bad{"--zero-weights 'block0.*=3,*.W=2'", "error: --zero-weights: weight block0.attn.query.W is at ZeRO stage 3 by 'block0.*' and at 2 by '*.W'"},
                       Bad{"--zero 2 --pipeline --stages 2 --micro-batches 2 --zero-weights 'wte.*=1'", "error: --zero: ZeRO stage 2 with pipeline stages"},
                       Bad{"--zero 1 --pipeline --stages 2 --micro-batches 2 --zero-weights 'wte.*=2'", "error: --zero-weights: ZeRO stage 2 with pipeline stages"}}) {
    const auto bad = run("optimize gpt-tiny --machine dgx-a100 --devices 4 " + b.args + " -o " + (dir() / "bw.json").string());
    EXPECT_EQ(bad.code, 2) << b.args << "\n" << bad.out;
    EXPECT_NE(bad.out.find(b.message), std::string::npos) << bad.out;
    EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
    EXPECT_FALSE(fs::exists(dir() / "bw.json"));
  }
}

// The ZeRO stage: printed by optimize, recorded, read back by simulate
// (which can also price another), trained by the runtime; an unknown stage
// is one error line.
TEST(SimulateCommand, ZeroStageIsPricedRecordedAndSimulated) {
  const std::string plain = (dir() / "z0.json").string(), sharded = (dir() / "z2.json").string();
  const auto a = run("optimize gpt-tiny --machine dgx-a100 --devices 4 --search data-parallel --zero 0 -q -o " + plain);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("ZeRO stage            0\n"), std::string::npos) << a.out;
  const auto z = run("optimize gpt-tiny --machine dgx-a100 --devices 4 --search data-parallel --zero 2 -q -o " + sharded);
  ASSERT_EQ(z.code, 0) << z.out;
  EXPECT_NE(z.out.find("ZeRO stage            2: optimizer state and gradients sharded"), std::string::npos) << z.out;
  const auto s = run("simulate " + sharded);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("ZeRO stage            2\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("ratio 1.00)"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("weight gather"), std::string::npos) << s.out;
  // The unsharded plan: no gather, unless simulate prices it with stage 2.
  const auto unsharded = run("simulate " + plain);
  ASSERT_EQ(unsharded.code, 0) << unsharded.out;
  EXPECT_EQ(unsharded.out.find("weight gather"), std::string::npos) << unsharded.out;
  const auto again = run("simulate " + plain + " --zero 2");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("weight gather"), std::string::npos) << again.out;
  // The runtime trains it sharded, and sends the bytes predicted for it.
  const std::string report = (dir() / "z2-run.json").string();
  const auto train = run("run " + sharded + " --steps 2 --no-plot --report " + report);
  ASSERT_EQ(train.code, 0) << train.out;
  EXPECT_NE(train.out.find("ZeRO stage            2: each gradient bucket reduce-scattered"), std::string::npos) << train.out;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("zero"), 2);
  EXPECT_EQ(j.at("bytes_per_step").get<double>(), j.at("predicted_bytes_per_step").get<double>());
  const auto bad = run("optimize gpt-tiny --machine dgx-a100 --zero 4 -o " + (dir() / "bz.json").string());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --zero: unknown ZeRO stage '4' (auto, 0, 1, 2, 3)"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(dir() / "bz.json"));
  const auto sim_bad = run("simulate " + plain + " --zero auto");
  EXPECT_EQ(sim_bad.code, 2) << sim_bad.out;
  EXPECT_NE(sim_bad.out.find("error: --zero: unknown ZeRO stage 'auto' (0, 1, 2, 3)"), std::string::npos) << sim_bad.out;
}

// The optimizer a plan is priced with: printed, recorded, simulated as
// recorded or as told; an unknown one is one error line and no file.
TEST(SimulateCommand, TheOptimizerIsPricedRecordedAndSimulated) {
  const std::string sgd = (dir() / "opt-sgd.json").string(), adam = (dir() / "opt-adam.json").string();
  // The 16 x 8192 MLP, whose update is most of its step.
  const auto a = run("optimize mlp --machine dgx-a100 --devices 2 --search data-parallel --optimizer sgd -q -o " + sgd);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("optimizer             sgd (0 FP32 states per parameter)"), std::string::npos) << a.out;
  const auto b = run("optimize mlp --machine dgx-a100 --devices 2 --search data-parallel -q -o " + adam);
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("optimizer             adam (2 FP32 states per parameter)"), std::string::npos) << b.out;
  const auto s = run("simulate " + sgd);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("optimizer             sgd\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("ratio 1.00)"), std::string::npos) << s.out;
  // Simulated as Adam, the SGD plan's update streams 7 words where it was priced with 3.
  const auto told = run("simulate " + sgd + " --optimizer adam");
  ASSERT_EQ(told.code, 0) << told.out;
  EXPECT_NE(told.out.find("optimizer             adam\n"), std::string::npos) << told.out;
  EXPECT_EQ(told.out.find("ratio 1.00)"), std::string::npos) << told.out;
  const auto bad = run("optimize mlp-tiny --machine dgx-a100 --devices 2 --optimizer lamb -o " + (dir() / "opt-bad.json").string());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --optimizer: unknown optimizer 'lamb' (sgd, momentum, adam)"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(dir() / "opt-bad.json"));
}

// The attention kernel: flash printed by optimize with its kernels,
// recorded, read back by simulate (which can price the plan eager
// instead), faster than eager at a long sequence; an unknown kernel is one
// error line naming the choices.
TEST(SimulateCommand, TheAttentionKernelIsPricedRecordedAndSimulated) {
  const std::string flash = (dir() / "att-flash.json").string();
  const std::string common = "optimize gpt-tiny --set seq=512 --machine dgx-a100 --devices 2 --search data-parallel --precision bf16 -q ";
  const auto a = run(common + "--attention flash -o " + flash);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("attention             flash (2 kernels: q k^T to the weighted sum, no scores kept)"), std::string::npos) << a.out;
  const auto s = run("simulate " + flash);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("attention             flash\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("ratio 1.00)"), std::string::npos) << s.out;
  const auto eager = run("simulate " + flash + " --attention eager");
  ASSERT_EQ(eager.code, 0) << eager.out;
  EXPECT_EQ(eager.out.find("attention "), std::string::npos) << eager.out;
  // Priced eager, slower than the flash plan's estimate.
  const size_t at = eager.out.find("ratio ");
  ASSERT_NE(at, std::string::npos) << eager.out;
  EXPECT_GT(std::stod(eager.out.substr(at + 6)), 1.01) << eager.out;
  const auto bad = run(common + "--attention sdpa -o " + (dir() / "att-bad.json").string());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --attention: unknown attention kernel 'sdpa' (eager, flash, fused)\n"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(dir() / "att-bad.json"));
}


// Input gradients sent beside the weight products (Megatron-LM's
// asynchronous tensor-parallel all-reduce): said by optimize, recorded,
// simulated as predicted, and simulate can price the plan without it
// (slower than its estimate); a value other than on or off is one error
// line; on a machine whose devices do their own communication the report
// says it changes nothing.
TEST(SimulateCommand, InputGradientsSentBesideWeightProducts) {
  const std::string s = (dir() / "overlap.json").string();
  const std::string common = "optimize gpt-tiny --set seq=512 --machine dgx-a100 --devices 4 --search megatron --tensor-parallel 4 -q ";
  const auto a = run(common + "--overlap-grad-input -o " + s);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("input gradients       sent while the weight gradients are computed, where a collective carries them (--overlap-grad-input)\n"), std::string::npos) << a.out;
  const auto on = run("simulate " + s);
  ASSERT_EQ(on.code, 0) << on.out;
  EXPECT_NE(on.out.find("input gradients       sent while"), std::string::npos) << on.out;
  EXPECT_NEAR(ratio(on.out), 1.0, 0.015) << on.out;
  const auto off = run("simulate " + s + " --overlap-grad-input off");
  ASSERT_EQ(off.code, 0) << off.out;
  EXPECT_EQ(off.out.find("input gradients"), std::string::npos) << off.out;
  EXPECT_GT(ratio(off.out), ratio(on.out) + 0.01) << off.out;
  const auto bad = run("simulate " + s + " --overlap-grad-input yes");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --overlap-grad-input: expected on or off, got 'yes'\n"), std::string::npos) << bad.out;
  const std::string cpu_s = (dir() / "overlap-cpu.json").string();
  const auto cpu = run("optimize mlp-tiny --machine cpu-host --devices 2 --search data-parallel -q --overlap-grad-input -o " + cpu_s);
  ASSERT_EQ(cpu.code, 0) << cpu.out;
  EXPECT_NE(cpu.out.find("this machine's devices do their own communication (--overlap-grad-input has no effect)"), std::string::npos) << cpu.out;
  // The runtime does not overlap: a run of such a strategy says what it prices.
  const auto trained = run("run " + cpu_s + " --steps 2 --no-plot --no-report");
  ASSERT_EQ(trained.code, 0) << trained.out;
  EXPECT_NE(trained.out.find("was planned with input gradients sent beside the weight products (overlap_grad_input); the runtime sends "
                             "them after each operator's backward"), std::string::npos) << trained.out;
}

// ZeRO's weights gathered beside the next forward pass: optimize records
// and reports it, simulate agrees with the prediction and re-prices the
// strategy without it (slower), a bad value is one error line, ZeRO 0
// and a machine whose devices do their own communication say it has no
// effect, and a run of such a strategy says the runtime gathers after the
// update.
TEST(SimulateCommand, WeightsGatheredBesideTheNextForwardPass) {
  const std::string s = (dir() / "param-gather.json").string();
  // (Buckets of 0.05 MiB: several, so that the later ones hide behind the
  // forward pass; the first is waited for either way.)
  const std::string common = "optimize gpt-tiny --set seq=512 --machine dgx-h100 --devices 16 --search data-parallel --zero 1 --bucket-mb 0.05 -q ";
  const auto a = run(common + "--overlap-param-gather -o " + s);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("weights after update  gathered beside the next step's forward pass, each operator waiting for its bucket's "
                       "(--overlap-param-gather)\n"), std::string::npos) << a.out;
  const auto on = run("simulate " + s + " --bucket-mb 0.05");
  ASSERT_EQ(on.code, 0) << on.out;
  EXPECT_NE(on.out.find("weights after update  gathered beside"), std::string::npos) << on.out;
  EXPECT_NEAR(ratio(on.out), 1.0, 0.015) << on.out;
  const auto off = run("simulate " + s + " --bucket-mb 0.05 --overlap-param-gather off");
  ASSERT_EQ(off.code, 0) << off.out;
  EXPECT_EQ(off.out.find("weights after update"), std::string::npos) << off.out;
  EXPECT_GT(ratio(off.out), ratio(on.out) + 0.01) << off.out;
  const auto bad = run("simulate " + s + " --overlap-param-gather 1");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("error: --overlap-param-gather: expected on or off, got '1'\n"), std::string::npos) << bad.out;
  // With pipeline stages: each stage's first forward waits, priced and
  // simulated alike.
  const std::string staged_s = (dir() / "param-gather-staged.json").string();
  const auto staged = run("optimize gpt-tiny --set batch=32 --global-batch --machine dgx-h100 --devices 16 --search data-parallel --zero 1 "
                          "--bucket-mb 0.1 --pipeline --stages 2 --micro-batches 4 --overlap-param-gather -q -o " + staged_s);
  ASSERT_EQ(staged.code, 0) << staged.out;
  EXPECT_NE(staged.out.find("weight gather       "), std::string::npos) << staged.out;
  EXPECT_NE(staged.out.find(" beside the forward pass (ZeRO): what the forward pass waits for them\n"), std::string::npos) << staged.out;
  const auto staged_sim = run("simulate " + staged_s + " --bucket-mb 0.1");
  ASSERT_EQ(staged_sim.code, 0) << staged_sim.out;
  EXPECT_NE(staged_sim.out.find("weights after update  gathered beside"), std::string::npos) << staged_sim.out;
  EXPECT_NEAR(ratio(staged_sim.out), 1.0, 0.05) << staged_sim.out;
  const auto zero0 = run("optimize gpt-tiny --machine dgx-h100 --devices 4 --search data-parallel --zero 0 -q --overlap-param-gather -o " +
                         (dir() / "param-gather-0.json").string());
  ASSERT_EQ(zero0.code, 0) << zero0.out;
  EXPECT_NE(zero0.out.find("no weights gathered after the update at ZeRO stage 0 (--overlap-param-gather has no effect)"), std::string::npos)
      << zero0.out;
  const std::string cpu_s = (dir() / "param-gather-cpu.json").string();
  const auto cpu = run("optimize mlp-tiny --machine cpu-host --devices 2 --search data-parallel --zero 1 -q --overlap-param-gather -o " + cpu_s);
  ASSERT_EQ(cpu.code, 0) << cpu.out;
  EXPECT_NE(cpu.out.find("this machine's devices do their own communication (--overlap-param-gather has no effect)"), std::string::npos)
      << cpu.out;
  const auto trained = run("run " + cpu_s + " --steps 2 --no-plot --no-report");
  ASSERT_EQ(trained.code, 0) << trained.out;
  EXPECT_NE(trained.out.find("was planned with ZeRO's weights gathered beside the next forward pass (overlap_param_gather); the runtime "
                             "gathers them after the update"), std::string::npos) << trained.out;
}

// A pipelined strategy runs its schedule micro-batch by micro-batch; the
// schedule is recorded, and a bad one is one error line.
TEST(SimulateCommand, APipelinedStrategyRunsItsSchedule) {
  const std::string s = (dir() / "pipe.json").string();
  const auto o = run("optimize mlp --set batch=512 --machine dgx-h100 --devices 8 --search data-parallel --pipeline --stages 2 "
                     "--micro-batches 8 --virtual-stages 2 -q -o " + s);
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("simulated  "), std::string::npos) << o.out;
  nlohmann::json j;
  {
    std::ifstream in(s);
    j = nlohmann::json::parse(in);
  }
  EXPECT_EQ(j.at("pipeline").at("schedule"), "interleaved");
  const auto r = run("simulate " + s + " --trace " + (dir() / "pipe.trace.json").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("pipeline              2 stages x 2 virtual, 8 micro-batches, interleaved schedule"), std::string::npos) << r.out;
  {  // every micro-batch's steps through every chunk are in the trace
    std::ifstream in(dir() / "pipe.trace.json");
    const auto t = nlohmann::json::parse(in);
    std::set<std::pair<int64_t, int64_t>> steps;
    for (const auto& e : t.at("traceEvents"))
      if (e.contains("args") && e["args"].contains("micro_batch")) steps.insert({e["args"]["chunk"].get<int64_t>(), e["args"]["micro_batch"].get<int64_t>()});
    EXPECT_EQ(steps.size(), 4u * 8u);
  }
  // The same plan under GPipe: a schedule the file states.
  j["pipeline"]["schedule"] = "gpipe";
  const std::string g = (dir() / "gpipe.json").string();
  std::ofstream(g) << j.dump();
  const auto gp = run("simulate " + g);
  ASSERT_EQ(gp.code, 0) << gp.out;
  EXPECT_NE(gp.out.find("gpipe schedule"), std::string::npos) << gp.out;
  // GPipe keeps every micro-batch in flight: more memory than interleaved.
  auto gib = [](const std::string& out) {
    const size_t at = out.find("memory per device   ");
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 20));
  };
  EXPECT_GT(gib(gp.out), gib(r.out)) << gp.out << r.out;
  EXPECT_GT(gib(r.out), 0) << r.out;
  const auto flag = run("simulate " + s + " --schedule gpipe");  // the same from the command line
  ASSERT_EQ(flag.code, 0) << flag.out;
  EXPECT_NE(flag.out.find("gpipe schedule"), std::string::npos) << flag.out;
  // Priced again from the strategy's chunks in GPipe's order (through 2
  // chunks per stage: a longer bubble), which the simulation meets.
  EXPECT_NE(flag.out.find("(the search's estimate of its stages in this order: "), std::string::npos) << flag.out;
  EXPECT_NEAR(ratio(flag.out), 1.0, 0.05) << flag.out;
  const auto wrong = run("simulate " + s + " --schedule 1f1b");
  EXPECT_EQ(wrong.code, 2) << wrong.out;
  EXPECT_NE(wrong.out.find("error: --schedule: "), std::string::npos) << wrong.out;
  const auto unknown = run("simulate " + s + " --schedule zb");
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("error: --schedule: unknown schedule 'zb' (gpipe, 1f1b, interleaved)"), std::string::npos) << unknown.out;
  const auto flat = run("simulate " + strategy() + " --schedule gpipe");
  EXPECT_EQ(flat.code, 2) << flat.out;
  EXPECT_NE(flat.out.find("is not pipelined"), std::string::npos) << flat.out;
  j["pipeline"]["schedule"] = "zero-bubble";
  const std::string bad = (dir() / "bad-schedule.json").string();
  std::ofstream(bad) << j.dump();
  const auto b = run("simulate " + bad);
  EXPECT_EQ(b.code, 2) << b.out;
  EXPECT_NE(b.out.find("pipeline.schedule"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("gpipe, 1f1b, interleaved"), std::string::npos) << b.out;
  j["pipeline"]["schedule"] = "1f1b";  // one chunk per stage, where the file has two
  std::ofstream(bad) << j.dump();
  const auto c = run("simulate " + bad);
  EXPECT_EQ(c.code, 2) << c.out;
  EXPECT_NE(c.out.find("use interleaved"), std::string::npos) << c.out;
}

TEST(SimulateCommand, BadInputIsOneErrorLine) {
  const auto missing = run("simulate " + (dir() / "missing.json").string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.out.find("error: "), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("missing.json"), std::string::npos) << missing.out;
  const auto bucket = run("simulate " + strategy() + " --bucket-mb 0");
  EXPECT_EQ(bucket.code, 2);
  EXPECT_NE(bucket.out.find("--bucket-mb"), std::string::npos) << bucket.out;
  const auto trace_dir = run("simulate " + strategy() + " --trace " + dir().string());
  EXPECT_EQ(trace_dir.code, 2) << trace_dir.out;
}

}  // namespace
