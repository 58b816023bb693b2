// `pcgx verify` on candidates over an operator with no SMT encoding: the
// rules stay unproved, and the command says which operator lacks its rows
// and exits 1 instead of 0.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/run_pcgx.h"
#include "pcgx/rulesets/ruleset.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

pcgx::Graph graph(bool pipelined) {
  pcgx::Graph g(pipelined ? "pipelined" : "plain");
  pcgx::TensorRef x{g.add("Input", {{"shape", pcgx::IntList{4, 4}}}, {}, "x"), 0};
  if (pipelined) {
    x = {g.add("Pipeline", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {x}), 0};
    x = {g.add("Batch", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {x}), 0};
  }
  g.add_output({g.add("Relu", {}, {x}), 0});
  return g;
}

TEST(VerifyCommand, AnOperatorWithoutAnEncodingFailsNamingIt) {
  const fs::path d = pcgx::testing::temp_dir("pcgx_verify_unencoded");
  pcgx::Ruleset candidates;
  candidates.name = "pipelined";
  candidates.rules.push_back({"pipelined-relu", graph(true), graph(false), {{0, 0}}, std::nullopt});
  pcgx::save_ruleset(candidates, (d / "c.json").string());
  const auto r = run("verify " + (d / "c.json").string() + " -o " + (d / "v.json").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("1 candidates are unproved because their operators have no SMT encoding: Batch (1)"), std::string::npos) << r.out;
}

}  // namespace
