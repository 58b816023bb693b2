#pragma once
// Learnable synthetic data for any model (docs/design.md "Runtime"): a teacher,
// the same model with other weights, labels random inputs. The loss's
// target input (MSELoss's target, SoftmaxCrossEntropy's labels) gets the
// teacher's prediction (its argmax for labels); every other input is
// uniform in [-1, 1), or uniform in [0, index_range) for index inputs. A
// student started from different weights can then drive its loss down.
// Everything is a function of the seed: every device (and every process)
// that builds the task sees the same batches.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/tensor.h"
#include "pcgx/runtime/dataset.h"

namespace pcgx::runtime {

// The initial value of a Weight: zeros/ones as its `init` attribute says,
// otherwise uniform with variance 1 / fan_in (fan_in: rows of a matrix,
// the product of the other dimensions of a higher-rank kernel).
Tensor<float> initial_weight(const Node& weight, uint64_t seed);

// The batches are made up front and kept: at most this many bytes of them.
inline constexpr int64_t kMaxSyntheticBatchBytes = int64_t{4} << 30;

class SyntheticTask final : public BatchSource {
 public:
  // `batches` distinct batches, cycled by step. Throws pcgx::Error when the
  // graph's output 0 is not a loss the task knows, or when the batches
  // would take more than kMaxSyntheticBatchBytes.
  SyntheticTask(const Graph& g, uint64_t seed, int64_t batches);
  // Input values by Input node name.
  const std::map<std::string, Tensor<float>>& batch(int64_t step) const override;
  std::string describe() const override;
  int64_t batches() const override { return static_cast<int64_t>(batches_.size()); }
  const std::string& target() const { return target_; }

 private:
  std::vector<std::map<std::string, Tensor<float>>> batches_;
  std::string target_;
};

}  // namespace pcgx::runtime
