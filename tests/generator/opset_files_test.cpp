// Operator sets as data (rulesets/opsets/*.json): the shipped ones are what
// the generator always enumerated, an opset file of one's own works like
// --ops, and a bad file is an error naming the file and field.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "pcgx/generator/opset.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/pcg/error.h"
#include "temp_dir.h"

namespace pcgx::gen {
namespace {

namespace fs = std::filesystem;

std::string listed(const Opset& s) {
  std::string r;
  for (const auto& c : s.ops) r += (r.empty() ? "" : ",") + to_string(c);
  return r;
}

TEST(OpsetFiles, ShippedSetsAreTheGeneratorsOwn) {
  std::vector<std::string> names;
  for (const Opset& s : named_opsets()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"attention", "conv", "dropout", "layernorm", "llama", "recsys", "unity"}));
  EXPECT_EQ(listed(find_opset("layernorm")), "LayerNorm(affine=true),Combine,Replicate");
  EXPECT_EQ(find_opset("layernorm").vector_weights, 2);  // gamma and beta
  EXPECT_EQ(listed(find_opset("dropout")), "Dropout,Repartition,Combine,Replicate,Reduce");
  const std::string unity = "Linear(activation=none|relu),Relu,EwAdd,EwMul,Concat,Split,Repartition,Combine,Replicate,Reduce";
  EXPECT_EQ(listed(find_opset("unity")), unity);
  EXPECT_EQ(listed(find_opset("attention")), unity + ",MatMul,BatchMatMul,Transpose,Softmax,ScalarMul");
  EXPECT_EQ(listed(find_opset("recsys")), unity + ",Embedding,EmbeddingBag");
  EXPECT_EQ(listed(find_opset("conv")), unity + ",Conv2D(pad_h=1,pad_w=1),Pool2D(kernel_h=2,kernel_w=2,mode=max|avg)");
  EXPECT_EQ(find_opset("unity").default_ndims, 3);
  EXPECT_EQ(find_opset("conv").default_ndims, 4);
  EXPECT_TRUE(find_opset("conv").conv_kernels);
  EXPECT_TRUE(find_opset("recsys").index_inputs);
  EXPECT_FALSE(find_opset("unity").index_inputs || find_opset("unity").conv_kernels);
}

// The pool's extra tensors follow the registry (OpDef::pool_inputs): every
// shipped opset holding an operator that declares one has it, and an opset
// without such operators has none.
TEST(OpsetFiles, PoolInputsComeFromTheRegistry) {
  int checked = 0;
  for (const OpDef* op : OpRegistry::global().all())
    for (const Opset& s : named_opsets()) {
      const std::vector<std::string> names = s.operators();
      if (op->pool_inputs.empty() || std::find(names.begin(), names.end(), op->name) == names.end()) continue;
      ++checked;
      for (const PoolInput p : op->pool_inputs) {
        EXPECT_TRUE(p != PoolInput::kIndices || s.index_inputs) << op->name << " in " << s.name;
        EXPECT_TRUE(p != PoolInput::kConvKernels || s.conv_kernels) << op->name << " in " << s.name;
      }
      // As many 1-d weights as the operator reads (LayerNorm: gamma and beta).
      EXPECT_GE(s.vector_weights, std::count(op->pool_inputs.begin(), op->pool_inputs.end(), PoolInput::kVectorWeights))
          << op->name << " in " << s.name;
    }
  EXPECT_GE(checked, 4);  // Embedding, EmbeddingBag, Conv2D, RMSNorm
  const Opset plain = parse_ops("Relu,Linear,Repartition");
  EXPECT_FALSE(plain.index_inputs || plain.conv_kernels || plain.vector_weights > 0);
}

TEST(OpsetFiles, AFileOfOnesOwnIsLikeOps) {
  const fs::path f = pcgx::testing::temp_dir("pcgx_opset_files") / "mine.json";
  std::ofstream(f) << R"({"format": "pcgx.opset", "name": "mine", "description": "relu and partitions", "ndims": 2,
                          "ops": ["Relu", "Repartition", "Combine", "EmbeddingBag"]})";
  const Opset s = resolve_opset(f.string());
  EXPECT_EQ(s.name, "mine");
  EXPECT_EQ(s.default_ndims, 2);
  EXPECT_TRUE(s.index_inputs);
  EXPECT_EQ(listed(s), listed(parse_ops("Relu,Repartition,Combine,EmbeddingBag")));
  EXPECT_EQ(resolve_opset("unity").name, "unity");
}

TEST(OpsetFiles, BadFilesNameTheFileAndField) {
  const fs::path d = pcgx::testing::temp_dir("pcgx_opset_files");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", ": not JSON"},
      {R"({"format": "other"})", ": format: not \"pcgx.opset\""},
      {R"({"format": "pcgx.opset", "ops": ["Relu"]})", ": name: missing"},
      {R"({"format": "pcgx.opset", "name": "x"})", ": ops: missing"},
      {R"({"format": "pcgx.opset", "name": "x", "ops": ["Relu", "Frob"]})", ": ops: unknown operator 'Frob'"},
      {R"({"format": "pcgx.opset", "name": "x", "ndims": 0, "ops": ["Relu"]})", ": ndims: not a positive integer"},
  };
  int i = 0;
  for (const auto& [text, want] : cases) {
    const fs::path f = d / ("bad" + std::to_string(i++) + ".json");
    std::ofstream(f) << text;
    try {
      load_opset(f.string());
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(f.string() + want, 0), 0u) << e.what();
    }
  }
  EXPECT_THROW(find_opset("nope"), Error);
}

}  // namespace
}  // namespace pcgx::gen
