#pragma once
// Optimizers: SGD with momentum (PyTorch's form: v = mu v + g; w -= lr v)
// and Adam (bias-corrected). Each device updates the weight shards it owns;
// state is kept per shard, allocated on the first step. The update runs on
// the kernel threads (kernel_threads.h) in pieces fixed by the shard sizes.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/tensor.h"

namespace pcgx::runtime {

struct OptimizerOptions {
  std::string kind = "sgd";  // sgd | adam
  double lr = 0.01;
  double momentum = 0.9;     // sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam
};

// Throws pcgx::Error for an unknown kind or a non-positive rate.
void validate(const OptimizerOptions& o);

class Optimizer {
 public:
  explicit Optimizer(OptimizerOptions options);
  // One update of params[i] by grads[i]; the list must be the same every step.
  void step(std::span<Tensor<float>* const> params, std::span<const Tensor<float>* const> grads);

 private:
  OptimizerOptions o_;
  int64_t steps_ = 0;
  struct Piece {
    size_t tensor, begin, size;
  };
  std::vector<std::vector<float>> m_, v_;
  std::vector<Piece> pieces_;
  size_t total_ = 0;  // parameters
};

}  // namespace pcgx::runtime
