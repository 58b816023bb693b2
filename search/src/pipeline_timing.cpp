// A pipelined plan's step from its chunks' times (pipeline_timing.h).
#include "pcgx/search/pipeline_timing.h"

#include <algorithm>
#include <functional>

#include "pcgx/pcg/error.h"

namespace pcgx::search {

ScheduledTime scheduled_time(const PipelineShape& shape, std::span<const PipelineStage> chunks, bool gathers_beside) {
  check(shape);
  const int64_t S = shape.stages, v = shape.virtual_stages;
  if (static_cast<int64_t>(chunks.size()) != shape.chunks())
    throw Error(std::to_string(chunks.size()) + " chunk times for a pipeline of " + std::to_string(shape.chunks()) + " chunks");
  ScheduledTime out;
  out.stage_time.assign(static_cast<size_t>(S), 0.0);
  std::vector<double> stage_update(static_cast<size_t>(S), 0.0);
  // Each step holds its stage for its chunk's forward or backward and the
  // boundary it receives (forward) or sends back (backward), as the
  // chunk's micro_batch counts it and the simulator runs it (Megatron-LM
  // waits for its point-to-point messages in the step that needs them).
  // (So nothing is crossed between steps.)
  std::vector<double> forward, backward;
  const std::vector<double> between(chunks.size(), 0.0);
  for (size_t c = 0; c < chunks.size(); ++c) {
    const PipelineStage& k = chunks[c];
    if (k.stage != shape.stage_of(static_cast<int64_t>(c)))
      throw Error("chunk " + std::to_string(c) + " runs on stage " + std::to_string(k.stage) + " where the pipeline runs it on stage " +
                  std::to_string(shape.stage_of(static_cast<int64_t>(c))));
    // (An interlaced chunk runs on every stage.)
    for (int64_t st = k.stage < 0 ? 0 : k.stage; st < (k.stage < 0 ? S : k.stage + 1); ++st) {
      out.stage_time[static_cast<size_t>(st)] += k.micro_batch;
      stage_update[static_cast<size_t>(st)] += k.update;
    }
    const double received = c > 0 ? chunks[c - 1].crossing : 0.0;
    forward.push_back(k.forward + received), backward.push_back(k.backward + received);
  }
  out.slowest = *std::max_element(out.stage_time.begin(), out.stage_time.end());
  out.update = *std::max_element(stage_update.begin(), stage_update.end());
  const double M = static_cast<double>(shape.micro_batches);
  out.closed_form = (M + static_cast<double>(S - 1) / static_cast<double>(v)) * out.slowest + out.update;
  // The steps as the stages run them, each chunk at its own time: where
  // the stages differ, the others' fill and drain steps are shorter than
  // the slowest stage's, which the closed form charges them. (A written
  // order, joint steps and GPipe through several chunks per stage have no
  // closed form at all.)
  const auto programs = stage_programs(shape);
  out.steps = schedule_makespan(shape, programs, forward, backward, between);
  out.time = out.steps + out.update;
  // ZeRO's weights gathered beside the forward pass: every stage's
  // gathers start with the step, each chunk's first forward waiting for
  // its own from when the schedule reaches it (a later stage has the
  // first micro-batch's way through the stages before it to gather in),
  // the delay going on down the schedule (param_gathers.h: chained per
  // stage, or aligned under the interleaved schedule).
  if (gathers_beside) {
    if (!shape.interlaced.empty()) throw Error("ZeRO's weights gathered beside the forward pass are not modelled with interlaced chunks");
    // (A chunk's gathers are needed from its compute's start, which comes
    // after the boundary its forward step receives first.)
    std::vector<std::vector<ParamGather>> gathers;
    for (size_t c = 0; c < chunks.size(); ++c) {
      gathers.push_back(chunks[c].param_gathers);
      if (c > 0)
        for (ParamGather& g : gathers.back()) g.needed += chunks[c - 1].crossing;
    }
    PipelineGathers wait(shape, std::move(gathers));
    out.gather_wait = std::max(0.0, schedule_makespan(shape, programs, forward, backward, between, std::ref(wait)) - out.steps);
    out.time += out.gather_wait;
  }
  return out;
}

}  // namespace pcgx::search
