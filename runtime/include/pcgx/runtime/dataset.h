#pragma once
// Where training batches come from: the synthetic teacher task
// (synthetic_task.h) or the user's data as NumPy files (`pcgx run --data`).
//
// User data: a directory with one NAME.npy per Input of the model (by node
// name, e.g. x.npy and target.npy for mlp-tiny), each holding N samples:
// shape [N, d1, ...] for an input of shape [B, d1, ...]. Every file has the
// same N, a multiple of the batch B; step s trains on samples
// [(s mod N/B)·B, ... + B), so the data is cycled in order. Index inputs
// (Embedding's) must hold integers in [0, index_range).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/tensor.h"

namespace pcgx::runtime {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Input values by Input node name, for training step `step` (0-based).
  virtual const std::map<std::string, Tensor<float>>& batch(int64_t step) const = 0;
  // What the run report says about the data.
  virtual std::string describe() const = 0;
  // Distinct batches: step s reads batch s mod batches() (an evaluation
  // reads each once).
  virtual int64_t batches() const = 0;
};

class NpyDataset final : public BatchSource {
 public:
  // Throws pcgx::FileError naming the file (and field) for a missing or
  // malformed file, a shape that does not fit the input, unequal sample
  // counts, or an index out of range.
  NpyDataset(const Graph& g, const std::string& dir);
  const std::map<std::string, Tensor<float>>& batch(int64_t step) const override;
  std::string describe() const override;
  int64_t batches() const override { return static_cast<int64_t>(batches_.size()); }
  int64_t samples() const { return samples_; }

 private:
  std::string dir_;
  int64_t samples_ = 0;
  std::vector<std::map<std::string, Tensor<float>>> batches_;
};

}  // namespace pcgx::runtime
