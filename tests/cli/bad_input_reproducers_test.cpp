// Issue 17's reproducers that are fixed, fed through the pcgx binary: each
// is exit code 2 with one `error:` line naming the file (and field), never
// a crash.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
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

// mlp-tiny as `pcgx export` writes it.
nlohmann::json exported_mlp() {
  const std::string exported = (dir() / "mlp_exported.json").string();
  EXPECT_EQ(run("export mlp-tiny -o " + exported).code, 0);
  std::ifstream in(exported);
  return nlohmann::json::parse(in);
}

// The shipped ruleset cut to its first rule, edited.
std::string shipped_rule_edited(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  auto rs = nlohmann::json::parse(in);
  auto rule = rs["rules"][0];
  edit(rule);
  rs["rules"] = nlohmann::json::array({rule});
  return write(name, rs.dump());
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
  // Checked before training: the error is all the run prints.
  expect_error("run mlp-tiny --steps 2 --report " + report.string() + " --plot " + bad_plot, "error: " + bad_plot + ": cannot write: ");
  EXPECT_FALSE(fs::exists(report));
  // A run that fails after training (it diverges) writes nothing either.
  const auto diverged = run("run mlp-tiny --steps 20 --lr 1e30 --no-plot --report " + report.string());
  EXPECT_EQ(diverged.code, 2) << diverged.out;
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


// cpu-host with 100,000 nodes of 8 devices.
std::string huge_machine() {
  std::ifstream in(std::string(PCGX_SOURCE_DIR) + "/data/machines/cpu-host.json");
  auto m = nlohmann::json::parse(in);
  m["name"] = "huge", m["nodes"] = 100000;
  return write("huge_machine.json", m.dump());
}

// One thread per in-process device: 2000 devices aborted the process when
// the system refused a thread, and a strategy whose views start at device
// 799,990 asked for 800,000 threads.
TEST(BadInput, InProcessDevicesAreBounded) {
  const std::string m = huge_machine();
  expect_error("run mlp-tiny --machine " + m + " --devices 5000 --steps 1 --no-report --no-plot",
               "error: --devices: 5000 devices, more than the 4096 the in-process runtime runs");
  const std::string s = (dir() / "s2.json").string();
  ASSERT_EQ(run("optimize mlp-tiny --machine " + m + " --devices 2 -q -o " + s).code, 0);
  std::ifstream in(s);
  auto j = nlohmann::json::parse(in);
  for (auto& v : j["views"]) v["start"] = 799990;
  j["devices"] = 800000;
  j["machine"]["nodes"] = 100000, j["machine"]["devices_per_node"] = 8;
  const std::string far = write("s_far.json", j.dump());
  expect_error("run " + far + " --steps 1 --no-report --no-plot", "error: " + far + ": 799992 devices, more than the 4096");
  expect_error("calibrate --devices 5000 -o " + (dir() / "never.json").string(), "error: --devices: at most 4096");
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a sanitized pcgx reserves terabytes of address space: an address-space limit cannot refuse only threads";
#else
  // 1000 threads' stacks do not fit in 2 GB of address space: the threads
  // already started are released and the run ends with one error.
  const auto r = pcgx::testing::run_shell("ulimit -v 2000000 && " + std::string(PCGX_BINARY) + " run mlp-tiny --machine " + m +
                                          " --devices 1000 --steps 1 --no-report --no-plot");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("\nerror: cannot start the thread of device "), std::string::npos) << r.out;
#endif
}


// Replica degrees of 10^8 (a graph) and 2^31 - 1 (a rule) are over the
// documented 2^20 shards: refused on loading, where they made `run` hang
// and `ruleset check` grow past 3.6 GB.
TEST(BadInput, ShardCountsAreBounded) {
  auto g = exported_mlp();
  g["nodes"][0]["attrs"]["replica"] = 100000000;
  const std::string graph = write("replica_graph.json", g.dump());
  expect_error("run " + graph + " --steps 1 --no-report --no-plot", "error: " + graph + ": nodes[0]: node 0 'x' (Input): the tensor is too large");

  const std::string rules = shipped_rule_edited("replica_rules.json", [](nlohmann::json& rule) {
    for (const char* side : {"source", "target"}) rule[side]["nodes"][0]["attrs"]["replica"] = 2147483647;
  });
  expect_error("ruleset check " + rules, "error: " + rules + ": rules[0].source.nodes[0]: ");
}

// Synthetic batches are made up front: no more than the steps read, and
// no more than 4 GiB of them (10^9 batches were all generated).
TEST(BadInput, SyntheticBatchesAreBounded) {
  const auto many = run("run mlp-tiny --steps 2 --batches 1000000000 --no-report --no-plot");
  EXPECT_EQ(many.code, 0) << many.out;
  const auto big = run("run mlp-tiny --set batch=100000 --steps 5000 --batches 5000 --no-report --no-plot");
  EXPECT_EQ(big.code, 2) << big.out;
  EXPECT_NE(big.out.find("\nerror: synthetic data: 5000 batches of 12800000 bytes exceed the 4 GiB kept in memory"), std::string::npos) << big.out;
}


// `verify -o OUT --report /nonexistent/x` failed after writing OUT; a
// failing verify now leaves neither file, whichever write fails.
TEST(BadInput, AFailingVerifyLeavesNoOutput) {
  const std::string cands = (dir() / "verify_cands.json").string();
  ASSERT_EQ(run("generate --ops Relu,Repartition,Combine --max-ops 2 -o " + cands).code, 0);
  const fs::path out = dir() / "verify_out.json", report = dir() / "verify_report.txt";
  fs::remove(out), fs::remove(report);
  auto r = run("verify " + cands + " --threads 1 -o " + out.string() + " --report /nonexistent/x");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("error: /nonexistent/x: cannot write"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
  r = run("verify " + cands + " --threads 1 -o /nonexistent/out.json --report " + report.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_FALSE(fs::exists(report));
}

// Node ids, output indices and output-map entries of 2^32 wrapped to 0
// (another node, another output); a view's stride of 2^62 wrapped the
// device number. Each is now an error naming its field.
TEST(BadInput, NumbersThatWrappedAreRefused) {
  const auto g = exported_mlp();
  auto bad_id = g;
  bad_id["nodes"][0]["id"] = int64_t{1} << 32;
  const std::string id_file = write("id_2_32.json", bad_id.dump());
  expect_error("info " + id_file, "error: " + id_file + ": nodes[0].id: must be a non-negative 32-bit integer");
  auto bad_output = g;
  bad_output["nodes"][2]["inputs"][0][1] = int64_t{1} << 32;
  const std::string out_file = write("output_2_32.json", bad_output.dump());
  expect_error("info " + out_file, "error: " + out_file + ": nodes[2].inputs[0][1]: must be a non-negative 32-bit integer");

  const std::string rules =
      shipped_rule_edited("output_map_2_32.json", [](nlohmann::json& rule) { rule["output_map"][0][0] = int64_t{1} << 32; });
  expect_error("ruleset check " + rules, "error: " + rules + ": rules[0].output_map[0]: refers to a missing graph output");

  const std::string s = (dir() / "dp4.json").string();
  ASSERT_EQ(run("optimize mlp-tiny --machine cpu-host --devices 4 --search data-parallel -q -o " + s).code, 0);

  // A rule pairing one output 10,001 times took audit 55 s; a source with
  // more outputs than its target loaded: each output is paired once.
  const std::string repeated = shipped_rule_edited("output_map_repeated.json", [](nlohmann::json& rule) {
    for (int k = 0; k < 10000; ++k) rule["output_map"].push_back(rule["output_map"][0]);
  });
  expect_error("ruleset check " + repeated, "error: " + repeated + ": rules[0].output_map: has 10001 pairs for 1 outputs");
  const std::string twice = shipped_rule_edited("output_map_twice.json", [](nlohmann::json& rule) {
    rule["source"]["outputs"].push_back(rule["source"]["outputs"][0]);
    rule["target"]["outputs"].push_back(rule["target"]["outputs"][0]);
    rule["output_map"] = nlohmann::json::array({nlohmann::json::array({0, 0}), nlohmann::json::array({0, 1})});
  });
  expect_error("ruleset check " + twice, "error: " + twice + ": rules[0].output_map[1]: pairs an output already paired (source 0, target 1)");
  const std::string lopsided = shipped_rule_edited("outputs_lopsided.json", [](nlohmann::json& rule) {
    rule["source"]["outputs"].push_back(rule["source"]["outputs"][0]);
  });
  expect_error("ruleset check " + lopsided, "error: " + lopsided + ": rules[0]: the source has 2 outputs and the target 1");

  // A machine link with 2^31 - 1 ports ended in "timeline: negative
  // resource id", naming nothing.
  std::ifstream min(std::string(PCGX_SOURCE_DIR) + "/data/machines/dgx-h100.json");
  auto machine = nlohmann::json::parse(min);
  machine["links"][1]["ports"] = (int64_t{1} << 31) - 1;
  const std::string ports = write("ports_2_31.json", machine.dump());
  expect_error("optimize mlp-tiny --machine " + ports + " --devices 16 -q -o " + (dir() / "never.json").string(),
               "error: " + ports + ": links[1].ports: 2147483647 links per group of the level below, which holds 8 devices: at most one per device");
  std::ifstream sin(s);
  auto st = nlohmann::json::parse(sin);
  for (auto& v : st["views"]) v["stride"] = int64_t{1} << 62;
  const std::string huge_stride = write("stride_2_62.json", st.dump());
  expect_error("run " + huge_stride + " --steps 1", "error: " + huge_stride + ": views[0]: start must lie in [0, devices) and stride in [1, devices]");
  for (auto& v : st["views"]) v["stride"] = 3;
  const std::string off_machine = write("stride_3.json", st.dump());
  expect_error("run " + off_machine + " --steps 1", "error: " + off_machine + ": views[");
}

}  // namespace
