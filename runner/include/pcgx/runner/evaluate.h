#pragma once
// A model's loss (and accuracy, for a classifier) over a data set with
// given weights, forward only: the driver behind `pcgx eval`. A model is
// laid out data parallel over several devices; a strategy file runs as
// planned.
#include <optional>
#include <string>

#include "pcgx/pcg/zoo.h"
#include "pcgx/runner/backend_choice.h"
#include "pcgx/runtime/evaluate.h"
#include "pcgx/runtime/mpi.h"

namespace pcgx::runner {

struct EvalRequest {
  std::string target;    // zoo model, graph JSON, ONNX model, or strategy file
  ModelParams sizes;     // a zoo model's size overrides (batch included); none for a strategy
  std::string weights;   // safetensors by Weight name (required)
  std::string data;      // a directory of NAME.npy per model input; empty: the synthetic teacher task
  BackendKind backend = BackendKind::kCpu;  // resolved (backend_choice.h's resolve)
  int64_t devices = 0;   // 0: 1, or what the strategy needs; under MPI, 0 or the ranks
  int threads = 0;       // kernel threads per device; 0: this machine's cores shared out
  uint64_t seed = 1;     // of the synthetic task
  int64_t batches = 8;   // of the synthetic task
  std::string machine = "cpu-host";  // whose views lay a model out data parallel
  std::optional<Precision> precision;  // unset: a strategy's own, else the default
};

struct EvalReport {
  std::string model;    // the graph's name
  std::string layout;   // "unpartitioned", "data parallel", or the strategy's search and file
  Precision precision = kDefaultPrecision;  // what it evaluated in
  int64_t devices = 0;
  runtime::EvalResult result;
};

// Throws FieldError (EvalRequest.FIELD) for a request that contradicts
// itself or the world, pcgx::Error for missing or misshapen weights or
// data. Under MPI every rank calls; the report is rank 0's.
EvalReport evaluate(const EvalRequest& request, runtime::MpiWorld* world);

}  // namespace pcgx::runner
