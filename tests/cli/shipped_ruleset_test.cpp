// The shipped rulesets: each audits clean and `pcgx regenerate`, run as its
// MANIFEST entry says, reproduces it from scratch (same content hash); a
// hand edit is caught and named.
#include <gtest/gtest.h>

#include "cli/run_pcgx.h"

#include <cctype>
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

const nlohmann::json& manifest() {
  static const nlohmann::json m = nlohmann::json::parse(slurp(std::string(PCGX_SOURCE_DIR) + "/rulesets/MANIFEST.json"));
  return m;
}

std::vector<std::string> shipped_names() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : manifest()["rulesets"].items()) names.push_back(name);
  return names;
}

class ShippedRuleset : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedRuleset, AuditsClean) {
  const std::string file = std::string(PCGX_SOURCE_DIR) + "/rulesets/" + manifest()["rulesets"][GetParam()]["file"].get<std::string>();
  const auto [code, out] = run_pcgx("audit " + file);
  EXPECT_EQ(code, 0) << out.substr(out.size() > 2000 ? out.size() - 2000 : 0);
  EXPECT_NE(out.find("content hash   ok"), std::string::npos);
}

TEST_P(ShippedRuleset, RegenerateReproducesTheContentHash) {
  const auto& entry = manifest()["rulesets"][GetParam()];
  const std::string command = entry["command"];
  ASSERT_EQ(command.rfind("pcgx ", 0), 0u) << command;
  const fs::path dir = scratch("regen_" + GetParam());
  const auto [code, out] = run_pcgx(command.substr(5) + " --out-dir " + dir.string());
  ASSERT_EQ(code, 0) << out;
  const auto fresh = nlohmann::json::parse(slurp(dir / entry["file"].get<std::string>()));
  EXPECT_EQ(fresh["content_hash"], entry["content_hash"])
      << "rulesets/" << entry["file"].get<std::string>() << " is stale: run `" << command << " --no-reuse`";
  const auto written = nlohmann::json::parse(slurp(dir / "MANIFEST.json"));
  EXPECT_EQ(written["rulesets"][GetParam()]["content_hash"], entry["content_hash"]);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Manifest, ShippedRuleset, ::testing::ValuesIn(shipped_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(ShippedRulesetEdit, AHandEditIsCaughtAndNamed) {
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

}  // namespace
