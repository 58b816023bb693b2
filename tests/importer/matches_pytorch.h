#pragma once
// An exported model (DIR/NAME.onnx beside NAME_x.npy, NAME_y.npy and
// NAME_params.txt, as the tests/python exporters write them) imported
// without a loss head: PyTorch's parameter count, and PyTorch's output
// through the reference interpreter with the imported weights, to 1e-4 of
// the output's scale. Returns the imported model (for further checks on
// it: a large model is imported once).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "pcgx/importer/onnx_import.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/model_info.h"
#include "pcgx/runtime/npy.h"
#include "tensor_compare.h"

namespace pcgx::testing {

inline importer::ImportedModel expect_import_matches_pytorch(const std::filesystem::path& dir, const std::string& name) {
  SCOPED_TRACE(name);
  importer::ImportOptions o;
  o.loss = importer::LossHead::kNone;
  const importer::ImportedModel m = importer::import_onnx((dir / (name + ".onnx")).string(), o);
  std::ifstream params(dir / (name + "_params.txt"));
  int64_t want = 0;
  params >> want;
  EXPECT_EQ(model_info(m.graph).parameters, want);
  const Tensor<float> x = runtime::read_npy((dir / (name + "_x.npy")).string());
  const Tensor<float> y = runtime::read_npy((dir / (name + "_y.npy")).string());
  const auto values = evaluate<float>(m.graph, [&](const Node& n) { return n.op->is_weight ? m.weights.at(n.name) : x; });
  const TensorRef out = m.graph.outputs().at(0);
  const Tensor<float> got = gather_slot(values[static_cast<size_t>(out.node)][static_cast<size_t>(out.output)], 0);
  EXPECT_EQ(got.shape, y.shape);
  if (got.shape == y.shape) {
    EXPECT_LT(relative_difference(got, y, 1e-6), 1e-4);
  }
  return m;
}

}  // namespace pcgx::testing
