// An installed pcgx (cmake --install) and a plugin built against it: the
// package's targets, the shipped files found beside the installed binary,
// and examples/softplus-plugin loaded with --plugin and $PCGX_PLUGIN_PATH,
// its axioms and opset found through the plugin, its rules proved, and a
// model using it trained alike on 1 and 4 devices.
#include <gtest/gtest.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_pcgx.h"
#include "temp_dir.h"

namespace pcgx::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kExample = fs::path(PCGX_SOURCE_DIR) / "examples" / "softplus-plugin";

// Installs the build once and builds the example against it.
class Installed : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = temp_dir("pcgx_install");
    prefix_ = root_ / "prefix";
    fs::remove_all(prefix_);
    install_ = run_shell(std::string(PCGX_CMAKE) + " --install " + PCGX_BUILD_DIR + " --prefix " + prefix_.string());
    if (install_.code != 0) return;
    const fs::path build = root_ / "softplus-build";
    fs::remove_all(build);
    plugin_build_ = cmake_build(kExample, build);
    plugin_ = build / "softplus.so";
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  void SetUp() override {
    ASSERT_EQ(install_.code, 0) << install_.out;
    ASSERT_EQ(plugin_build_.code, 0) << plugin_build_.out;
  }
  // The installed pcgx, run from `cwd` (it writes reports there).
  static Result pcgx(const std::string& args, const fs::path& cwd = root_) {
    return run_shell("cd " + cwd.string() + " && " + (prefix_ / "bin" / "pcgx").string() + " " + args);
  }
  static std::string with_plugin() { return "--plugin " + plugin_.string() + " "; }
  // Configures and builds the CMake project at `src` against the installed
  // package, with this build's compiler (and `flags`).
  static Result cmake_build(const fs::path& src, const fs::path& build, const std::string& flags = "") {
    return run_shell(std::string(PCGX_CMAKE) + " -S " + src.string() + " -B " + build.string() + " -DCMAKE_PREFIX_PATH=" +
                     prefix_.string() + " -DCMAKE_CXX_COMPILER=" + PCGX_CXX_COMPILER + " '-DCMAKE_CXX_FLAGS=" + flags + "' && " +
                     PCGX_CMAKE + " --build " + build.string());
  }

  static inline fs::path root_, prefix_, plugin_;
  static inline Result install_, plugin_build_;
};

TEST_F(Installed, HoldsTheBinaryLibrariesHeadersPackageAndShippedFiles) {
  for (const char* f : {"bin/pcgx", "lib/libpcgx_pcg.a", "lib/libpcgx_search.a", "lib/cmake/pcgx/pcgxConfig.cmake",
                        "include/pcgx/pcg/plugin.h", "include/pcgx/pcg/ops/numeric.h", "include/pcgx/search/cost_model.h",
                        "share/pcgx/axioms/prelude.smt2", "share/pcgx/rulesets/unity-v1.json", "share/pcgx/rulesets/MANIFEST.json",
                        "share/pcgx/rulesets/opsets/unity.json", "share/pcgx/data/machines/dgx-h100.json"})
    EXPECT_TRUE(fs::exists(prefix_ / f)) << f;
  // The installed binary reads the installed files, not the source tree's,
  // and does not rewrite its shipped rulesets.
  const fs::path out = root_ / "regenerated";
  fs::create_directories(out);
  const auto r = pcgx("regenerate --ops Relu,Repartition,Combine --max-ops 1 --out-dir " + out.string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" in " + (prefix_ / "share" / "pcgx" / "axioms").string()), std::string::npos) << r.out;
  const auto no_dir = pcgx("regenerate --ops Relu,Repartition,Combine --max-ops 1");
  EXPECT_EQ(no_dir.code, 2) << no_dir.out;
  EXPECT_NE(no_dir.out.find("error: --out-dir: required with an installed pcgx"), std::string::npos) << no_dir.out;
}

// A program of one's own against the package's library targets.
TEST_F(Installed, AProgramLinksThePackagesLibraries) {
  const fs::path src = root_ / "consumer", build = root_ / "consumer-build";
  fs::create_directories(src);
  std::ofstream(src / "CMakeLists.txt") << "cmake_minimum_required(VERSION 3.25)\nproject(consumer LANGUAGES CXX)\n"
                                           "find_package(pcgx REQUIRED)\nadd_executable(consumer main.cpp)\n"
                                           "target_link_libraries(consumer PRIVATE pcgx::search)\n";
  std::ofstream(src / "main.cpp") << "#include <iostream>\n#include \"pcgx/pcg/zoo.h\"\n#include \"pcgx/search/cost_model.h\"\n"
                                     "int main() { std::cout << pcgx::model_zoo().size() << \" models, \" << pcgx::search::machine_names().size()"
                                     " << \" machines\\n\"; }\n";
  const auto b = cmake_build(src, build, PCGX_CONSUMER_FLAGS);
  ASSERT_EQ(b.code, 0) << b.out;
  const auto r = run_shell("PCGX_SHARE_DIR=" + (prefix_ / "share" / "pcgx").string() + " " + (build / "consumer").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(" models, "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" 0 machines"), std::string::npos) << r.out;  // the installed data/
}

TEST_F(Installed, APluginsOperatorHasEverythingItNeeds) {
  const auto r = pcgx(with_plugin() + "ops check Softplus");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("axioms          7: 7 in softplus.smt2; every one holds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("parallel forms  125 of 125"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("opsets          softplus"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("missing         nothing"), std::string::npos) << r.out;
  // Without the plugin pcgx does not know it.
  const auto without = pcgx("ops check Softplus");
  EXPECT_EQ(without.code, 2) << without.out;
  EXPECT_NE(without.out.find("unknown operator 'Softplus'"), std::string::npos) << without.out;
}

TEST_F(Installed, ThePluginPathLoadsEveryLibraryOfADirectory) {
  const auto r = run_shell("cd " + root_.string() + " && PCGX_PLUGIN_PATH=" + plugin_.parent_path().string() + " " +
                           (prefix_ / "bin" / "pcgx").string() + " ops");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Softplus            compute   log(1 + exp(x))"), std::string::npos) << r.out;
}

TEST_F(Installed, BadPluginsAreOneErrorLine) {
  const fs::path text = root_ / "not-a-library.so";
  std::ofstream(text) << "text\n";
  auto r = pcgx("--plugin " + text.string() + " ops");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.rfind("error: " + text.string() + ": cannot load it: ", 0), 0u) << r.out;
  r = pcgx("--plugin " + (root_ / "absent.so").string() + " ops");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("absent.so: no such plugin"), std::string::npos) << r.out;
  // One library per --plugin: a second word is taken for the subcommand.
  r = pcgx("--plugin " + plugin_.string() + " " + plugin_.string() + " ops");
  EXPECT_EQ(r.code, 2) << r.out;
  // The same library twice (the flag and the path) loads once.
  r = run_shell("cd " + root_.string() + " && PCGX_PLUGIN_PATH=" + plugin_.string() + " " + (prefix_ / "bin" / "pcgx").string() + " " +
                with_plugin() + with_plugin() + "ops");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("Softplus"), r.out.rfind("Softplus")) << r.out;
}

// Plugins that would change pcgx rather than add to it, or that add
// nothing, are refused naming the file: an operator pcgx has, an axiom
// file of a shipped file's name, no registration at all.
TEST_F(Installed, APluginAddsOrIsRefused) {
  const fs::path src = root_ / "bad-plugins", build = root_ / "bad-plugins-build";
  fs::create_directories(src / "shadow" / "axioms");
  std::ofstream(src / "CMakeLists.txt") << "cmake_minimum_required(VERSION 3.25)\nproject(bad LANGUAGES CXX)\nfind_package(pcgx REQUIRED)\n"
                                           "pcgx_add_plugin(twice twice.cpp)\npcgx_add_plugin(shadow shadow.cpp)\n"
                                           "pcgx_add_plugin(nothing nothing.cpp)\n";
  std::ofstream(src / "twice.cpp") << "#include \"pcgx/pcg/registry.h\"\nnamespace {\nvoid add(pcgx::OpRegistry& r) {\n"
                                      "  pcgx::OpDef d;\n  d.name = \"Relu\";\n  r.add(std::move(d));\n}\n"
                                      "const pcgx::OpRegistration reg(&add);\n}\n";
  std::ofstream(src / "shadow.cpp") << "#include \"pcgx/pcg/plugin.h\"\nnamespace {\nconst pcgx::PluginData data(\"" +
                                           (src / "shadow").string() + "\");\n}\n";
  std::ofstream(src / "shadow" / "axioms" / "linear.smt2") << "; nothing\n";
  std::ofstream(src / "nothing.cpp") << "int pcgx_plugin_nothing = 0;\n";
  const auto b = cmake_build(src, build);
  ASSERT_EQ(b.code, 0) << b.out;
  auto refused = [&](const std::string& lib, const std::string& args, const std::string& why) {
    const std::string path = (build / lib).string();
    const auto r = pcgx("--plugin " + path + " " + args);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  };
  refused("libtwice.so", "ops", "libtwice.so: operator 'Relu' registered twice");
  refused("libshadow.so", "axioms check", "linear.smt2: has the name of ");
  refused("libnothing.so", "ops", "libnothing.so: registers no operator");
}

// Its rules proved into a ruleset of its own, and a model using it trained
// under a strategy searched with them, as one device trains it.
TEST_F(Installed, APluginsRulesAreProvedAndItsModelTrains) {
  const fs::path rules = root_ / "rules";
  fs::create_directories(rules);
  const auto g = pcgx(with_plugin() + "regenerate --opset softplus --max-ops 2 --out-dir " + rules.string());
  ASSERT_EQ(g.code, 0) << g.out;
  EXPECT_NE(g.out.find(" + " + (plugin_.parent_path() / "softplus" / "axioms").string()), std::string::npos) << g.out;
  const nlohmann::json rs = nlohmann::json::parse(std::ifstream(rules / "softplus-v1.json"));
  EXPECT_GT(rs.at("rules").size(), 0u);

  const std::string model = (kExample / "softplus-mlp.json").string();
  const fs::path one = root_ / "one", four = root_ / "four";
  fs::create_directories(one), fs::create_directories(four);
  const auto a = pcgx(with_plugin() + "run " + model + " --steps 5", one);
  ASSERT_EQ(a.code, 0) << a.out;
  const auto b = pcgx(with_plugin() + "run " + model + " --steps 5 --optimize --machine cpu-host --devices 4 --ruleset " +
                          (rules / "softplus-v1.json").string(),
                      four);
  ASSERT_EQ(b.code, 0) << b.out;
  const auto la = nlohmann::json::parse(std::ifstream(one / "run-report.json")).at("loss");
  const auto lb = nlohmann::json::parse(std::ifstream(four / "run-report.json"));
  EXPECT_EQ(lb.at("devices").get<int>(), 4);
  ASSERT_EQ(la.size(), 5u);
  ASSERT_EQ(lb.at("loss").size(), 5u);
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(lb.at("loss")[i].get<double>(), la[i].get<double>(), 1e-5 * std::abs(la[i].get<double>())) << i;
  EXPECT_LT(la.back().get<double>(), la.front().get<double>());
}

}  // namespace
}  // namespace pcgx::testing
