// ONNX models exported by PyTorch (tests/python/onnx_models.py): imported,
// their parameter counts are PyTorch's and their outputs through the
// reference interpreter, with the imported weights, are PyTorch's to 1e-4;
// the loss heads; every unsupported operator listed in one error. Skips,
// saying why, without /usr/bin/python3 and python3-torch.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "matches_pytorch.h"
#include "pcgx/importer/onnx_import.h"
#include "pcgx/pcg/error.h"
#include "onnx_exports.h"
#include "temp_dir.h"

namespace pcgx::importer {
namespace {

namespace fs = std::filesystem;

using pcgx::testing::onnx_exports;

#define PCGX_REQUIRE_EXPORTS()                                                                                             \
  const fs::path* dir = onnx_exports();                                                                                        \
  if (!dir) GTEST_SKIP() << "/usr/bin/python3 with python3-torch is needed to export the models (scripts/test.sh installs it)"

using pcgx::testing::expect_import_matches_pytorch;

TEST(OnnxImport, MlpMatchesPyTorch) {
  PCGX_REQUIRE_EXPORTS();
  expect_import_matches_pytorch(*dir, "mlp");
}

// ReLU6 and hardtanh export as Clip (tests/importer/clip_import_test.cpp
// covers Clip without PyTorch).
TEST(OnnxImport, ClipMatchesPyTorch) {
  PCGX_REQUIRE_EXPORTS();
  expect_import_matches_pytorch(*dir, "clipped");
}

TEST(OnnxImport, GroupedCnnWithPoolsMatchesPyTorch) {
  PCGX_REQUIRE_EXPORTS();
  expect_import_matches_pytorch(*dir, "cnn");
}

TEST(OnnxImport, AttentionWithEmbeddingAndLayerNormMatchesPyTorch) {
  PCGX_REQUIRE_EXPORTS();
  expect_import_matches_pytorch(*dir, "attention");
}

// BatchNorm as PyTorch computes it in training mode (batch statistics), a
// Split and a Concat.
TEST(OnnxImport, BatchNormAndSplitMatchPyTorchInTrainingMode) {
  PCGX_REQUIRE_EXPORTS();
  expect_import_matches_pytorch(*dir, "normalized");
}

// Gelu's erf formula and LayerNorm's pieces are put back whole.
TEST(OnnxImport, DecomposedGeluAndLayerNormAreFused) {
  PCGX_REQUIRE_EXPORTS();
  expect_import_matches_pytorch(*dir, "decomposed");
  ImportOptions o;
  o.loss = LossHead::kNone;
  const ImportedModel m = import_onnx((*dir / "decomposed.onnx").string(), o);
  std::vector<std::string> ops;
  for (const Node& n : m.graph.nodes())
    if (n.op->op_class == OpClass::kCompute) ops.push_back(n.op->name);
  EXPECT_EQ(ops, (std::vector<std::string>{"Linear", "Gelu", "LayerNorm"}));
}

TEST(OnnxImport, LossHeads) {
  PCGX_REQUIRE_EXPORTS();
  const ImportedModel ce = import_onnx((*dir / "mlp.onnx").string());  // auto: [8, 10] -> cross-entropy
  EXPECT_EQ(ce.graph.name(), "mlp") << "named after the file";
  const Node& loss = ce.graph.node(ce.graph.outputs().at(0).node);
  EXPECT_EQ(loss.op->name, "SoftmaxCrossEntropy");
  EXPECT_EQ(ce.graph.node(loss.inputs[1].node).name, "labels");
  ImportOptions o;
  o.loss = LossHead::kMse;
  const ImportedModel mse = import_onnx((*dir / "attention.onnx").string(), o);
  EXPECT_EQ(mse.graph.node(mse.graph.outputs().at(0).node).op->name, "MSELoss");
}

TEST(OnnxImport, UnsupportedOperatorsAreListedInOneError) {
  PCGX_REQUIRE_EXPORTS();
  try {
    import_onnx((*dir / "unsupported.onnx").string());
    ADD_FAILURE() << "imported";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind((*dir / "unsupported.onnx").string() + ": operators pcgx does not import: Abs x1 (first: ", 0), 0u) << m;
    EXPECT_NE(m.find(", LeakyRelu x2 (first: "), std::string::npos) << m;
  }
}

TEST(OnnxImport, ABatchForAFixedExportIsAnError) {
  PCGX_REQUIRE_EXPORTS();
  ImportOptions o;
  o.batch = 4;
  try {
    import_onnx((*dir / "mlp.onnx").string(), o);
    ADD_FAILURE() << "imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no input dimension is symbolic"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, NotAModelIsAnError) {
  const fs::path bad = pcgx::testing::temp_dir("pcgx_onnx_import") / "bad.onnx";
  std::ofstream(bad) << "not a protobuf";
  EXPECT_THROW(import_onnx(bad.string()), Error);
  EXPECT_THROW(import_onnx("/nonexistent/x.onnx"), Error);
}

}  // namespace
}  // namespace pcgx::importer
