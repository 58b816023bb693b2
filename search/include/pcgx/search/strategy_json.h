#pragma once
// The strategy file `pcgx optimize` writes and the runtime reads:
//
//   { "format_version": 1, "kind": "pcgx.strategy", "model": "bert-large",
//     "machine": { ...machine JSON... }, "devices": 64, "search": "unity",
//     "precision": "bf16", "recompute": "selective", "zero": 1,
//     "predicted": { "time": s, "compute": s, "overhead": s, "update": s,
//                    "communication": s, "sync": s, "sync_hidden": s, "buckets": n, "gather": s,
//                    "bytes": n, "idle": s, "devices_used": n, "max_memory": bytes },
//     "applied": [ "rule ids" ],
//     "graph": { ...pcgx.graph... },
//     "views": [ { "node": 5, "start": 0, "stride": 1 },
//                { "node": 9, "start": 0, "strides": [8, 1] }, ... ],
//     "pipeline": { "stages": 4, "micro_batches": 16, "virtual_stages": 2,
//                   "schedule": "interleaved", "bubble": s } }   (pipelined only;
//                   "interlaced": [0, 5]: chunks every stage runs together)
//
// `pipeline.chunks` (optional; written by optimize where the step was
// priced from them exactly): per chunk in model order, one micro-batch's
// times as the search priced them (pipeline_timing.h), { "stage": 0 (-1:
// interlaced), "forward": s, "backward": s, "crossing": s (to the next
// chunk, each way), "update": s (once per step), "gathers": [ {
// "seconds": s, "needed": s after the chunk's own compute starts (after
// the boundary its forward step receives), "devices":
// [..] } ] (under overlap_param_gather) }: what lets the same chunks be
// priced in another stage order (`pcgx simulate --schedule`). A chunk's
// micro_batch is derived (forward + backward + 2 x the crossing before
// it). Read back, every time is a finite number >= 0, `stage` an integer,
// `devices` integers >= 0, and the chunks must be one per chunk of the
// pipeline, each on the stage the pipeline runs it on (else an error on
// `pipeline.chunks`).
//
// `pipeline.schedule` is gpipe, 1f1b, interleaved or explicit (with
// `pipeline.programs`, one string of steps per stage;
// pcg/pipeline_schedule.h; absent: 1f1b, interleaved when virtual_stages
// > 1); a one-stage pipeline is gradient accumulation.
//
// `views` lists every placed node (pcg/machine_view.h): its task i runs on
// device start + i * stride, or with `strides` (one per task-grid
// dimension) on start + sum_j coords_j * strides_j.
#include <optional>
#include <string>
#include <vector>

#include "pcgx/pcg/machine.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline_timing.h"

namespace pcgx::search {

struct StrategyFile {
  std::string model;
  Machine machine;
  int64_t devices = 1;
  std::string search;
  std::vector<std::string> applied;
  Strategy strategy;
  int64_t pipeline_stages = 0;  // 0: not pipelined (pipeline.h)
  int64_t micro_batches = 0;
  int64_t virtual_stages = 1;   // interleaved 1F1B's chunks per device (absent: 1)
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  // An explicit schedule's stage programs (pipeline_schedule.h; written as
  // "programs", one string per stage in parse_pipeline_programs' format).
  std::vector<std::vector<PipelineStep>> programs;
  std::vector<int64_t> interlaced;  // chunks every stage runs together (pipeline_schedule.h)
  // The chunks' times the step was priced from (empty: not recorded, or
  // not priced from them: a plan stating devices is simulated whole).
  std::vector<PipelineStage> chunks;
  // Precision, recomputation and ZeRO stage (absent from older files: tf32, none, 0).
  TrainingRecipe recipe;
};

std::string strategy_to_json(const StrategyFile& s);
// The pipeline a pipelined strategy runs (nullopt: not pipelined).
std::optional<PipelineShape> pipeline_shape(const StrategyFile& s);
// Errors name `source` and the field.
StrategyFile strategy_from_json(const std::string& text, const std::string& source);
StrategyFile load_strategy(const std::string& path);
void save_strategy(const StrategyFile& s, const std::string& path);  // atomic

// Graphviz drawing of a strategy's PCG: parallel operators highlighted,
// compute operators labelled with their task count and machine view.
std::string strategy_to_dot(const Strategy& s);

}  // namespace pcgx::search
