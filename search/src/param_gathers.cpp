#include "pcgx/search/param_gathers.h"

#include <algorithm>

namespace pcgx::search {

double replay_param_gathers(std::vector<ParamGather> gathers, double start, GatherChains& chains) {
  std::stable_sort(gathers.begin(), gathers.end(), [](const ParamGather& a, const ParamGather& b) { return a.needed < b.needed; });
  double wait = 0;  // the forward pass's delay so far
  for (const ParamGather& x : gathers) {
    double& at = chains[x.devices];  // when this gather is issued
    const double reader = std::max(start + x.needed + wait, at + x.seconds);  // its first reader starts
    wait = reader - start - x.needed;
    at = reader;
  }
  return wait;
}

double replay_param_gathers(std::vector<ParamGather> gathers) {
  GatherChains fresh;
  return replay_param_gathers(std::move(gathers), 0, fresh);
}

PipelineGathers::PipelineGathers(const PipelineShape& shape, std::vector<std::vector<ParamGather>> chunk_gathers)
    : shape_(shape), gathers_(std::move(chunk_gathers)), aligned_(shape.schedule == PipelineSchedule::kInterleaved) {
  for (auto& g : gathers_)
    std::stable_sort(g.begin(), g.end(), [](const ParamGather& a, const ParamGather& b) { return a.needed < b.needed; });
  gathers_.resize(static_cast<size_t>(shape_.chunks()));
  chains_.resize(static_cast<size_t>(shape_.stages));
  arrival_.resize(gathers_.size());
  forwards_.assign(static_cast<size_t>(shape_.stages), 0);
}

void PipelineGathers::issue(int64_t chunk, double at) {
  auto& arrives = arrival_[static_cast<size_t>(chunk)];
  GatherChains& free = chains_[static_cast<size_t>(shape_.stage_of(chunk))];
  for (const ParamGather& x : gathers_[static_cast<size_t>(chunk)]) {
    double& f = free[x.devices];
    f = std::max(f, at) + x.seconds;
    arrives.push_back(f);
  }
}

double PipelineGathers::operator()(int64_t stage, const PipelineStep& step, double start) {
  if (stage < 0) return 0.0;  // (a joint step's: not modelled, refused by the pipeline search)
  const int64_t S = shape_.stages, v = shape_.virtual_stages;
  const int64_t k = forwards_[static_cast<size_t>(stage)]++;
  if (aligned_) {
    // Megatron-LM's interleaved schedule: the first two chunks' buckets as
    // the step starts; chunk c's (c >= 2) at the stage's forward step
    // S (c - 1) - stage, lined up with the first stage's first forward of
    // chunk c - 1.
    if (k == 0)
      for (int64_t c = 0; c < std::min<int64_t>(2, v); ++c) issue(c * S + stage, 0.0);
    for (int64_t c = 2; c < v; ++c)
      if (k == S * (c - 1) - stage) issue(c * S + stage, start);
  }
  if (!started_.insert(step.chunk).second) return 0.0;  // only a chunk's first forward waits
  const auto& gathers = gathers_[static_cast<size_t>(step.chunk)];
  if (!aligned_) return replay_param_gathers(gathers, start, chains_[static_cast<size_t>(stage)]);
  const auto& arrives = arrival_[static_cast<size_t>(step.chunk)];
  double wait = 0;
  for (size_t i = 0; i < gathers.size() && i < arrives.size(); ++i)
    wait = std::max(wait, arrives[i] - start - gathers[i].needed);
  return wait;
}

}  // namespace pcgx::search
