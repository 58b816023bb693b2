// The Unity evaluation's MLP: 16 dense layers of hidden size 8192, per-GPU
// batch 256, regression (MSE) on synthetic data.
#include "builders.h"

namespace pcgx::zoo {

ModelSpec mlp(bool tiny) {
  ModelSpec s = named(tiny, "mlp", "multi-layer perceptron: `layers` dense layers of width `hidden` (Unity, Section 6)");
  s.source = "Unity (OSDI'22) Section 6: 16 dense layers, hidden 8192, per-GPU batch 256";
  s.defaults = tiny ? ModelParams{{"batch", 8}, {"layers", 4}, {"hidden", 16}}
                    : ModelParams{{"batch", 256}, {"layers", 16}, {"hidden", 8192}};
  s.param_docs = {{"batch", "samples per step"}, {"layers", "dense layers"}, {"hidden", "width of every layer"}};
  s.build = [](const ModelParams& p) {
    GraphBuilder b("mlp");
    const int64_t batch = param(p, "batch"), h = param(p, "hidden"), layers = param(p, "layers");
    TensorRef x = b.input("x", {batch, h});
    for (int64_t i = 0; i < layers; ++i)
      x = b.linear(x, h, i + 1 < layers ? "relu" : "none", false, "dense" + std::to_string(i));
    TensorRef y = b.input("target", {batch, h});
    b.graph().add_output(b.mse_loss(x, y));
    return b.finish();
  };
  return s;
}

}  // namespace pcgx::zoo
