// Weights files between pcgx and PyTorch, both ways: pcgx's safetensors,
// read by an independent reader into PyTorch, give PyTorch the loss pcgx
// computes with them; a file written by PyTorch's side gives pcgx the loss
// PyTorch computed. The golden MLP (golden_test.cpp's graph). Skips, saying
// why, without /usr/bin/python3 and Debian's python3-torch (scripts/test.sh
// installs it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "golden_mlp.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/runtime/npy.h"
#include "pcgx/runtime/safetensors.h"
#include "pcgx/runtime/synthetic_task.h"
#include "temp_dir.h"

namespace pcgx::runtime {
namespace {

namespace fs = std::filesystem;


bool have_torch() { return std::system("/usr/bin/python3 -c 'import torch, numpy' > /dev/null 2>&1") == 0; }

int python(const std::string& args) {
  return std::system(("/usr/bin/python3 " + std::string(PCGX_SOURCE_DIR) + "/tests/python/torch_weights.py " + args).c_str());
}

double pcgx_loss(const Graph& g, const NamedTensors& weights, const fs::path& dir) {
  const Tensor<float> x = read_npy((dir / "x.npy").string()), target = read_npy((dir / "target.npy").string());
  const auto values = evaluate<float>(g, [&](const Node& n) {
    if (n.op->is_weight) return weights.at(n.name);
    return n.name == "x" ? x : target;
  });
  const TensorRef out = g.outputs().at(0);
  return gather_slot(values[static_cast<size_t>(out.node)][static_cast<size_t>(out.output)], 0).data.at(0);
}

TEST(TorchWeights, PcgxFileLoadsIntoPyTorch) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 with python3-torch and python3-numpy is needed (scripts/test.sh installs them)";
  const Graph g = pcgx::testing::golden_mlp();
  const fs::path dir = pcgx::testing::temp_dir("pcgx_torch_weights") / "to_torch";
  fs::create_directories(dir);
  NamedTensors w;
  for (const Node& n : g.nodes())
    if (n.op->is_weight) w[n.name] = initial_weight(n, 5);
  write_safetensors((dir / "w.safetensors").string(), w, {{"format", "pt"}});
  const SyntheticTask task(g, 5, 1);
  write_npy((dir / "x.npy").string(), task.batch(0).at("x"));
  write_npy((dir / "target.npy").string(), task.batch(0).at("target"));
  ASSERT_EQ(python("loss " + (dir / "w.safetensors").string() + " " + dir.string()), 0);
  const double torch_loss = read_npy((dir / "torch_loss.npy").string()).data.at(0);
  const double ours = pcgx_loss(g, w, dir);
  EXPECT_NEAR(ours, torch_loss, 1e-5 * std::fabs(torch_loss)) << "pcgx " << ours << ", PyTorch " << torch_loss;
}

TEST(TorchWeights, PyTorchFileLoadsIntoPcgx) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 with python3-torch and python3-numpy is needed (scripts/test.sh installs them)";
  const Graph g = pcgx::testing::golden_mlp();
  const fs::path dir = pcgx::testing::temp_dir("pcgx_torch_weights") / "from_torch";
  fs::create_directories(dir);
  ASSERT_EQ(python("make " + (dir / "w.safetensors").string() + " " + dir.string()), 0);
  const NamedTensors w = read_safetensors((dir / "w.safetensors").string());
  ASSERT_EQ(w.size(), 5u);
  const double torch_loss = read_npy((dir / "torch_loss.npy").string()).data.at(0);
  const double ours = pcgx_loss(g, w, dir);
  EXPECT_NEAR(ours, torch_loss, 1e-5 * std::fabs(torch_loss)) << "pcgx " << ours << ", PyTorch " << torch_loss;
}

}  // namespace
}  // namespace pcgx::runtime
