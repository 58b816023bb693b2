// `pcgx optimize --pipeline`: a pipelined strategy file the runner trains;
// impossible stage and micro-batch counts are one error line, exit code 2.
#include <gtest/gtest.h>
#include <algorithm>

#include <filesystem>
#include <fstream>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli/plan_test_helpers.h"
#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_pipeline_test");
  return d;
}

TEST(OptimizePipeline, WritesAStrategyTheRunnerTrains) {
  const std::string s = (dir() / "pipe.json").string();
  const auto r = run("optimize mlp-tiny --set batch=64 --machine cpu-host --devices 4 --pipeline --stages 2 --micro-batches 4 -q -o " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 stages x 2 devices, 4 micro-batches"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage 2  devices 2..3"), std::string::npos) << r.out;
  std::ifstream in(s);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["pipeline"]["stages"], 2);
  EXPECT_EQ(j["pipeline"]["micro_batches"], 4);
  EXPECT_EQ(j["search"], "unity+pipeline");
  EXPECT_EQ(j["pipeline"]["schedule"], "1f1b");
  const auto t = run("run " + s + " --steps 3 --report " + (dir() / "r.json").string() + " --plot " + (dir() / "r.svg").string());
  EXPECT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("(2 stages, 4 micro-batches, 1f1b schedule)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("activation sets held  "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(" per device under 1f1b\n"), std::string::npos) << t.out;
  {  // the report: the schedule, and per device what it held in flight
    std::ifstream report(dir() / "r.json");
    const auto rj = nlohmann::json::parse(report);
    EXPECT_EQ(rj.at("pipeline").at("schedule"), "1f1b");
    EXPECT_EQ(rj.at("pipeline").at("activation_sets").size(), 4u);
    EXPECT_EQ(rj.at("pipeline").at("device_buffer_bytes").size(), 4u);
  }
  // Under GPipe: the same training (the same bits), another order.
  const auto g = run("run " + s + " --steps 3 --schedule gpipe --no-report --no-plot");
  EXPECT_EQ(g.code, 0) << g.out;
  EXPECT_NE(g.out.find("gpipe schedule"), std::string::npos) << g.out;
  auto losses = [](const std::string& out) { return out.substr(out.find("loss    ")); };
  EXPECT_EQ(losses(g.out).substr(0, 60), losses(t.out).substr(0, 60));
  for (const auto& [flag, says] : std::vector<std::pair<std::string, std::string>>{
           {"--schedule interleaved", "error: --schedule: pipeline schedule: interleaved runs several chunks per stage"},
           {"--schedule zb", "error: --schedule: unknown schedule 'zb' (gpipe, 1f1b, interleaved)"}}) {
    const auto bad = run("run " + s + " --steps 1 --no-report --no-plot " + flag);
    EXPECT_EQ(bad.code, 2) << bad.out;
    EXPECT_NE(bad.out.find(says), std::string::npos) << bad.out;
  }
  const auto model = run("run mlp-tiny --steps 1 --no-report --no-plot --schedule gpipe");
  EXPECT_EQ(model.code, 2) << model.out;
  EXPECT_NE(model.out.find("error: --schedule: "), std::string::npos) << model.out;
}

// --virtual-stages: interleaved 1F1B, recorded in the strategy file and
// printed chunk by chunk; the runner trains it.
TEST(OptimizePipeline, VirtualStagesInterleave) {
  const std::string s = (dir() / "interleaved.json").string();
  const auto r = run("optimize bert-large-tiny --machine cpu-host --devices 4 --pipeline --stages 2 --virtual-stages 2 --micro-batches 2 -q -o " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 stages x 2 devices, 2 micro-batches, interleaved 1F1B (2 virtual stages per device)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage 1.2  devices 0..1"), std::string::npos) << r.out;
  std::ifstream in(s);
  EXPECT_EQ(nlohmann::json::parse(in)["pipeline"]["virtual_stages"], 2);
  const auto t = run("run " + s + " --steps 2 --no-report --no-plot");
  EXPECT_EQ(t.code, 0) << t.out;
}

// --virtual-stages auto: each of 1, 2 and 4 tried with the stages, the
// fastest kept (the same plan as stating it), recorded in the strategy;
// refused where something else fixes the chunks.
TEST(OptimizePipeline, VirtualStagesAutoKeepsTheFastest) {
  const std::string s = (dir() / "virtual-auto.json").string();
  const std::string base = "optimize gpt-tiny --set layers=8 --machine cpu-host --devices 4 --search data-parallel --pipeline --stages 2 "
                           "--micro-batches 4 -q -o " + s + " --virtual-stages ";
  double best = 1e300;
  int64_t best_v = 0;
  for (const int64_t v : {1, 2, 4}) {
    const auto r = run(base + std::to_string(v));
    ASSERT_EQ(r.code, 0) << r.out;
    if (pcgx::testing::predicted_ms(r.out) < best) best = pcgx::testing::predicted_ms(r.out), best_v = v;
  }
  EXPECT_NE(best_v, 1) << "interleaving should pay here: the test would not tell auto from v = 1";
  const auto a = run(base + "auto");
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_DOUBLE_EQ(pcgx::testing::predicted_ms(a.out), best) << a.out;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(s))["pipeline"].value("virtual_stages", 1), best_v);
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"optimize gpt-tiny --set layers=8 --set batch=8 --global-batch --machine cpu-host --devices 4 --search megatron --pipeline-parallel 2 "
            "--virtual-stages auto --micro-batch-size 2",
            "error: --virtual-stages: Megatron-LM's plan states its virtual stages"},
           {"optimize gpt-tiny --set layers=8 --machine cpu-host --devices 4 --pipeline --stages 2 --virtual-stages auto --first-stage-layers 2",
            "error: --virtual-stages: searched virtual stages, and chunks stated where they end"},
           {"optimize gpt-tiny --machine cpu-host --devices 4 --virtual-stages auto", "error: --virtual-stages needs --pipeline"}}) {
    const auto bad = run(flags + " -q -o " + (dir() / "never.json").string());
    EXPECT_EQ(bad.code, 2) << flags << "\n" << bad.out;
    EXPECT_NE(bad.out.find(says), std::string::npos) << flags << "\n" << bad.out;
  }
}

// --micro-batches without --pipeline: gradient accumulation, a one-stage
// pipeline in the strategy file, which the runner trains.
TEST(OptimizePipeline, MicroBatchesAloneAccumulateGradients) {
  const std::string s = (dir() / "accumulate.json").string();
  const auto r = run("optimize mlp-tiny --machine cpu-host --devices 4 --micro-batches 2 -q -o " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("gradient accumulation 2 micro-batches of "), std::string::npos) << r.out;
  std::ifstream in(s);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["pipeline"]["stages"], 1);
  EXPECT_EQ(j["pipeline"]["micro_batches"], 2);
  const auto t = run("run " + s + " --steps 3 --no-report --no-plot");
  EXPECT_EQ(t.code, 0) << t.out;
  // The data-parallel baseline accumulates over the same micro-batches:
  // against data parallelism's own accumulating plan, a speedup of 1.
  const auto same = run("optimize gpt-tiny --machine cpu-host --devices 4 --micro-batches 2 --search data-parallel -q -o " + (dir() / "dp.json").string());
  ASSERT_EQ(same.code, 0) << same.out;
  EXPECT_NE(same.out.find(" (accumulating over the same 2 micro-batches)\n"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("speedup over data parallel  1.00x"), std::string::npos) << same.out;
  // ZeRO 2 accumulates too (each micro-batch's gradients reduce-scattered),
  // recorded and run; stage 2 with pipeline stages is one error line.
  const std::string z2 = (dir() / "z2.json").string();
  const auto z = run("optimize mlp-tiny --machine cpu-host --devices 4 --micro-batches 2 --zero 2 -q -o " + z2);
  ASSERT_EQ(z.code, 0) << z.out;
  std::ifstream zin(z2);
  const auto zj = nlohmann::json::parse(zin);
  EXPECT_EQ(zj["zero"], 2);
  EXPECT_EQ(zj["pipeline"]["micro_batches"], 2);
  const auto zt = run("run " + z2 + " --steps 3 --no-report --no-plot");
  EXPECT_EQ(zt.code, 0) << zt.out;
  // Stage 3 too: every micro-batch gathers the weights again.
  const std::string z3s = (dir() / "z3.json").string();
  const auto z3 = run("optimize mlp-tiny --machine cpu-host --devices 4 --micro-batches 2 --zero 3 -q -o " + z3s);
  ASSERT_EQ(z3.code, 0) << z3.out;
  // On one device there is nothing to shard, and the report says so.
  const auto one = run("optimize mlp-tiny --machine cpu-host --devices 1 --zero 3 -q -o " + (dir() / "one.json").string());
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("(here nothing: no weight has copies on several devices)"), std::string::npos) << one.out;
  const auto z3t = run("run " + z3s + " --steps 3 --no-report --no-plot");
  EXPECT_EQ(z3t.code, 0) << z3t.out;
  const auto zp = run("optimize mlp-tiny --machine cpu-host --devices 4 --pipeline --stages 2 --micro-batches 2 --zero 2 -q -o " +
                      (dir() / "zp.json").string());
  EXPECT_EQ(zp.code, 2) << zp.out;
  EXPECT_NE(zp.out.find("error: --zero: ZeRO stage 2 with pipeline stages: a pipelined plan shards at most the optimizer state (stage 1)"),
            std::string::npos) << zp.out;
}

// --micro-batches auto without --pipeline searches 1, 2, 4 and 8: the
// tiny MLP fits whole, so one; a count that is not one is an error line.
TEST(OptimizePipeline, MicroBatchesAutoSearchesTheAccumulation) {
  const std::string s = (dir() / "accumulate-auto.json").string();
  const auto r = run("optimize mlp-tiny --machine cpu-host --devices 4 --micro-batches auto -q -o " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("gradient accumulation 1 micro-batch (auto) of "), std::string::npos) << r.out;
  for (const std::string bad : {"0", "x", "2.5"}) {
    const auto b = run("optimize mlp-tiny --machine cpu-host --devices 4 --micro-batches " + bad + " -o " + (dir() / "b.json").string());
    EXPECT_EQ(b.code, 2) << b.out;
    EXPECT_NE(b.out.find("error: --micro-batches: expected a positive count or auto, got '" + bad + "'"), std::string::npos) << b.out;
    EXPECT_FALSE(fs::exists(dir() / "b.json"));
  }
}

TEST(OptimizePipeline, ImpossibleRequestsAreExitCode2) {
  const std::string out = (dir() / "never.json").string();
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"mlp-tiny --machine cpu-host --devices 4 --pipeline --stages 3", "error: --stages: 3 stages do not divide the 4 devices"},
           {"mlp-tiny --machine cpu-host --devices 4 --stages 2", "error: --stages needs --pipeline"},
           {"mlp-tiny --machine cpu-host --devices 4 --pipeline --stages 2 --micro-batches 7", "7 micro-batches"},
           {"resnext-50-tiny --machine cpu-host --devices 4 --pipeline", "BatchNorm cannot process that dimension in slices"},
           {"mlp-tiny --machine cpu-host --devices 4 --virtual-stages 2", "error: --virtual-stages needs --pipeline"},
           {"bert-large-tiny --machine cpu-host --devices 4 --pipeline --stages 2 --virtual-stages 2 --micro-batches 3",
            "error: --micro-batches: the interleaved schedule needs a multiple of the 2 stages, not 3"},
           {"mlp-tiny --machine cpu-host --devices 4 --pipeline --virtual-stages 0", "error: --virtual-stages: expected a positive count or auto, got '0'"},
       }) {
    const auto r = run("optimize " + args + " -o " + out);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    const size_t line = r.out.rfind("error: ");  // the last line, after the progress lines
    ASSERT_NE(line, std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find('\n', line), r.out.size() - 1) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << args << "\n" << r.out;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
  // A plan no device can hold, refused within a second: the error line
  // alone, neither optimize's first line nor a partial report before it.
  const auto r = run("optimize gpt-tiny --machine dgx-h100 --devices 1 --search data-parallel --set hidden=16384 --set ffn=65536 "
                     "--set layers=8 --set seq=2048 --set batch=64 -o " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.rfind("error: no feasible strategy: ", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  EXPECT_FALSE(fs::exists(out));
  // No stage count fits: the one line says what each shape tried ran into
  // (each count's balanced and even-layer cuts), not the last one's alone.
  const auto none = run("optimize gpt --set layers=8 --set hidden=2048 --set heads=16 --set ffn=8192 --set seq=1024 --set vocab=50000 "
                        "--set batch=256 --global-batch --machine cpu-host --devices 8 --pipeline --micro-batches 4 --search data-parallel "
                        "--recompute none --zero 0 -q -o " + out);
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_EQ(std::count(none.out.begin(), none.out.end(), '\n'), 1) << none.out;
  for (const char* shape : {"(2 stages, 4 micro-batches: stage 1: a device needs ", "; 4 stages, 4 micro-batches: stage 1: a device needs ",
                            "; 8 stages, 4 micro-batches: stage 1: a device needs ", "; 8 stages (even layers), 4 micro-batches: "})
    EXPECT_NE(none.out.find(shape), std::string::npos) << shape << "\n" << none.out;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace

namespace {

// --search megatron: Megatron-LM's plan as a user states it (tensor and
// pipeline parallel sizes, micro-batch size), the micro-batches following
// from the batch; the runner trains it under its schedule.
TEST(OptimizePipeline, MegatronPlanAsStated) {
  const std::string s = (dir() / "megatron.json").string();
  const std::string base = "optimize gpt-tiny --set batch=8 --global-batch --machine cpu-host --devices 4 --search megatron ";
  const auto r = run(base + "--tensor-parallel 2 --pipeline-parallel 2 --micro-batch-size 2 -q -o " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("search                megatron ("), std::string::npos) << r.out;
  // d = 4 / (2 x 2) = 1 replica: 8 samples in micro-batches of 2.
  EXPECT_NE(r.out.find("2 stages x 2 devices, 4 micro-batches"), std::string::npos) << r.out;
  std::ifstream in(s);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["search"], "megatron+pipeline");
  EXPECT_EQ(j["pipeline"]["micro_batches"], 4);
  const auto t = run("run " + s + " --steps 2 --no-report --no-plot");
  EXPECT_EQ(t.code, 0) << t.out;
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--tensor-parallel 2 --pipeline-parallel 2 --micro-batch-size 3", "error: --micro-batch-size: the batch of 8 samples over 1"},
           {"--tensor-parallel 2 --pipeline-parallel 2 --stages 2", "error: --pipeline-parallel: "},
           {"--tensor-parallel 2 --micro-batch-size 2 --micro-batches 4", "error: --micro-batch-size: give it or --micro-batches"},
           {"--tensor-parallel 3", "error: "}}) {
    const auto bad = run(base + flags + " -q -o " + s);
    EXPECT_EQ(bad.code, 2) << flags << "\n" << bad.out;
    EXPECT_NE(bad.out.find(says), std::string::npos) << flags << "\n" << bad.out;
  }
  // A stated plan whose replicas cannot split the batch evenly is refused,
  // as Megatron-LM refuses it, not run on fewer devices than asked.
  const fs::path never = dir() / "never-megatron.json";
  const auto uneven = run("optimize gpt-tiny --set batch=6 --global-batch --machine cpu-host --devices 4 --search megatron --tensor-parallel 1 -q -o " +
                          never.string());
  EXPECT_EQ(uneven.code, 2) << uneven.out;
  EXPECT_EQ(uneven.out, "error: --tensor-parallel: 1 on 4 devices leaves 4 data-parallel replicas, and the batch of 6 samples does not split 4 "
                        "ways (Megatron-LM needs the global batch a multiple of its data-parallel size)\n");
  EXPECT_FALSE(fs::exists(never));
  const auto unity = run("optimize gpt-tiny --machine cpu-host --devices 4 --micro-batch-size 2 -q -o " + s);
  EXPECT_EQ(unity.code, 2) << unity.out;
  EXPECT_NE(unity.out.find("error: --micro-batch-size: is Megatron-LM's"), std::string::npos) << unity.out;
}


// `pcgx COMMAND -q -o NEVER` refused: exit code 2, the reason printed,
// nothing written.
void expect_refused(const std::string& command, const std::string& says, const std::string& never) {
  const auto bad = run(command + " -q -o " + never);
  EXPECT_EQ(bad.code, 2) << command << "\n" << bad.out;
  EXPECT_NE(bad.out.find(says), std::string::npos) << command << "\n" << bad.out;
  EXPECT_FALSE(fs::exists(never)) << command;
}

// Megatron-LM's plan without sequence parallelism runs a layer's norms,
// dropouts and sums on copies, on every device of the group, and the next
// stage takes the first copy of the boundary (a Split along the replica
// axis). That Split's backward (the other copies' zero gradients, on the
// stage before) holds none of that stage's devices in the schedule, so the
// stage's second-last backward does not wait for the next stage's last
// backward, run task by task: the simulated step agrees with the
// prediction (11% above it otherwise).
TEST(OptimizePipeline, AFirstCopyAtAStageBoundaryHoldsNoDevice) {
  const std::string s = (dir() / "first-copy.json").string();
  const auto r = run("optimize gpt --set layers=4 --set hidden=8192 --set heads=64 --set ffn=32768 --set seq=2048 --set vocab=51200 "
                     "--set batch=16 --global-batch --machine selene --devices 16 --precision fp16 --search megatron --recompute full "
                     "--zero 0 --tensor-parallel 8 --pipeline-parallel 2 --micro-batch-size 4 -q -o " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(std::ifstream(s));
  const auto& nodes = j["graph"]["nodes"];
  EXPECT_TRUE(std::any_of(nodes.begin(), nodes.end(), [](const nlohmann::json& n) { return n.value("op", "") == "Split"; }))
      << "the boundary is taken as the first copy";
  const auto sim = run("simulate " + s);
  ASSERT_EQ(sim.code, 0) << sim.out;
  EXPECT_NEAR(pcgx::testing::ratio(sim.out), 1.0, 0.03) << sim.out;
}

// --first-stage-layers / --last-stage-layers: Megatron-LM's uneven
// pipeline (and DeepSpeed's, counting the embeddings and the head as
// layers): the stated ends, the rest even between; refused where the rest
// does not split or the split means nothing.
TEST(OptimizePipeline, MegatronUnevenStages) {
  const std::string s = (dir() / "uneven.json").string();
  const std::string base = "optimize gpt-tiny --set batch=8 --global-batch --machine cpu-host --devices 4 --search megatron ";
  const auto r = run(base + "--set layers=6 --pipeline-parallel 4 --first-stage-layers 1 --last-stage-layers 1 --micro-batch-size 2 -q -o " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(wte .. block0.mlp_residual)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(block1.ln1 .. block2.mlp_residual)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(block3.ln1 .. block4.mlp_residual)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(block5.ln1 .. loss)"), std::string::npos) << r.out;
  const auto t = run("run " + s + " --steps 2 --no-report --no-plot");
  EXPECT_EQ(t.code, 0) << t.out;
  // One end stated: the first stage holds 3 of 5 layers, the second 2.
  const auto one = run(base + "--set layers=5 --pipeline-parallel 2 --first-stage-layers 3 --micro-batch-size 2 -q -o " + s);
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("(wte .. block2.mlp_residual)"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("(block3.ln1 .. loss)"), std::string::npos) << one.out;
  // Interleaved (Megatron-LM's way): 10 layers as 4 on the first stage, 6
  // on the second, each stage's over its 2 chunks: 2, 3, 2, 3 in model
  // order (chunk c on stage c mod 2).
  const auto v2 = run(base + "--set layers=10 --pipeline-parallel 2 --virtual-stages 2 --first-stage-layers 4 --micro-batch-size 2 -q -o " + s);
  ASSERT_EQ(v2.code, 0) << v2.out;
  const auto plan = run("plan show " + s);
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("\"boundaries\":[\"block1.mlp_residual\",\"block4.mlp_residual\",\"block6.mlp_residual\"]"), std::string::npos)
      << plan.out;
  // The embeddings and the loss counted as a layer each (Megatron-LM's
  // --account-for-*-in-pipeline-split): 6 layers and 2 more over 4 chunks,
  // the first and the last one layer short: 1, 2, 2, 1.
  const auto counted = run(base + "--set layers=6 --pipeline-parallel 2 --virtual-stages 2 --account-for-embedding-in-pipeline-split "
                                  "--account-for-loss-in-pipeline-split --micro-batch-size 2 -q -o " + s);
  ASSERT_EQ(counted.code, 0) << counted.out;
  const auto counted_plan = run("plan show " + s);
  EXPECT_NE(counted_plan.out.find("\"boundaries\":[\"block0.mlp_residual\",\"block2.mlp_residual\",\"block4.mlp_residual\"]"),
            std::string::npos)
      << counted_plan.out;
  // The embeddings alone: 5 layers and the embeddings over 2 stages, 2 and 3.
  const auto embedding = run(base + "--set layers=5 --pipeline-parallel 2 --account-for-embedding-in-pipeline-split --micro-batch-size 2 -q -o " + s);
  ASSERT_EQ(embedding.code, 0) << embedding.out;
  EXPECT_NE(embedding.out.find("(wte .. block1.mlp_residual)"), std::string::npos) << embedding.out;
  const std::string never = (dir() / "never.json").string();
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--set layers=5 --pipeline-parallel 2 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
            "error: --account-for-embedding-in-pipeline-split: the 5 layers of 'gpt-tiny', the embeddings, the loss: 7 in all, which 2 chunks"},
           {"--set layers=5 --pipeline-parallel 2 --account-for-loss-in-pipeline-split --first-stage-layers 2",
            "error: --account-for-loss-in-pipeline-split: stated where the chunks end more than one way"},
           {"--set layers=5 --pipeline-parallel 2 --first-stage-layers 9223372036854775807 --last-stage-layers 9223372036854775807",
            "error: --first-stage-layers: 'gpt-tiny' has 5 layers, fewer than the"},
           {"--set layers=5 --account-for-loss-in-pipeline-split", "error: --account-for-loss-in-pipeline-split needs pipeline stages"},
           {"--set layers=5 --pipeline-parallel 2 --micro-batch-size 2", "(an uneven split states the first or last stage's layers)"},
           {"--set layers=5 --pipeline-parallel 2 --first-stage-layers 2 --last-stage-layers 2 --micro-batch-size 2",
            "error: --first-stage-layers: 'gpt-tiny' has 5 layers: 2 in the first stage and 2 in the last leave 1, which the 0 stages between"},
           {"--set layers=6 --pipeline-parallel 4 --last-stage-layers 1 --micro-batch-size 2",
            "error: --last-stage-layers: 'gpt-tiny' has 6 layers: 1 in the last leave 5, which the 3 stages between cannot share evenly"},
           {"--set layers=5 --first-stage-layers 2", "error: --first-stage-layers needs pipeline stages (--pipeline-parallel P)"},
           {"--set layers=6 --pipeline-parallel 2 --virtual-stages 2 --last-stage-layers 1 --micro-batch-size 2",
            "error: --last-stage-layers: the first stage's 5 layers do not split evenly over its 2 virtual stages"},
           {"--set layers=5 --pipeline-parallel 2 --virtual-stages 2 --first-stage-layers 4 --last-stage-layers 1 --micro-batch-size 2",
            "error: --last-stage-layers: the last stage's 1 layers do not split evenly over its 2 virtual stages"},
           {"--set layers=10 --pipeline-parallel 4 --virtual-stages 2 --first-stage-layers 2 --last-stage-layers 2 --micro-batch-size 1",
            "error: --first-stage-layers: each middle stage's 3 layers do not split evenly over its 2 virtual stages"},
           {"--set layers=5 --pipeline-parallel 2 --first-stage-layers 0", "error: --first-stage-layers: "}})
    expect_refused(base + flags, says, never);
}


// --pipeline-layout: Megatron-LM's layout string states each chunk; more
// chunks than stages are virtual stages, implied.
// Unity searching a chunk that holds only a transformer's head and loss
// starts from Megatron-LM's vocabulary-parallel plan too
// (SearchOptions::transformer_chunk): with a 50,000-word vocabulary on 4
// devices it splits the head's weight instead of copying it, a quarter of
// data parallelism's memory there, and its chunk (4 micro-batches and the
// once-per-step update) is faster than data parallelism's, whose head
// weights' all-reduce dominates (when written: 0.50 against 0.86 ms; 0.66
// from unity's other seeds alone).
TEST(OptimizePipeline, UnityStartsAHeadOnlyChunkFromTheVocabularyParallelPlan) {
  const std::string job = "optimize gpt-tiny --set vocab=50000 --set batch=16 --set hidden=256 --set ffn=1024 --set heads=4 --machine dgx-h100 "
                          "--devices 8 --pipeline --stages 2 --pipeline-layout 'Ett|L' --micro-batches 4 -o ";
  auto stage2 = [&](const std::string& search) {
    const std::string out = (dir() / ("head-" + search + ".json")).string();
    const auto r = run(job + out + " --search " + search);
    EXPECT_EQ(r.code, 0) << r.out;
    const size_t at = r.out.find("  stage 2  devices 4..7");
    EXPECT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    const size_t mib = line.rfind(", ");
    std::ifstream in(out);
    const auto j = nlohmann::json::parse(in);
    const auto& c = j.at("pipeline").at("chunks").at(1);
    const double chunk = 4 * (c.at("forward").get<double>() + c.at("backward").get<double>()) + c.at("update").get<double>();
    return std::make_pair(std::stod(line.substr(mib + 2)), chunk);
  };
  const auto [unity_mib, unity_chunk] = stage2("unity");
  const auto [dp_mib, dp_chunk] = stage2("data-parallel");
  EXPECT_LT(unity_mib, 0.5 * dp_mib);
  EXPECT_LT(unity_chunk, dp_chunk);
}

TEST(OptimizePipeline, MegatronPipelineLayout) {
  const std::string s = (dir() / "layout.json").string();
  const std::string base = "optimize gpt-tiny --set batch=8 --set layers=6 --global-batch --machine cpu-host --devices 4 --search megatron ";
  const auto r = run(base + "--pipeline-parallel 2 --pipeline-layout 'Et|t*2|(t*2|)*1,tL' --micro-batch-size 2 -q -o " + s);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("interleaved 1F1B (2 virtual stages per device)"), std::string::npos) << r.out;
  const auto plan = run("plan show " + s);
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("\"boundaries\":[\"block0.mlp_residual\",\"block2.mlp_residual\",\"block4.mlp_residual\"]"), std::string::npos)
      << plan.out;
  EXPECT_NE(plan.out.find("\"virtual_stages\":2"), std::string::npos) << plan.out;
  const auto t = run("run " + s + " --steps 2 --no-report --no-plot");
  EXPECT_EQ(t.code, 0) << t.out;
  // The embeddings alone in the first chunk, the head alone in the last.
  const auto ends = run(base + "--pipeline-parallel 4 --pipeline-layout 'E|t*3|t*3|L' --micro-batch-size 2 -q -o " + s);
  ASSERT_EQ(ends.code, 0) << ends.out;
  EXPECT_NE(ends.out.find("(wte .. emb_dropout)"), std::string::npos) << ends.out;
  EXPECT_NE(ends.out.find("(ln_f .. loss)"), std::string::npos) << ends.out;
  const auto ends_run = run("run " + s + " --steps 2 --no-report --no-plot");
  EXPECT_EQ(ends_run.code, 0) << ends_run.out;
  const auto expert = run("optimize gpt-tiny --set batch=8 --set layers=6 --global-batch --machine cpu-host --devices 4 --search expert "
                          "--pipeline --stages 4 --micro-batches 2 --pipeline-layout 'E|t*3|t*3|L' -q -o " + s);
  EXPECT_EQ(expert.code, 0) << expert.out;
  // A written plan states it too ("layout"), its virtual stages implied.
  const auto write_plan = [&](const std::string& name, const std::string& pipeline) {
    const std::string path = (dir() / name).string();
    std::ofstream(path) << R"({"format": "pcgx.plan", "format_version": 1, "pipeline": )" << pipeline
                        << R"(, "rules": [{"select": {}, "partition": {}}]})";
    return path;
  };
  const std::string planned = write_plan("layout-plan.json", R"({"stages": 2, "micro_batches": 4, "layout": "Et|t*2|(t*2|)*1,tL"})");
  const auto p = run("optimize gpt-tiny --set batch=8 --set layers=6 --global-batch --machine cpu-host --devices 4 --plan " + planned + " -q -o " + s);
  ASSERT_EQ(p.code, 0) << p.out;
  const auto shown = run("plan show " + s);
  EXPECT_NE(shown.out.find("\"boundaries\":[\"block0.mlp_residual\",\"block2.mlp_residual\",\"block4.mlp_residual\"]"), std::string::npos)
      << shown.out;
  for (const auto& [pipeline, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"stages": 2, "micro_batches": 4, "layout": "Et|t*2|tX"})", "pipeline.layout: unknown character 'X'"},
           {R"({"stages": 2, "micro_batches": 4, "layout": "Et*3|tt|tL"})", "pipeline.layout: the layout has 3 chunks, and 2 stages x 1 virtual"},
           {R"({"stages": 2, "micro_batches": 4, "layout": "Et*2|t*3L"})", "pipeline.layout: 'gpt-tiny' has 6 layers, and the chunks hold 5"},
           {R"({"stages": 2, "micro_batches": 4, "layout": "Et*3|t*3L", "boundaries": ["block2.mlp_residual"]})",
            "pipeline.layout: give the layout or the boundaries, not both"}}) {
    const std::string bad_plan = write_plan("bad-layout-plan.json", pipeline);
    const auto bad = run("optimize gpt-tiny --set batch=8 --set layers=6 --global-batch --machine cpu-host --devices 4 --plan " + bad_plan +
                         " -q -o " + (dir() / "never.json").string());
    EXPECT_EQ(bad.code, 2) << pipeline << "\n" << bad.out;
    EXPECT_NE(bad.out.find("error: " + bad_plan + ": " + says), std::string::npos) << pipeline << "\n" << bad.out;
  }
  const std::string never = (dir() / "never.json").string();
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--pipeline-parallel 2 --pipeline-layout 'Et*2|t*2|tL'",
            "error: --pipeline-layout: the layout has 3 chunks, and 2 stages x 1 virtual stages are 2"},
           {"--pipeline-parallel 2 --pipeline-layout 'Et*2|t*3L'", "error: --pipeline-layout: 'gpt-tiny' has 6 layers, and the chunks hold 5"},
           {"--pipeline-parallel 2 --pipeline-layout 'Et*3|t*3X'", "error: --pipeline-layout: unknown character 'X'"},
           {"--pipeline-parallel 2 --pipeline-layout 'Et*3|t*3L' --first-stage-layers 3",
            "error: --pipeline-layout: stated where the chunks end more than one way"},
           {"--pipeline --stages 1 --pipeline-layout 'Et*3|t*3L'", "error: --pipeline-layout: needs pipeline stages stated (more than 1)"},
           {"--pipeline-parallel 2 --virtual-stages 1 --pipeline-layout 'Et*2|t|t*2|tL'",
            "error: --pipeline-layout: the layout has 4 chunks, and 2 stages x 1 virtual stages are 2"},
           {"--pipeline-layout 'Et*3|t*3L'", "error: --pipeline-layout needs the pipeline stages stated"}})
    expect_refused(base + flags + " --micro-batch-size 2", says, never);
}

}  // namespace
