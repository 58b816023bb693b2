#pragma once
// A model's loss over a data set without updating it (`pcgx eval`): every
// batch of the data once, forward only, on any backend and device count.
// For a classification loss (SoftmaxCrossEntropy) also the accuracy: the
// share of samples whose largest logit is their label.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/runtime/backend.h"
#include "pcgx/runtime/dataset.h"
#include "pcgx/runtime/safetensors.h"

namespace pcgx::runtime {

class MpiWorld;

struct EvalOptions {
  const NamedTensors* weights = nullptr;  // required: every Weight by name (train_state.h check_weights)
  const BatchSource* data = nullptr;      // null: the synthetic teacher task of `seed` with `batches` batches
  uint64_t seed = 1;
  int64_t batches = 8;
  int threads = 1;  // kernel threads per device
  Precision precision = kDefaultPrecision;  // activations rounded as training rounds them (trainer.h)
  std::function<std::unique_ptr<Backend>(int device)> backend;  // null: the host's
};

struct EvalResult {
  int64_t batches = 0, samples = 0;
  double loss = 0;              // the mean of the batches' losses (each a mean over its samples)
  bool classification = false;  // the loss is SoftmaxCrossEntropy: accuracy is set
  double accuracy = 0;          // correct / samples
  std::string data;             // BatchSource::describe()
};

// Throws pcgx::Error for missing or misshapen weights, or a plan the
// devices cannot run. Under MPI every rank calls; the result is rank 0's.
EvalResult evaluate(const Graph& g, std::span<const MachineView> views, int devices, const EvalOptions& options);
EvalResult evaluate(const Graph& g, std::span<const MachineView> views, MpiWorld& world, const EvalOptions& options);

}  // namespace pcgx::runtime
