// pcgx against PyTorch: the loss and every gradient of a small MLP and a
// post-LN transformer encoder block, for the weights and inputs that
// scripts/golden.py wrote to data/golden/ (PyTorch, float64). Skips only
// when that data is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "pcgx/pcg/gradients.h"
#include "golden_mlp.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/runtime/npy.h"

namespace pcgx::runtime {
namespace {

namespace fs = std::filesystem;

fs::path golden(const std::string& name) { return fs::path(PCGX_SOURCE_DIR) / "data" / "golden" / name; }

// The graphs scripts/golden.py computes, node for node and name for name
// (the MLP: golden_mlp.h).
Graph transformer_block() { return encoder_block_regression("golden-transformer-block", 2, 8, 16, 4, 32); }

// max |a - b| / max(max |b|, floor).
double relative(const Tensor<float>& a, const Tensor<float>& b, double floor) {
  double num = 0, den = floor;
  for (size_t i = 0; i < b.data.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a.data[i]) - b.data[i]));
    den = std::max(den, std::fabs(static_cast<double>(b.data[i])));
  }
  return num / den;
}

void expect_matches_pytorch(const std::string& name, const Graph& g) {
  const fs::path dir = golden(name);
  if (!fs::exists(dir / "loss.npy")) GTEST_SKIP() << dir << " is absent; /usr/bin/python3 scripts/golden.py writes it (needs python3-torch)";
  std::map<NodeId, Tensor<float>> sources;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kSource) continue;
    const fs::path f = dir / (n.op->is_weight ? "weights" : "inputs") / (n.name + ".npy");
    ASSERT_TRUE(fs::exists(f)) << f;
    sources[n.id] = read_npy(f.string());
    ASSERT_EQ(sources[n.id].shape, n.outputs[0].logical_shape()) << f;
  }
  const auto values = evaluate<float>(g, [&](const Node& n) { return sources.at(n.id); });
  const TensorRef out = g.outputs().at(0);
  const double loss = gather_slot(values[static_cast<size_t>(out.node)][static_cast<size_t>(out.output)], 0).data.at(0);
  const double want = read_npy((dir / "loss.npy").string()).data.at(0);
  EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want)) << name;
  const std::vector<ShardedTensor<float>> seeds{loss_seed(g.shape(out))};
  const auto grads = evaluate_gradients(g, values, seeds);
  std::map<std::string, std::pair<Tensor<float>, Tensor<float>>> pairs;  // name -> (pcgx, PyTorch)
  double scale = 0;  // the largest gradient entry of the case
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kSource || n.name == "target") continue;
    auto& [mine, theirs] = pairs[n.name];
    mine = gather_slot(grads[static_cast<size_t>(n.id)][0], 0);
    theirs = read_npy((dir / "grads" / (n.name + ".npy")).string());
    ASSERT_EQ(mine.shape, theirs.shape) << n.name;
    for (float t : theirs.data) scale = std::max(scale, std::fabs(static_cast<double>(t)));
  }
  for (const auto& [n, p] : pairs) {
    const auto& [mine, theirs] = p;
    double top = 0;
    for (float t : theirs.data) top = std::max(top, std::fabs(static_cast<double>(t)));
    if (top < 1e-9 * scale) {
      // Zero in exact arithmetic (an attention key's bias: softmax ignores a
      // shift per row): ours must be float rounding noise.
      double worst = 0;
      for (float m : mine.data) worst = std::max(worst, std::fabs(static_cast<double>(m)));
      EXPECT_LT(worst, 1e-6 * scale) << name << ": d loss / d " << n << " should vanish";
    } else {
      EXPECT_LT(relative(mine, theirs, 0), 1e-4) << name << ": d loss / d " << n;
    }
  }
  EXPECT_GT(pairs.size(), 3u);
}

TEST(PyTorchGolden, Mlp) { expect_matches_pytorch("mlp", pcgx::testing::golden_mlp()); }
TEST(PyTorchGolden, TransformerBlock) { expect_matches_pytorch("transformer_block", transformer_block()); }

}  // namespace
}  // namespace pcgx::runtime
