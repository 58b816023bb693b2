// The two jobs that once found no plan (README, "For the full-size models
// on a cluster"), end to end through the binary: Megatron-LM's 1.7B GPT
// on 32 dgx-a100 devices in FP16 (the global batch of 512) and LLaMA-7B at
// its context of 2048 on 8 dgx-h100 devices in BF16. Each must return a
// plan that fits a device's 80 GiB, the recomputation and ZeRO stage
// searched as optimize searches them by default. The GPT's micro-batches
// are stated (4, what the default search chooses: README): left open, the
// search tries every recipe in one batch first, 2 minutes on 2 cores
// (2026-12-01), where stated it takes 7 s.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/run_pcgx.h"

namespace pcgx::testing {
namespace {

// optimize ARGS -q -o FILE: the strategy it wrote; `report`, what it printed.
nlohmann::json optimized(const std::string& args, const std::string& file, std::string* report = nullptr) {
  const std::string path = (std::filesystem::temp_directory_path() / file).string();
  std::filesystem::remove(path);
  const Result r = run("optimize " + args + " -q -o " + path);
  EXPECT_EQ(r.code, 0) << r.out;
  if (report) *report = r.out;
  std::ifstream in(path);
  if (!in) return {};
  return nlohmann::json::parse(in);
}

void expect_fits(const nlohmann::json& s, const std::string& precision) {
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s.at("precision"), precision);
  const double memory = s.at("predicted").at("max_memory").get<double>(), time = s.at("predicted").at("time").get<double>();
  EXPECT_GT(memory, 0);
  EXPECT_LE(memory, 80.0 * 1024 * 1024 * 1024);
  EXPECT_TRUE(std::isfinite(time) && time > 0) << time;
}

TEST(LargeModelJobs, MegatronLm17BFitsOn32A100sInFp16) {
  std::string report;
  expect_fits(optimized("gpt --set layers=24 --set hidden=2304 --set heads=24 --set ffn=9216 --set seq=2048 --set vocab=51200 "
                        "--set batch=512 --global-batch --machine dgx-a100 --devices 32 --precision fp16 --micro-batches 4",
                        "pcgx-large-gpt-1.7b.json", &report),
              "fp16");
  // The report names the recipe chosen and what each device keeps, by kind
  // (memory_report_test.cpp checks those lines' form).
  for (const char* line : {"\ngradient accumulation 4 micro-batches of ", "\nprecision             fp16 (FP32 master weights",
                           "\nrecompute             ", "\nZeRO stage            ", "\nmemory per device     "})
    EXPECT_NE(report.find(line), std::string::npos) << line << "\n" << report;
  const size_t memory = report.find("\nmemory per device     ");
  ASSERT_NE(memory, std::string::npos) << report;
  const size_t next = report.find('\n', memory + 1);  // the line after "memory per device"
  ASSERT_NE(next, std::string::npos) << report;
  const std::string line = report.substr(next + 1, report.find('\n', next + 1) - next - 1);
  EXPECT_EQ(line.rfind("  device", 0), 0u) << report;
  EXPECT_NE(line.find(": weights "), std::string::npos) << report;
}

TEST(LargeModelJobs, Llama7BAtContext2048FitsOn8H100sInBf16) {
  expect_fits(optimized("llama --set seq=2048 --machine dgx-h100 --devices 8 --precision bf16", "pcgx-large-llama-7b.json"), "bf16");
}

}  // namespace
}  // namespace pcgx::testing
