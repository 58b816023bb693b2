#pragma once
// The small MLP scripts/golden.py and tests/python/torch_weights.py compute
// with PyTorch, node for node and name for name: x[8, 16] -> 32 relu (bias)
// -> 32 relu -> 16 (bias), MSE against target[8, 16].
#include "pcgx/pcg/graph_builder.h"

namespace pcgx::testing {

inline Graph golden_mlp() {
  GraphBuilder b("golden-mlp");
  TensorRef x = b.input("x", {8, 16});
  x = b.linear(x, 32, "relu", true, "dense0");
  x = b.linear(x, 32, "relu", false, "dense1");
  x = b.linear(x, 16, "none", true, "dense2");
  b.graph().add_output(b.mse_loss(x, b.input("target", {8, 16})));
  return b.finish();
}

}  // namespace pcgx::testing
