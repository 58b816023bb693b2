// Issue 17's reproducers that are fixed, fed through the pcgx binary: each
// is exit code 2 with one `error:` line naming the file (and field), never
// a crash.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/run_pcgx.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using pcgx::testing::run;

fs::path dir() {
  static const fs::path d = pcgx::testing::temp_dir("pcgx_reproducers_test");
  return d;
}

std::string write(const std::string& name, const std::string& text) {
  const fs::path p = dir() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

void expect_error(const std::string& args, const std::string& starts) {
  const auto r = run(args);
  EXPECT_EQ(r.code, 2) << args << ": " << r.out;
  EXPECT_EQ(r.out.rfind(starts, 0), 0u) << args << ": " << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << args << ": more than one line: " << r.out;
}

// mlp-tiny exported, with its first Input's shape replaced.
std::string graph_with_input_shape(const std::string& name, const std::string& shape) {
  const std::string exported = (dir() / "mlp.json").string();
  EXPECT_EQ(run("export mlp-tiny -o " + exported).code, 0);
  std::ifstream in(exported);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The text is edited (a number like 1e400 has no JSON value to write).
  const auto key = text.find("\"shape\"");
  const auto open = text.find('[', key), close = text.find(']', key);
  EXPECT_TRUE(key != std::string::npos && open < close && close != std::string::npos) << text;
  return write(name, text.replace(open, close - open + 1, shape));
}

TEST(BadInput, ElementCountsThatWrapAreRefused) {
  const std::string g = graph_with_input_shape("wrap.json", "[4611686018427387905, 4]");
  expect_error("info " + g, "error: " + g + ": nodes[0]: ");
  expect_error("run " + g + " --steps 1", "error: " + g + ": nodes[0]: ");
}

// 70,000 levels of nesting inside an unknown field crashed the ruleset
// loader (it dumps the document to hash it) and the strategy loader.
TEST(BadInput, DeepNestingIsRefused) {
  const std::string deep = std::string(70000, '[') + std::string(70000, ']');
  const std::string rules = write("deep_rules.json", R"({"junk": )" + deep + R"(, "kind": "pcgx.ruleset", "format_version": 1})");
  expect_error("ruleset show " + rules, "error: " + rules + ": malformed JSON: nested more than 256 levels deep");
  const std::string strategy = write("deep_strategy.json", R"({"kind": "pcgx.strategy", "machine": {"junk": )" + deep + "}}");
  expect_error("run " + strategy + " --steps 1", "error: " + strategy + ": malformed JSON: nested more than 256 levels deep");
  const std::string graph = write("deep_graph.json", R"({"kind": "pcgx.graph", "nodes": [], "junk": )" + deep + "}");
  expect_error("info " + graph, "error: " + graph + ": malformed JSON: nested more than 256 levels deep");
}

// A name with a newline and a terminal escape code is echoed escaped, on
// one line (it printed two lines and coloured the terminal).
TEST(BadInput, ControlCharactersAreEscaped) {
  expect_error("info 'bad\nname\033[31m.json'", "error: bad\\nname\\x1b[31m.json: ");
}

TEST(BadInput, NumbersOutOfRangeNameTheFile) {
  const std::string g = graph_with_input_shape("big_number.json", "[8, 1e400]");
  expect_error("info " + g, "error: " + g + ": malformed JSON: number overflow");
}

TEST(BadInput, AStrategyFieldOfTheWrongTypeNamesTheFile) {
  const std::string s = (dir() / "s.json").string();
  ASSERT_EQ(run("optimize mlp-tiny --machine cpu-host --devices 2 -q -o " + s).code, 0);
  std::ifstream in(s);
  auto j = nlohmann::json::parse(in);
  j["predicted"]["time"] = "fast";
  const std::string bad = write("s_bad.json", j.dump());
  expect_error("run " + bad + " --steps 1", "error: " + bad + ": ");
}

TEST(BadInput, FlagsOutOfRange) {
  const std::string out = (dir() / "never.json").string();
  expect_error("generate --threads 65537 -o " + out, "error: --threads 65537: ");
  expect_error("optimize mlp-tiny --machine cpu-host --alpha nan -o " + out, "error: --alpha: ");
  expect_error("run mlp-tiny --optimize --budget -1 --steps 1", "error: --budget: ");
  // 0 used to mean "the default" silently.
  expect_error("run mlp-tiny --devices 0 --steps 1", "error: --devices: must be a positive integer, got '0'");
  expect_error("run mlp-tiny --batch 0 --steps 1", "error: --batch: must be a positive integer, got '0'");
  expect_error("optimize mlp-tiny --machine cpu-host --devices 0 -o " + out, "error: --devices: must be a positive integer");
  expect_error("optimize mlp-tiny --machine cpu-host --pipeline --stages 0 -o " + out, "error: --stages: must be a positive integer");
  expect_error("generate --ndims 0 -o " + out, "error: --ndims: must be a positive integer");
  EXPECT_FALSE(fs::exists(out));
}

// Outputs go to regular files only: a directory or a device is an error
// naming it (as root, --plot /dev/null replaced the device with a file),
// and "-" is standard output.
TEST(BadInput, OutputsAreRegularFilesOrStandardOutput) {
  const fs::path d = dir() / "a_directory";
  fs::create_directories(d);
  expect_error("export mlp-tiny -o " + d.string(), "error: " + d.string() + ": is a directory, not a file");
  EXPECT_TRUE(fs::is_directory(d));
  expect_error("export mlp-tiny -o /dev/null", "error: /dev/null: is not a regular file");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  const auto r = run("export mlp-tiny -o -");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"kind\": \"pcgx.graph\""), std::string::npos) << r.out;
}

// A run's outputs are written all or none: a plot path that cannot be
// written leaves no report behind; --no-report and --no-plot write none.
TEST(BadInput, RunOutputsAllOrNone) {
  const fs::path report = dir() / "run_report.json";
  fs::remove(report);
  const std::string bad_plot = (dir() / "no_such_dir" / "loss.svg").string();
  const auto failed = run("run mlp-tiny --steps 2 --report " + report.string() + " --plot " + bad_plot);
  EXPECT_EQ(failed.code, 2) << failed.out;
  EXPECT_NE(failed.out.find("\nerror: " + bad_plot + ": cannot write"), std::string::npos) << failed.out;
  EXPECT_FALSE(fs::exists(report));
  const fs::path quiet = dir() / "quiet";
  fs::create_directories(quiet);
  const auto r = pcgx::testing::run_shell("cd " + quiet.string() + " && " + PCGX_BINARY + " run mlp-tiny --steps 2 --no-report --no-plot");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::is_empty(quiet));
}

// A .npy whose header is 40 KB (std::regex recursed per character) and one
// whose shape's element count wraps.
TEST(BadInput, HostileNpyHeaders) {
  const fs::path data = dir() / "npy";
  fs::create_directories(data);
  auto npy = [&](const std::string& name, const std::string& shape, size_t data_bytes) {
    const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }\n";
    std::string out = "\x93NUMPY";
    out += '\x02', out += '\0';
    for (int i = 0; i < 4; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    std::ofstream(data / name, std::ios::binary) << out + header + std::string(data_bytes, '\0');
  };
  npy("x.npy", "(" + std::string(40000, '1') + ", 16)", 64);
  npy("target.npy", "(8, 16)", 8 * 16 * 4);
  const std::string x = (data / "x.npy").string();
  expect_error("run mlp-tiny --steps 1 --data " + data.string(), "error: " + x + ": shape: ");
  npy("x.npy", "(1152921504606846976, 16)", 64);
  expect_error("run mlp-tiny --steps 1 --data " + data.string(), "error: " + x + ": shape: the element count overflows");
}

}  // namespace
