#pragma once
// A chain of identical ReLU Linear layers: every layer (so every balanced
// pipeline stage) does the same work.
#include <string>

#include "pcgx/pcg/graph.h"

namespace pcgx::search {

inline Graph chain(int64_t layers, int64_t batch = 64, int64_t width = 32) {
  Graph g("chain");
  TensorRef x{g.add("Input", {{"shape", IntList{batch, width}}}, {}, "x"), 0};
  for (int64_t i = 0; i < layers; ++i) {
    const NodeId w = g.add("Weight", {{"shape", IntList{width, width}}}, {}, "w" + std::to_string(i));
    x = {g.add("Linear", {{"activation", std::string("relu")}}, {x, {w, 0}}, "fc" + std::to_string(i)), 0};
  }
  g.add_output(x);
  return g;
}

}  // namespace pcgx::search
