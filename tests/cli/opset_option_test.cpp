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
    EXPECT_NE(r.out.find("attention, conv, dropout, layernorm, llama, recsys, unity"), std::string::npos) << r.out;
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

// Regenerating over an earlier ruleset reuses its proofs and says so;
// --no-reuse proves everything; a missing --reuse file is one error line.
TEST(OpsetOption, RegenerateReusesTheProofsOfTheRulesetItReplaces) {
  const fs::path out = dir() / "reuse";
  fs::create_directories(out);
  const std::string cmd = "regenerate --ops Relu,Repartition,Combine --max-ops 2 --out-dir " + out.string();
  auto r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("reused "), std::string::npos) << r.out;  // nothing to reuse yet
  const std::string first = r.out.substr(r.out.find("wrote "));
  r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("reused "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; proved 0 anew"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(r.out.find("wrote "), first.find('\n')), first.substr(0, first.find('\n')));  // the same content hash
  r = run(cmd + " --no-reuse");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("reused "), std::string::npos) << r.out;
  for (const std::string& bad : {" --reuse " + (out / "none.json").string(), " --reuse " + (out / "custom-v1.json").string() + " --no-reuse"}) {
    r = run(cmd + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
  }
}

// docs/adding-an-operator.md's opset file and commands, as written there
// (its MyOp played by Relu): the out-dir must exist, regenerate writes the
// ruleset, its unproved list and a manifest there, and optimize searches
// with the new ruleset only when told, checking it numerically first.
TEST(OpsetOption, TheDocumentedWorkflowRuns) {
  std::ifstream doc(std::string(PCGX_SOURCE_DIR) + "/docs/adding-an-operator.md");
  const std::string text((std::istreambuf_iterator<char>(doc)), {});
  const size_t at = text.find("    {\n      \"format\": \"pcgx.opset\"");
  ASSERT_NE(at, std::string::npos) << "the page's opset file example moved";
  std::string block = text.substr(at, text.find("\n    }\n", at) + 6 - at);
  for (size_t p; (p = block.find("MyOp")) != std::string::npos;) block.replace(p, 4, "Relu");
  const fs::path work = dir() / "documented";
  fs::create_directories(work);
  std::ofstream(work / "myops.json") << block;
  // The page: the directory must exist.
  const fs::path out = work / "DIR";
  auto r = run("regenerate --opset " + (work / "myops.json").string() + " --max-ops 2 --out-dir " + out.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--out-dir " + out.string() + ": not a directory"), std::string::npos) << r.out;
  fs::create_directories(out);
  r = run("regenerate --opset " + (work / "myops.json").string() + " --max-ops 2 --out-dir " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* f : {"myops-v1.json", "myops-v1.unproved.txt", "MANIFEST.json"}) EXPECT_TRUE(fs::exists(out / f)) << f;
  EXPECT_NE(r.out.find(" axioms open to them (MANIFEST.json records those used)"), std::string::npos) << r.out;
  // Not used unless given; checked numerically when given.
  const std::string strategy = (work / "s.json").string();
  r = run("optimize mlp-tiny --machine cpu-host --devices 2 -q -o " + strategy);
  // (the default: every shipped ruleset, pinned)
  EXPECT_NE(r.out.find("unity-v1.json, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layernorm-v1.json and "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("llama-v1.json: shipped (content hash pinned)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("myops-v1.json"), std::string::npos) << r.out;
  // --ruleset takes one file, the model may follow it; repeated, the rulesets are one library.
  const std::string unity = std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json";
  r = run("optimize --ruleset " + unity + " mlp-tiny --machine cpu-host --devices 2 -q -o " + strategy);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" rules (both directions, ranks 2-4) from " + unity + ": shipped (content hash pinned)"), std::string::npos) << r.out;
  r = run("optimize --ruleset " + unity + " --ruleset " + std::string(PCGX_SOURCE_DIR) + "/rulesets/llama-v1.json mlp-tiny --machine cpu-host --devices 2 -q -o " + strategy);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(unity + " and "), std::string::npos) << r.out;
  r = pcgx::testing::run_shell("PCGX_CACHE_DIR=" + (work / "cache").string() + " " + PCGX_BINARY +
                               " optimize mlp-tiny --machine cpu-host --devices 2 -q --ruleset " + (out / "myops-v1.json").string() + " -o " + strategy);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("myops-v1.json: every rule checked numerically"), std::string::npos) << r.out;
}

}  // namespace
