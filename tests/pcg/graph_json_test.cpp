#include <gtest/gtest.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/zoo.h"

namespace pcgx {
namespace {

TEST(GraphJson, EveryTinyModelRoundTripsWithTheSameValues) {
  for (const auto& spec : model_zoo()) {
    if (spec.name.find("-tiny") == std::string::npos) continue;
    SCOPED_TRACE(spec.name);
    const Graph g = build_model(spec.name);
    const std::string text = graph_to_json(g);
    const Graph back = graph_from_json(text, "mem");
    EXPECT_EQ(graph_to_json(back), text);
    ASSERT_EQ(back.size(), g.size());
    for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(back.nodes()[i].outputs, g.nodes()[i].outputs);
    const auto a = evaluate_outputs<ModP>(g, random_sources<ModP>(3));
    const auto b = evaluate_outputs<ModP>(back, random_sources<ModP>(3));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].data, b[i].data);
  }
}

TEST(GraphJson, NodesInAnyOrderAreSortedTopologically) {
  const std::string text = R"({"format_version": 1, "nodes": [
      {"id": 7, "op": "Relu", "inputs": [3]},
      {"id": 3, "op": "Input", "attrs": {"shape": [2, 2]}}], "outputs": [7]})";
  const Graph g = graph_from_json(text, "mem");
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g.node(0).op->name, "Input");
  EXPECT_EQ(g.outputs()[0].node, 1);
}

TEST(GraphJson, ParallelShapesSurviveRoundTrip) {
  Graph g("p");
  NodeId x = g.add("Input", {{"shape", IntList{4, 6}}, {"degrees", IntList{2, 1}}, {"replica", int64_t{2}}}, {}, "x");
  NodeId r = g.add("Repartition", {{"dim", int64_t{1}}, {"degree", int64_t{3}}}, {{x, 0}});
  g.add_output({r, 0});
  const Graph back = graph_from_json(graph_to_json(g), "mem");
  EXPECT_EQ(back.node(1).outputs[0].to_string(), "f32[4/2, 6/3] r2");
}

TEST(GraphJson, SaveIsAtomicAndLoadReportsMissingFiles) {
  const std::string path = ::testing::TempDir() + "/pcgx_graph_json_test.json";
  save_graph(build_model("mlp-tiny"), path);
  EXPECT_EQ(load_graph(path).size(), build_model("mlp-tiny").size());
  try {
    load_graph("/nonexistent/x.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("/nonexistent/x.json: cannot open", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace pcgx
