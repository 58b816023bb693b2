// Feeds the pcgx binary malformed and inconsistent graph files and checks
// the contract: exit code 2 and one `error: FILE: FIELD: reason` line.
#include <gtest/gtest.h>

#include "cli/run_pcgx.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;

using pcgx::testing::Result;
using pcgx::testing::run;

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("pcgx_cli_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string write(const std::string& name, const std::string& text) {
  static const fs::path dir = temp_dir();
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

// A valid two-node graph body with `nodes` substituted.
std::string graph(const std::string& nodes, const std::string& extra = "") {
  return R"({"format_version": 1, "kind": "pcgx.graph", "name": "t", )" + extra + R"("nodes": )" + nodes + "}";
}

const std::string kInput = R"({"id": 0, "op": "Input", "attrs": {"shape": [4, 6]}})";

struct BrokenCase {
  std::string label;
  std::string text;
  std::string field;   // expected after "error: FILE: "
  std::string reason;  // expected substring of the rest
};

void PrintTo(const BrokenCase& c, std::ostream* os) { *os << c.label; }

std::vector<BrokenCase> broken_cases() {
  const std::string w = R"({"id": 1, "op": "Weight", "attrs": {"shape": [6, 4]}})";
  return {
      {"truncated", graph("[" + kInput + ", " + w + "]").substr(0, 60), "", "malformed JSON"},
      {"empty", "", "", "malformed JSON"},
      {"not_object", "[1, 2]", "", "must be an object"},
      {"version_type", R"({"format_version": "1", "nodes": []})", "format_version", "must be an integer"},
      {"version_unsupported", R"({"format_version": 7, "nodes": []})", "format_version", "unsupported version 7"},
      {"wrong_kind", R"({"format_version": 1, "kind": "pcgx.machine", "nodes": []})", "kind", "expected"},
      {"missing_nodes", R"({"format_version": 1})", "nodes", "missing required field"},
      {"nodes_not_array", R"({"format_version": 1, "nodes": {}})", "nodes", "must be an array"},
      {"unknown_top_field", R"({"format_version": 1, "nodes": [], "nodez": 1})", "nodez", "unknown field"},
      {"unknown_operator", graph("[" + kInput + R"(, {"id": 1, "op": "Conv3D", "inputs": [0]}])"), "nodes[1].op",
       "unknown operator 'Conv3D'"},
      {"attr_wrong_type", graph("[" + kInput + R"(, {"id": 1, "op": "Repartition", "attrs": {"dim": 0, "degree": "two"}, "inputs": [0]}])"),
       "nodes[1].attrs.degree", "must be an integer"},
      {"attr_unknown", graph("[" + kInput + R"(, {"id": 1, "op": "Relu", "attrs": {"alpha": 1}, "inputs": [0]}])"),
       "nodes[1].attrs.alpha", "unknown attribute"},
      {"attr_missing", graph("[" + kInput + R"(, {"id": 1, "op": "Repartition", "attrs": {"dim": 0}, "inputs": [0]}])"),
       "nodes[1]", "missing required attribute 'degree'"},
      {"id_not_int", graph(R"([{"id": "a", "op": "Input", "attrs": {"shape": [2]}}])"), "nodes[0].id", "must be an integer"},
      {"duplicate_id", graph("[" + kInput + ", " + kInput + "]"), "nodes[1].id", "duplicate node id 0"},
      {"unknown_input", graph("[" + kInput + R"(, {"id": 1, "op": "Relu", "inputs": [9]}])"), "nodes[1].inputs[0]",
       "unknown node 9"},
      {"bad_input_ref", graph("[" + kInput + R"(, {"id": 1, "op": "Relu", "inputs": [[0, 0, 0]]}])"), "nodes[1].inputs[0]",
       "[node id, output] pair"},
      {"missing_output_index", graph("[" + kInput + R"(, {"id": 1, "op": "Relu", "inputs": [[0, 3]]}])"), "nodes[1]",
       "refers to output 3"},
      {"cycle", graph(R"([{"id": 0, "op": "Relu", "inputs": [1]}, {"id": 1, "op": "Relu", "inputs": [0]}])"), "nodes",
       "cycle through nodes"},
      {"arity", graph("[" + kInput + R"(, {"id": 1, "op": "Linear", "inputs": [0]}])"), "nodes[1]",
       "takes 2 inputs, got 1"},
      {"shape_mismatch", graph(R"([{"id": 0, "op": "Input", "attrs": {"shape": [4, 5]}}, )" + w +
                                R"(, {"id": 2, "op": "Linear", "inputs": [0, 1]}])"),
       "nodes[2]", "does not match W's rows"},
      {"degree_not_dividing", graph(R"([{"id": 0, "op": "Input", "attrs": {"shape": [4, 6], "degrees": [3, 1]}}])"),
       "nodes[0]", "degree 3 does not divide size 4"},
      {"degrees_wrong_length", graph(R"([{"id": 0, "op": "Input", "attrs": {"shape": [4, 6], "degrees": [2]}}])"),
       "nodes[0]", "'degrees' has 1 entries"},
      {"negative_size", graph(R"([{"id": 0, "op": "Input", "attrs": {"shape": [4, -6]}}])"), "nodes[0]",
       "must hold positive integers"},
      {"repartition_not_dividing",
       graph("[" + kInput + R"(, {"id": 1, "op": "Repartition", "attrs": {"dim": 1, "degree": 4}, "inputs": [0]}])"),
       "nodes[1]", "cannot split dimension 1 (size 6, degree 1) 4 more ways"},
      {"reduce_without_replicas", graph("[" + kInput + R"(, {"id": 1, "op": "Reduce", "attrs": {"degree": 2}, "inputs": [0]}])"),
       "nodes[1]", "cannot reduce replica degree 1 by 2"},
      {"elementwise_degree_mismatch",
       graph(R"([{"id": 0, "op": "Input", "attrs": {"shape": [4, 6], "degrees": [2, 1]}}, )"
             R"({"id": 1, "op": "Input", "attrs": {"shape": [4, 6]}}, {"id": 2, "op": "EwAdd", "inputs": [0, 1]}])"),
       "nodes[2]", "disagree"},
      {"concat_along_split_dim",
       graph(R"([{"id": 0, "op": "Input", "attrs": {"shape": [4, 6], "degrees": [1, 2]}}, )"
             R"({"id": 1, "op": "Concat", "attrs": {"axis": 1}, "inputs": [0, 0]}])"),
       "nodes[1]", "split along dimension 1 (degree 2), but Concat can split that input only along dimensions 0"},
      {"linear_weight_not_replicated",
       graph(R"([{"id": 0, "op": "Input", "attrs": {"shape": [4, 6], "degrees": [2, 1]}}, )" + w +
             R"(, {"id": 2, "op": "Linear", "inputs": [0, 1]}])"),
       "nodes[2]", "input 1 (W) has replica degree 1"},
      {"output_unknown", graph("[" + kInput + "]", R"("outputs": [[5, 0]], )"), "outputs[0]", "unknown node 5"},
  };
}

class BrokenFiles : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenFiles, OneErrorLineAndExitCode2) {
  const BrokenCase& c = GetParam();
  const std::string path = write(c.label + ".json", c.text);
  const Result r = run("info " + path);
  EXPECT_EQ(r.code, 2) << r.out;
  const std::string prefix = "error: " + path + ": " + (c.field.empty() ? "" : c.field + ": ");
  EXPECT_EQ(r.out.rfind(prefix, 0), 0u) << "expected prefix '" << prefix << "' in: " << r.out;
  EXPECT_NE(r.out.find(c.reason), std::string::npos) << "expected '" << c.reason << "' in: " << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "not one line: " << r.out;
}

INSTANTIATE_TEST_SUITE_P(Graphs, BrokenFiles, ::testing::ValuesIn(broken_cases()),
                         [](const auto& param_info) { return param_info.param.label; });

TEST(Cli, MissingFileIsExitCode2) {
  const Result r = run("info /nonexistent/model.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out.rfind("error: /nonexistent/model.json: ", 0), 0u) << r.out;
}

TEST(Cli, BadArgumentsAreExitCode2) {
  for (const char* args : {"", "info", "frobnicate", "info mlp --set", "info mlp --set batch=x",
                           "info mlp --set nope=3", "info mlp --set batch=0"}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << args << ": " << r.out;
  }
}

TEST(Cli, HelpIsExitCode0) {
  for (const char* args : {"--help", "info --help", "models --help", "export --help", "ops --help"}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 0) << args;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << args << ": " << r.out;
  }
}

TEST(Cli, FailedExportLeavesNoFile) {
  const std::string bad = write("export_bad.json", graph("[" + kInput + R"(, {"id": 1, "op": "Nope"}])"));
  const std::string out = (temp_dir() / "export_out.json").string();
  fs::remove(out);
  const Result r = run("export " + bad + " -o " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(fs::exists(out));
}

TEST(Cli, ExportedModelReadsBackWithTheSameFigures) {
  const std::string out = (temp_dir() / "bert_tiny.json").string();
  ASSERT_EQ(run("export bert-large-tiny -o " + out).code, 0);
  const Result a = run("info bert-large-tiny --json");
  const Result b = run("info " + out + " --json");
  ASSERT_EQ(a.code, 0);
  ASSERT_EQ(b.code, 0);
  EXPECT_EQ(a.out, b.out);
}

TEST(Cli, InfoPrintsPublishedFigures) {
  const Result r = run("info bert-large");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("335,143,936"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FLOPs per step"), std::string::npos);
  EXPECT_NE(r.out.find("per sample"), std::string::npos);
}

}  // namespace

namespace {

TEST(CliGenerate, BadArgumentsAreExitCode2WithOneLine) {
  const std::string out = (temp_dir() / "gen_out.json").string();
  struct Case {
    std::string args, expect;
  };
  for (const Case& c : std::vector<Case>{{"--opset nope", "--opset: unknown operator set 'nope'"},
                                         {"--ops Relu,Frob", "--ops: unknown operator 'Frob'"},
                                         {"--ops 'Linear(activation=swish)'", "expected one of"},
                                         {"--ops 'Linear(colour=red)'", "Linear has no attribute 'colour'"},
                                         {"--degrees 1", "--degrees: 1 is not a parallel degree"},
                                         {"--degrees two", "--degrees two: 'two' is not an integer"},
                                         {"--max-ops 9", "--max-ops: 9 is not in 0..4"},
                                         {"--ops Pool2D", "attribute 'kernel_h' has no default"}}) {
    fs::remove(out);
    const Result r = run("generate " + c.args + " -o " + out);
    EXPECT_EQ(r.code, 2) << c.args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << ": " << r.out;
    EXPECT_FALSE(fs::exists(out)) << c.args;
  }
}

TEST(CliGenerate, WritesCandidatesAndPrintsStageCounts) {
  const std::string out = (temp_dir() / "gen_small.json").string();
  const Result r = run("generate --ops Relu,Repartition,Combine --max-ops 2 -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* line : {"graphs enumerated", "distinct fingerprints", "raw pairs", "after pruning common subgraphs",
                           "after pruning input renamings", "after pruning implied candidates", "peak RSS"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " in " << r.out;
  EXPECT_TRUE(fs::exists(out));
}

}  // namespace

namespace {

TEST(CliRuleset, ErrorsAndCheckExitCodes) {
  for (const char* args : {"ruleset show /nonexistent.json", "ruleset check --format nope x.json",
                           "ruleset check --format flexflow --dims sideways x.json", "ruleset import --format pcgx x.json -o y.json",
                           "ruleset", "ruleset frob"}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << args << ": " << r.out;
  }
  // Candidates hold; a hand-broken rule is refuted with exit code 1.
  const std::string cands = (temp_dir() / "cands.json").string();
  ASSERT_EQ(run("generate --ops Relu,Repartition,Combine --max-ops 2 -o " + cands).code, 0);
  const Result ok = run("ruleset check " + cands);
  EXPECT_EQ(ok.code, 0) << ok.out;
  std::string text;
  {
    std::ifstream in(cands);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto pos = text.find("\"op\":\"Relu\"");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 11, "\"op\":\"Tanh\"");
  const std::string broken = write("broken_cands.json", text);
  const Result bad = run("ruleset check " + broken);
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("REFUTED"), std::string::npos) << bad.out;
  const Result show = run("ruleset show " + broken);
  EXPECT_NE(show.out.find("DOES NOT MATCH"), std::string::npos) << show.out;
}

}  // namespace
