#pragma once
// Static figures of a model: parameters, FLOPs per training step,
// activation memory per sample, operator counts.
#include <cstdint>
#include <map>
#include <string>

#include "pcgx/pcg/graph.h"

namespace pcgx {

struct ModelInfo {
  int64_t operators = 0;           // every node except Input and Weight
  std::map<std::string, int64_t> op_counts;
  int64_t parameters = 0;          // elements of all Weight nodes
  double forward_flops = 0;        // one forward pass, whole batch
  double forward_bytes = 0;        // memory traffic of one forward pass
  double training_flops = 0;       // forward + backward (3x forward: the backward
                                   // pass computes two products per forward product)
  int64_t batch_size = 0;          // leading dimension of the first Input
  double activation_bytes = 0;     // every non-weight output kept for the backward pass
  double activation_bytes_per_sample = 0;
};

ModelInfo model_info(const Graph& g);

}  // namespace pcgx
