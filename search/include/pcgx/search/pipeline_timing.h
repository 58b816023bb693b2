#pragma once
// A pipelined plan's step time from its chunks' times (pipeline.h's
// formulas), apart from the search that found the chunks: the search
// ranks its plans with it, and a strategy file keeps its chunks' times
// ("pipeline.chunks") so that `pcgx simulate --schedule` prices the same
// chunks run in another order as the search would have.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/search/param_gathers.h"

namespace pcgx::search {

// One stage's chunk (the whole stage without interleaving).
struct PipelineStage {
  int64_t stage = 0;          // 0-based: the devices it runs on; -1: an interlaced chunk, on every device
  int64_t chunk = 0;          // 0-based virtual stage of that device
  int64_t first_device = 0;
  int64_t devices = 0;
  int64_t operators = 0;      // compute operators of the model in the stage
  std::string first, last;    // the first and last of them (graph order)
  double micro_batch = 0;     // one micro-batch through this chunk (seconds; t_s sums a stage's chunks): forward +
                              // backward + receiving its boundary and sending its gradient back (2 x the crossing
                              // of the chunk before)
  double forward = 0;         // of micro_batch: what is not backward (its forward pass, the once-per-micro-batch rest)
  double backward = 0;        // of micro_batch: its backward
  double crossing = 0;        // the boundary to the next chunk, each way (0 for the last chunk)
  double update = 0;          // its share of u_s (seconds): once-per-step terms, without gathers beside the forward pass
  // Under overlap_param_gather (gradient_sync.h's gathers_beside_forward):
  // the chunk's gathers (Estimate::param_gathers, `needed` counted from
  // the start of the chunk's own compute, after the boundary it receives),
  // replayed as its stage runs its forward steps (PipelineGathers).
  std::vector<ParamGather> param_gathers;
  double memory = 0;          // bytes of this chunk on its fullest device (a device holds its stage's every chunk)
};

struct ScheduledTime {
  double time = 0;                  // seconds per step: steps + update + gather_wait
  double steps = 0;                 // of time: the stages' steps run together (schedule_makespan)
  std::vector<double> stage_time;   // per stage: one micro-batch through its chunks (t_s; an interlaced chunk counts on every stage)
  double slowest = 0;               // max_s t_s
  double update = 0;                // max_s u_s
  double gather_wait = 0;           // of time: the forward steps' waits for weights gathered beside them
  // pipeline.h's closed form, (M + (S - 1) / v) max_s t_s + max_s u_s: what
  // `steps + update` comes to with every stage alike. With one chunk per
  // stage it is more where the stages differ (it charges every fill and
  // drain step the slowest stage's time); with several the chunks of a
  // stage differ too, and the steps may come a little above or below it.
  double closed_form = 0;
};

// The step of a plan whose chunks (in model order, one per chunk of
// `shape`) run under `shape`'s schedule: the makespan of the stages'
// steps (pcg's schedule_makespan: each step holding its stage for its
// chunk's forward or backward and the boundary it receives or sends back,
// as micro_batch counts them and the simulator runs them), whatever the
// order (1f1b, interleaved, GPipe, written, with interlaced chunks), plus
// max_s u_s. With `gathers_beside` (ZeRO's weights gathered beside the
// forward pass) the forward steps' waits for them are added, replayed
// through the steps (param_gathers.h; not with interlaced chunks).
// Throws pcgx::Error when the chunks do not match the shape (their count,
// a chunk on the wrong stage), the order cannot run (check()), or with
// `gathers_beside` and interlaced chunks.
ScheduledTime scheduled_time(const PipelineShape& shape, std::span<const PipelineStage> chunks, bool gathers_beside);

}  // namespace pcgx::search
