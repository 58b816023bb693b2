// `pcgx eval`: weights saved by `pcgx run` evaluated on 1 and 4 devices
// give the same loss and accuracy; user data; bad input is one error line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>
#include <string>

#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_eval_test");
  return d;
}

// The number after `field` in pcgx's output.
double field(const std::string& out, const std::string& name) {
  const auto at = out.find("\n" + name);
  if (at == std::string::npos) return NAN;
  return std::strtod(out.c_str() + out.find_first_not_of(' ', at + 1 + name.size()), nullptr);
}

TEST(EvalCommand, SameLossAndAccuracyOnOneAndFourDevices) {
  const std::string w = (dir() / "rx.safetensors").string();
  const std::string model = "resnext-50-tiny --batch 8";
  ASSERT_EQ(run("run " + model + " --steps 3 --no-report --no-plot --save-weights " + w).code, 0);
  const auto one = run("eval " + model + " --weights " + w + " --batches 2");
  const auto four = run("eval " + model + " --weights " + w + " --batches 2 --devices 4");
  ASSERT_EQ(one.code, 0) << one.out;
  ASSERT_EQ(four.code, 0) << four.out;
  EXPECT_NE(four.out.find("(data parallel)"), std::string::npos) << four.out;
  EXPECT_NE(one.out.find("samples               16 in 2 batches"), std::string::npos) << one.out;
  const double l1 = field(one.out, "loss"), l4 = field(four.out, "loss");
  EXPECT_TRUE(std::isfinite(l1)) << one.out;
  EXPECT_NEAR(l4, l1, 1e-5 * std::fabs(l1));
  EXPECT_EQ(field(four.out, "accuracy"), field(one.out, "accuracy"));
  EXPECT_GE(field(one.out, "accuracy"), 0.0);
}

// A float32 .npy of `shape` holding 0.01 * i (version 1.0).
void write_npy(const fs::path& p, std::vector<int64_t> shape) {
  std::string dims;
  int64_t n = 1;
  for (int64_t d : shape) dims += std::to_string(d) + ", ", n *= d;
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01', out += '\x00', out += static_cast<char>(header.size()), out += '\x00';
  out += header;
  for (int64_t i = 0; i < n; ++i) {
    const float v = 0.01f * static_cast<float>(i % 97);
    out.append(reinterpret_cast<const char*>(&v), 4);
  }
  std::ofstream(p, std::ios::binary) << out;
}

TEST(EvalCommand, UserDataIsReadBatchByBatch) {
  const std::string w = (dir() / "mlp-data.safetensors").string();
  ASSERT_EQ(run("run mlp-tiny --steps 2 --no-report --no-plot --save-weights " + w).code, 0);
  const fs::path data = dir() / "data";
  fs::create_directories(data);
  write_npy(data / "x.npy", {24, 16});
  write_npy(data / "target.npy", {24, 16});
  const auto r = run("eval mlp-tiny --weights " + w + " --data " + data.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("samples               24 in 3 batches"), std::string::npos) << r.out;
  EXPECT_TRUE(std::isfinite(field(r.out, "loss"))) << r.out;
  EXPECT_EQ(r.out.find("accuracy"), std::string::npos) << "MSE is no classification";
}

TEST(EvalCommand, BadInputIsOneErrorLine) {
  const std::string w = (dir() / "mlp.safetensors").string();
  ASSERT_EQ(run("run mlp-tiny --steps 2 --no-report --no-plot --save-weights " + w).code, 0);
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"eval gpt-tiny --weights " + w, "error: " + w + ": no tensor "},
           {"eval mlp-tiny --weights /nonexistent.st", "error: "},
           {"eval mlp-tiny --weights " + w + " --data /nonexistent/dir", "error: "},
           {"eval mlp-tiny --weights " + w + " --backend gpu", "error: --backend: unknown backend 'gpu'"}}) {
    const auto r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind(want, 0), 0u) << args << "\n" << r.out;
  }
}

}  // namespace
