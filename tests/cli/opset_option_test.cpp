// --opset NAME|FILE and --ops for generate and regenerate: the help lists
// the shipped opsets, an opset file of one's own generates, and regenerate
// proves a custom operator list into custom-v<N>.json without touching the
// source.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_opset_option_test");
  return d;
}

TEST(OpsetOption, HelpListsTheShippedOpsets) {
  for (const std::string cmd : {"generate", "regenerate"}) {
    const auto r = run(cmd + " --help");
    EXPECT_EQ(r.code, 0);
    EXPECT_NE(r.out.find("attention, conv, llama, recsys, unity"), std::string::npos) << r.out;
  }
}

TEST(OpsetOption, AnOpsetFileGenerates) {
  const fs::path f = dir() / "mine.json";
  std::ofstream(f) << R"({"format": "pcgx.opset", "name": "mine", "ops": ["Relu", "Repartition", "Combine"]})";
  const auto r = run("generate --opset " + f.string() + " --max-ops 2 -o " + (dir() / "mine-candidates.json").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("opset mine"), std::string::npos) << r.out;
  const auto bad = run("generate --opset " + (dir() / "none.json").string() + " -o " + (dir() / "x.json").string());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_EQ(bad.out.rfind("error: ", 0), 0u) << bad.out;
}

TEST(OpsetOption, RegenerateProvesACustomList) {
  const fs::path out = dir() / "rulesets";
  fs::create_directories(out);
  const auto r = run("regenerate --ops Relu,Repartition,Combine --max-ops 2 --out-dir " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(out / "custom-v1.json"));
  EXPECT_NE(r.out.find("wrote " + (out / "custom-v1.json").string()), std::string::npos) << r.out;
  std::ifstream m(out / "MANIFEST.json");
  const std::string manifest((std::istreambuf_iterator<char>(m)), {});
  EXPECT_NE(manifest.find("--ops 'Relu,Repartition,Combine'"), std::string::npos) << manifest;
}

}  // namespace
