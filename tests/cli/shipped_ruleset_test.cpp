// The shipped ruleset: it audits clean, a hand edit is caught and named, and
// `pcgx regenerate` reproduces it from scratch (same content hash).
#include <gtest/gtest.h>

#include "cli/run_pcgx.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

const std::string kShipped = std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json";

std::pair<int, std::string> run_pcgx(const std::string& args) {
  const auto r = pcgx::testing::run(args);
  return {r.code, r.out};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("pcgx_shipped_" + std::to_string(::getpid()) + "_" + name);
  fs::create_directories(d);
  return d;
}

TEST(ShippedRuleset, AuditsClean) {
  const auto [code, out] = run_pcgx("audit " + kShipped);
  EXPECT_EQ(code, 0) << out.substr(out.size() > 2000 ? out.size() - 2000 : 0);
  EXPECT_NE(out.find("content hash   ok"), std::string::npos);
}

TEST(ShippedRuleset, AHandEditIsCaughtAndNamed) {
  nlohmann::json j = nlohmann::json::parse(slurp(kShipped));
  std::string edited;
  for (auto& rule : j["rules"]) {
    for (auto& node : rule["target"]["nodes"])
      if (node["op"] == "Relu") {
        node["op"] = "Tanh";  // one rule changed, the content hash left as it was
        edited = rule["id"];
        break;
      }
    if (!edited.empty()) break;
  }
  ASSERT_FALSE(edited.empty());
  const fs::path dir = scratch("edit");
  const fs::path path = dir / "edited.json";
  std::ofstream(path) << j.dump();
  const auto [code, out] = run_pcgx("audit " + path.string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("content hash   MISMATCH"), std::string::npos);
  EXPECT_NE(out.find("FAIL " + edited + ":"), std::string::npos) << "the audit should name " << edited;
  fs::remove_all(dir);
}

TEST(ShippedRuleset, RegenerateReproducesTheContentHash) {
  const fs::path dir = scratch("regen");
  const auto [code, out] = run_pcgx("regenerate --out-dir " + dir.string());
  ASSERT_EQ(code, 0) << out;
  const auto shipped = nlohmann::json::parse(slurp(kShipped));
  const auto fresh = nlohmann::json::parse(slurp(dir / "unity-v1.json"));
  EXPECT_EQ(fresh["content_hash"], shipped["content_hash"]) << "rulesets/unity-v1.json is stale: run `pcgx regenerate --no-reuse`";
  const auto manifest = nlohmann::json::parse(slurp(dir / "MANIFEST.json"));
  EXPECT_EQ(manifest["rulesets"]["unity-v1"]["content_hash"], shipped["content_hash"]);
  fs::remove_all(dir);
}

}  // namespace
