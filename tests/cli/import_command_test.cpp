// `pcgx import` and .onnx models wherever a model is taken: the graph and
// weights files written, `pcgx info` and `pcgx run` on the .onnx directly
// (training from its initializers); bad files are one error line. Skips,
// saying why, without /usr/bin/python3 and python3-torch to export models.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/run_pcgx.h"
#include "onnx_exports.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

using pcgx::testing::onnx_exports;

TEST(ImportCommand, WritesTheGraphAndWeightsAndTrainsTheOnnxFile) {
  const fs::path* dir = onnx_exports();
  if (!dir) GTEST_SKIP() << "/usr/bin/python3 with python3-torch is needed to export the models (scripts/test.sh installs it)";
  const std::string onnx = (*dir / "cnn.onnx").string(), graph = (*dir / "cnn.json").string(), w = (*dir / "cnn.safetensors").string();
  const auto r = run("import " + onnx + " -o " + graph + " --weights-out " + w);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1,205 parameters"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(graph));
  EXPECT_TRUE(fs::exists(w));
  const auto info = run("info " + onnx);
  EXPECT_EQ(info.code, 0) << info.out;
  const auto optimized = run("optimize " + onnx + " --machine dgx-h100 --devices 8 --budget 2 -q -o " + (*dir / "cnn-8.json").string());
  EXPECT_EQ(optimized.code, 0) << optimized.out;
  EXPECT_TRUE(fs::exists(*dir / "cnn-8.json"));
  const auto train = run("run " + onnx + " --steps 3 --batches 1 --no-report --no-plot --save-weights " + (*dir / "trained.safetensors").string());
  ASSERT_EQ(train.code, 0) << train.out;
  // The imported graph file with the imported weights trains the same.
  const auto again = run("run " + graph + " --init-weights " + w + " --steps 3 --batches 1 --no-report --no-plot");
  ASSERT_EQ(again.code, 0) << again.out;
  auto loss_line = [](const std::string& out) { return out.substr(out.find("\nloss "), out.find('\n', out.find("\nloss ") + 1) - out.find("\nloss ")); };
  EXPECT_EQ(loss_line(again.out), loss_line(train.out));
}

TEST(ImportCommand, BadModelsAreOneErrorLine) {
  const fs::path d = pcgx::testing::temp_dir("pcgx_import_cli");
  { std::ofstream(d / "junk.onnx") << "junk"; }
  const auto r = run("import " + (d / "junk.onnx").string() + " -o " + (d / "j.json").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out, "error: " + (d / "junk.onnx").string() + ": not an ONNX model (the protobuf does not parse)\n");
  EXPECT_FALSE(fs::exists(d / "j.json"));
  if (const fs::path* dir = onnx_exports()) {
    const auto u = run("import " + (*dir / "unsupported.onnx").string() + " -o " + (d / "u.json").string());
    EXPECT_EQ(u.code, 2) << u.out;
    EXPECT_NE(u.out.find("operators pcgx does not import: Abs x1"), std::string::npos) << u.out;
    EXPECT_FALSE(fs::exists(d / "u.json"));
  }
  const auto loss = run("import " + (d / "junk.onnx").string() + " -o " + (d / "j.json").string() + " --loss hinge");
  EXPECT_EQ(loss.out.rfind("error: --loss: unknown loss head 'hinge'", 0), 0u) << loss.out;
}

}  // namespace
