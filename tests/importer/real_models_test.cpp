// Real models exported by Debian's PyTorch (tests/python/torchvision_models.py):
// torchvision's ResNeXt-50 (32x4d), Inception-v3, VGG-13, MobileNet-v2 and
// EfficientNet-B0, and a transformer encoder of torch.nn modules. Each imports with PyTorch's
// parameter count, its output through pcgx's interpreter with the imported
// weights is PyTorch's to 1e-4, and the unity search optimizes the graph
// imported (imported once: VGG-13's file is 532 MB) on 8 GPUs. Skips,
// saying why, without /usr/bin/python3 with python3-torch and
// python3-torchvision.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "matches_pytorch.h"
#include "model_param_name.h"
#include "pcgx/importer/onnx_import.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/search/search.h"
#include "temp_dir.h"

namespace pcgx::importer {
namespace {

namespace fs = std::filesystem;

class RealModel : public ::testing::TestWithParam<std::string> {};

TEST_P(RealModel, ImportsWithPyTorchsParametersAndOutputs) {
  const fs::path dir = pcgx::testing::temp_dir("pcgx_real_models");
  const std::string name = GetParam();
  if (std::system(("/usr/bin/python3 " + std::string(PCGX_SOURCE_DIR) + "/tests/python/torchvision_models.py " + dir.string() + " " + name +
                   " > /dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "/usr/bin/python3 with python3-torch and python3-torchvision is needed to export " << name;
  const Graph trainable = pcgx::testing::expect_import_matches_pytorch(dir, name).graph;
  static const Ruleset rs = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  static const search::RuleLibrary lib(rs);
  const search::CostModel cm(search::find_machine("dgx-h100").with_devices(8), search::default_efficiency());
  search::SearchOptions so;
  so.budget = 4;
  const search::SearchResult r = search::optimize(trainable, lib, search::MachineMapper(cm), so);
  EXPECT_TRUE(r.strategy.estimate.feasible) << r.strategy.estimate.infeasible;
  fs::remove(dir / (name + ".onnx"));
}

INSTANTIATE_TEST_SUITE_P(Torch, RealModel, ::testing::Values("transformer-encoder", "resnext-50", "inception-v3", "vgg-13", "mobilenet-v2",
                                                                     "efficientnet-b0"),
                         pcgx::testing::model_param_name);

}  // namespace
}  // namespace pcgx::importer
