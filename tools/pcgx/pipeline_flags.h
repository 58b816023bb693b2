#pragma once
// `pcgx optimize`'s pipeline flags (--pipeline, --stages, --virtual-stages,
// --micro-batches, --first-stage-layers, --last-stage-layers,
// --pipeline-layout, and
// Megatron-LM's --pipeline-parallel and --micro-batch-size) and their translation into the request's
// PipelineOptions: one concept, kept out of cmd_optimize.cpp.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "pcgx/runner/optimize.h"

namespace pcgx::cli {

struct PipelineFlags {
  bool pipeline = false;
  int64_t stages = 0, pipeline_parallel = 0, micro_batch_size = 0, first_stage_layers = 0, last_stage_layers = 0;
  std::string virtual_stages;  // a count, auto, or empty (1)
  std::string micro_batches;  // a count, auto, or empty (not given)
  std::string layout;         // Megatron-LM's layout string, or empty
  bool embedding_as_layer = false, loss_as_layer = false;
};

void add_pipeline_options(CLI::App* cmd, PipelineFlags& f);
// Sets q.pipeline, q.accumulate and q.micro_batch_size; throws pcgx::Error
// naming the flag for a combination that means nothing.
void apply_pipeline_flags(PipelineFlags f, runner::OptimizeRequest& q);

}  // namespace pcgx::cli
