#pragma once
// What `pcgx generate` enumerates, and with which resources.
#include <cstdint>
#include <string>
#include <vector>

#include "pcgx/generator/opset.h"

namespace pcgx::gen {

struct GeneratorConfig {
  Opset opset;
  int max_ops = 3;                   // operators per graph (both sides of a rule)
  std::vector<int64_t> degrees{2};   // parallel degrees
  int ndims = 3;                     // rank of the activation tensors
  int threads = 0;                   // 0: every core
  uint64_t seed = 1;                 // fingerprint input values

  // Extent of every tensor dimension: twice the least common multiple of the
  // degrees, so that any one split, or two nested splits of 2, divide it.
  int64_t base_size() const;
  // JSON object recorded in the candidates file.
  std::string to_json() const;
};

}  // namespace pcgx::gen
