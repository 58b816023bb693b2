#pragma once
// Training a model or a strategy (the driver behind `pcgx run`): what to
// train, on which backend, with what data and weights, after an optional
// search (optimize.h, the same path `pcgx optimize` takes), and which
// files to write. Under MPI every rank calls train() with the same request
// and the MPI world; rank 0 searches and sends the strategy to the others.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/runner/backend_choice.h"
#include "pcgx/runner/step_terms.h"
#include "pcgx/runtime/mpi.h"
#include "pcgx/runtime/run_report.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/search.h"

namespace pcgx::runner {

// Files a run writes after its last step, all or none (a diverged run
// writes none); empty: not written.
struct TrainOutputs {
  std::string report;   // run report (JSON)
  std::string plot;     // loss curve (SVG)
  std::string profile;  // measured kernel times per operator shape (pcgx.profile JSON)
  std::string trace;    // the last step's measured timeline (Chrome trace JSON)
  std::string weights;  // trained weights (safetensors)
  std::string strategy; // the strategy searched first (as `optimize -o` writes it), to run again
};

struct TrainRequest {
  std::string target;  // zoo model, graph JSON, ONNX model, or strategy file
  ModelParams sizes;   // a zoo model's size overrides (batch included); none for a strategy
  BackendKind backend = BackendKind::kCpu;  // resolved (backend_choice.h's resolve)
  // CUDA products in the precision's tensor cores (TF32, or BF16/FP16
  // under mixed precision); false: strict FP32 (--strict-fp32).
  bool tf32 = true;
  // What it trains in (runtime::TrainOptions::precision); unset: a
  // strategy's own, else the default. Given with a strategy planned in
  // another, it wins (said in a note); --optimize searches with it.
  std::optional<Precision> precision;
  // The pipeline schedule a pipelined strategy runs; unset: the
  // strategy's (pcg/pipeline_schedule.h). Refused for a strategy without
  // stages.
  std::optional<PipelineSchedule> schedule;
  // With schedule explicit: each stage's program (pcg/pipeline_schedule.h).
  std::vector<std::vector<PipelineStep>> schedule_programs;
  int64_t devices = 0;                      // 0: 1, or what the strategy needs; under MPI, 0 or the ranks
  int threads = 0;                          // kernel threads per device; 0: this machine's cores shared out
  // Steps, seed, synthetic batches, optimizer, gradient buckets, progress.
  // Its data, weights, resume and checkpoint fields are set from the ones
  // below; its backend from `backend`.
  runtime::TrainOptions options;
  std::string machine = "cpu-host";  // what the search and the prediction assume
  std::string profile;               // measured operator times for both (pcgx.profile JSON)
  // Search a strategy for a model first, with these options and rules.
  std::optional<search::SearchOptions> search;
  std::vector<std::string> rulesets;  // empty: default_rulesets()
  bool allow_unverified = false;
  bool reprove = false;  // OptimizeRequest::reprove
  std::string data;          // a directory of NAME.npy per model input; empty: the synthetic teacher task
  std::string init_weights;  // safetensors by Weight name
  std::string resume;        // a checkpoint directory to go on from
  std::string checkpoint;    // checkpoint directory, written every checkpoint_every steps and after the last
  int64_t checkpoint_every = 0;
  bool breakdown = false;    // time kernels, messages and the optimizer; TrainReport::terms
  TrainOutputs outputs;
  // Lines worth telling the user as they happen ("searching ...",
  // "training ...", notes); rank 0 alone.
  std::function<void(const std::string&)> say;
  // Every step, from device 0's thread, with the global batch.
  std::function<void(const runtime::StepReport&, int64_t batch)> progress;
};

// An error raised while the devices trained, on this rank alone: under MPI
// the other ranks may be waiting on it (before training every rank fails
// alike on the same request).
class TrainingError : public Error {
 public:
  using Error::Error;
};

struct TrainReport {
  runtime::RunSummary summary;  // model, strategy, batch, options, result, predictions
  bool rank0 = true;            // under MPI, only rank 0's report is complete
  bool mpi = false, gpu = false;
  int64_t devices = 1;
  Machine machine;
  Graph graph;  // the PCG that ran
  std::shared_ptr<const search::CostModel> cost;
  search::Estimate predicted;          // term by term (feasible or not)
  // Whether `predicted` simulates the strategy's own views (ones the
  // mapping would not choose, or a pipeline's schedule) rather than being
  // the mapping's estimate.
  bool predicted_by_simulation = false;
  std::optional<search::SearchResult> search;  // when it searched first
  std::optional<StepTerms> terms;      // with breakdown, when a prediction exists
  std::vector<std::pair<std::string, std::string>> written;  // path, and what it holds beyond its kind (may be empty)
};

// Throws Error (FieldError naming TrainRequest.FIELD) for bad requests and
// files, before any training where they can be known before; a run whose
// loss is not finite writes nothing and throws.
TrainReport train(TrainRequest request, runtime::MpiWorld* world = nullptr);

}  // namespace pcgx::runner
