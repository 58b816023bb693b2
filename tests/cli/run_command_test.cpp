// `pcgx run`: the acceptance command trains and leaves its report;
// bad input is one error line and exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_run_test");
  return d;
}

TEST(RunCommand, OptimizesAndTrainsOnFourDevices) {
  const std::string report = (dir() / "r.json").string(), plot = (dir() / "l.svg").string();
  const auto r = run("run mlp-tiny --optimize --devices 4 --steps 30 --batches 1 --report " + report + " --plot " + plot);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ms predicted"), std::string::npos) << r.out;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["format"], "pcgx.run");
  EXPECT_EQ(j["devices"], 4);
  ASSERT_EQ(j["loss"].size(), 30u);
  EXPECT_LT(j["loss"][29].get<double>(), j["loss"][0].get<double>());  // one batch: the loss falls
  std::ifstream svg(plot);
  std::string text((std::istreambuf_iterator<char>(svg)), {});
  EXPECT_NE(text.find("<polyline"), std::string::npos);
}

// --profile-out writes the measured kernel times; optimize and run read them.
TEST(RunCommand, MeasuredProfileFeedsTheCostModel) {
  const std::string report = (dir() / "p-r.json").string(), plot = (dir() / "p-l.svg").string();
  const std::string prof = (dir() / "profile.json").string(), s = (dir() / "p-s.json").string();
  const auto r = run("run mlp-tiny --steps 4 --report " + report + " --plot " + plot + " --profile-out " + prof);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(prof);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["kind"], "pcgx.profile");
  EXPECT_GE(j["entries"].size(), 2u);
  EXPECT_GT(j["update"]["bytes_per_second"].get<double>(), 0);
  const auto o = run("optimize mlp-tiny --machine cpu-host --devices 2 --profile " + prof + " -o " + s);
  ASSERT_EQ(o.code, 0) << o.out;
  const auto t = run("run " + s + " --steps 3 --profile " + prof + " --report " + report + " --plot " + plot);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("ms predicted"), std::string::npos) << t.out;
}

// --trace writes the last step's measured timeline, a track per device.
TEST(RunCommand, TraceWritesTheMeasuredTimeline) {
  const std::string trace = (dir() / "trace.json").string();
  const auto r = run("run mlp-tiny --optimize --devices 2 --steps 3 --no-report --no-plot --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote " + trace + " (step 3:"), std::string::npos) << r.out;
  std::ifstream in(trace);
  const auto j = nlohmann::json::parse(in);
  int tracks = 0, kernels = 0, updates = 0;
  for (const auto& e : j["traceEvents"]) {
    tracks += e["ph"] == "M" && e["name"] == "thread_name";
    kernels += e["ph"] == "X" && (e["cat"] == "forward" || e["cat"] == "backward");
    updates += e["ph"] == "X" && e["cat"] == "update";
  }
  EXPECT_EQ(tracks, 2);
  EXPECT_GT(kernels, 0);
  EXPECT_EQ(updates, 2);
  // A trace path that cannot be written fails before training.
  const auto bad = run("run mlp-tiny --steps 2 --no-report --no-plot --trace /nonexistent/dir/t.json");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_EQ(bad.out.rfind("error: ", 0), 0u) << bad.out;
}

TEST(RunCommand, StrategyFileNeedsItsDevices) {
  const std::string s = (dir() / "dp.json").string();
  ASSERT_EQ(run("optimize mlp-tiny --machine cpu-host --devices 4 --search data-parallel -q -o " + s).code, 0);
  const auto ok = run("run " + s + " --steps 2 --report " + (dir() / "a.json").string() + " --plot " + (dir() / "a.svg").string());
  EXPECT_EQ(ok.code, 0) << ok.out;
  const auto r = run("run " + s + " --devices 2 --steps 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("error: --devices: " + s + " needs 4 devices, 2 given"), std::string::npos) << r.out;
}

TEST(RunCommand, BadInputIsExitCode2) {
  for (const std::string args : {"run no-such-model", "run mlp-tiny --backend gpu", "run mlp-tiny --steps 0",
                                 "run mlp-tiny --optimizer rmsprop", "run mlp-tiny --lr -1", "run mlp-tiny --devices 99",
                                 "run mlp-tiny --data /nonexistent/data"}) {
    const auto r = run(args + " --report " + (dir() / "x.json").string());
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << args << "\n" << r.out;
    EXPECT_FALSE(fs::exists(dir() / "x.json")) << args;
  }
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// 10 steps with a checkpoint, then --resume to 20, save the same weights
// file as 20 steps straight, on 1 device and on 4; --init-weights takes a
// saved file back.
TEST(RunCommand, CheckpointResumeAndWeightsFiles) {
  for (const std::string devices : {"", " --optimize --search data-parallel --devices 4"}) {
    SCOPED_TRACE(devices);
    const fs::path d = dir() / (devices.empty() ? "ck1" : "ck4");
    fs::create_directories(d);
    const std::string common = "run mlp-tiny --batches 3 --optimizer adam --no-report --no-plot" + devices;
    const auto whole = run(common + " --steps 20 --save-weights " + (d / "whole.safetensors").string());
    ASSERT_EQ(whole.code, 0) << whole.out;
    const auto first = run(common + " --steps 10 --checkpoint " + (d / "ck").string() + " --checkpoint-every 5");
    ASSERT_EQ(first.code, 0) << first.out;
    EXPECT_NE(first.out.find("wrote checkpoint " + (d / "ck").string() + " (step 5)"), std::string::npos) << first.out;
    EXPECT_NE(first.out.find("(step 10)"), std::string::npos) << first.out;
    const auto rest = run(common + " --steps 20 --resume " + (d / "ck").string() + " --save-weights " + (d / "resumed.safetensors").string());
    ASSERT_EQ(rest.code, 0) << rest.out;
    EXPECT_NE(rest.out.find("(steps 11-20, resumed)"), std::string::npos) << rest.out;
    EXPECT_EQ(file_bytes(d / "resumed.safetensors"), file_bytes(d / "whole.safetensors"));
    const auto again = run("run mlp-tiny --steps 2 --no-report --no-plot --init-weights " + (d / "whole.safetensors").string());
    EXPECT_EQ(again.code, 0) << again.out;
  }
}

TEST(RunCommand, WeightsAndCheckpointErrorsAreOneLine) {
  const fs::path d = dir() / "bad";
  fs::create_directories(d);
  ASSERT_EQ(run("run mlp-tiny --steps 2 --no-report --no-plot --save-weights " + (d / "w.st").string()).code, 0);
  { std::ofstream(d / "junk.st") << "junk"; }
  const std::string w = (d / "w.st").string();
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"run mlp-tiny --checkpoint-every 3", "error: --checkpoint-every: needs a checkpoint directory (--checkpoint)"},
           {"run gpt-tiny --init-weights " + w, "error: " + w + ": no tensor "},
           {"run mlp-tiny --init-weights " + (d / "junk.st").string(), "error: " + (d / "junk.st").string() + ": not a safetensors file"},
           {"run mlp-tiny --resume " + (d / "none").string(), "error: " + (d / "none").string() + ": no such checkpoint directory"},
           {"run mlp-tiny --init-weights " + w + " --resume " + d.string(), "error: --init-weights: a resumed run"},
           {"run mlp-tiny --checkpoint /nonexistent/dir/ck", "error: --checkpoint: /nonexistent/dir: no such directory"}}) {
    const auto r = run(args + " --steps 2 --no-report --no-plot");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind(want, 0), 0u) << args << "\n" << r.out;
  }
  // A checkpoint directory that is something else: refused before any
  // training (it failed after the run, leaving a full DIR.partial).
  const fs::path other = d / "not_a_checkpoint";
  fs::create_directories(other);
  { std::ofstream(other / "notes.txt") << "mine"; }
  const auto r = run("run mlp-tiny --steps 200 --no-report --no-plot --checkpoint " + other.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("error: " + other.string() + ": exists and is not a checkpoint (no state.json): not replacing it"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("step "), std::string::npos) << "trained first: " << r.out;
  EXPECT_FALSE(fs::exists(other.string() + ".partial"));
  EXPECT_TRUE(fs::exists(other / "notes.txt"));
  // A table of 2^40 rows passed every check and ended as "error: out of
  // memory": the tensor is named before anything is allocated.
  const std::string exported = (d / "gpt.json").string();
  ASSERT_EQ(run("export gpt-tiny -o " + exported).code, 0);
  std::ifstream in(exported);
  auto g = nlohmann::json::parse(in);
  for (auto& n : g["nodes"])
    if (n["name"] == "wte.table") n["attrs"]["shape"][0] = int64_t{1} << 40;
  const std::string huge = (d / "huge_table.json").string();
  std::ofstream(huge) << g.dump();
  const auto big = run("run " + huge + " --steps 1 --no-report --no-plot");
  EXPECT_EQ(big.code, 2) << big.out;
  EXPECT_NE(big.out.find("error: node 2 'wte.table' (Weight): one shard of its output f32[1099511627776, 32] takes 131072.0 GiB, more than this machine's "),
            std::string::npos) << big.out;
}

// --backend cuda trains on a GPU where one is visible; elsewhere it is one
// error line saying why, exit 2, and nothing written.
TEST(RunCommand, CudaBackendTrainsOrSaysWhyNot) {
  const std::string report = (dir() / "cuda.json").string();
  const auto r = run("run mlp-tiny --backend cuda --steps 3 --batches 1 --no-plot --report " + report);
  if (r.code == 0) {
    std::ifstream in(report);
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j["backend"], "cuda");
    EXPECT_EQ(j["loss"].size(), 3u);
    return;
  }
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.rfind("error: --backend: cuda needs a GPU, and there is none: ", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_FALSE(fs::exists(report));
  std::printf("no GPU here: %s", r.out.c_str());
}

// `run --optimize` and `optimize` take one search path (runner::optimize):
// every algorithm loads the same rules and finds the same plan through
// both. mcmc once loaded no rules under `run` ("0 substitutions").
TEST(RunCommand, OptimizeAndRunOptimizeSearchAlike) {
  for (const char* search : {"mcmc", "unity"}) {
    SCOPED_TRACE(search);
    const std::string a = (dir() / (std::string(search) + "-optimize.json")).string();
    const std::string b = (dir() / (std::string(search) + "-run.json")).string();
    const std::string common = std::string(" --search ") + search + " --machine cpu-host --devices 2";
    const auto o = run("optimize mlp-tiny --global-batch -q" + common + " -o " + a);
    ASSERT_EQ(o.code, 0) << o.out;
    const auto r = run("run mlp-tiny --optimize --steps 1 --no-report --no-plot --save-strategy " + b + common);
    ASSERT_EQ(r.code, 0) << r.out;
    // The same rules, said the same way by both.
    const auto rules_line = [](const std::string& out) {
      const size_t at = out.find(" rules (both directions");
      if (at == std::string::npos) return std::string();
      const size_t start = out.rfind('\n', at);
      return out.substr(start + 1, out.find('\n', at) - start - 1);
    };
    ASSERT_FALSE(rules_line(o.out).empty()) << o.out;
    EXPECT_EQ(rules_line(o.out), rules_line(r.out)) << r.out;
    EXPECT_EQ(rules_line(r.out).rfind("  0 rules", 0), std::string::npos) << r.out;
    std::ifstream fa(a), fb(b);
    const auto ja = nlohmann::json::parse(fa), jb = nlohmann::json::parse(fb);
    EXPECT_EQ(ja["search"], jb["search"]);
    EXPECT_EQ(ja["applied"], jb["applied"]);
    EXPECT_EQ(ja["graph"], jb["graph"]);
    EXPECT_EQ(ja["views"], jb["views"]);
  }
}

}  // namespace
