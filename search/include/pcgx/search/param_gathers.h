#pragma once
// Megatron-LM's --overlap-param-gather (TrainingRecipe::overlap_param_gather):
// under ZeRO 1 and 2, the buckets' updated weights all-gathered beside the
// next step's forward pass, in the order the forward pass first reads them
// (`needed`, ascending), one at a time per set of devices (each rank's
// distributed optimizer runs its own chain): the first issued as the step
// starts (its zero_grad), each next one as the first operator reading the
// one before it in its chain starts (its forward pre-hook, once that one
// has arrived), and that operator waiting for its own. The links the
// gathers cross are not shared with the forward pass's own messages here
// (nor in the simulator).
//
// With pipeline stages (PipelineGathers) every stage's chain starts as the
// step starts (Megatron-Core r0.8: the first bucket from zero_grad; since
// r0.9 from its own reader's pre-hook, a bucket's gather later, not
// modelled), but a stage's first forward starts only when the first
// micro-batch reaches it, and the chain goes on only from there: a pass
// is replayed from the time it starts (`start`), the chains carrying over
// from one pass to the next on the same devices (a stage's chunks in the
// order it first runs them; Megatron-LM's param buffers list the model
// chunks' buckets one after another). Under the interleaved schedule
// Megatron-LM (since r0.9, --align-param-gather, on by default there)
// issues every bucket of a stage's first two chunks as the step starts,
// on every stage at once, and those of chunk c >= 2 as the stage reaches
// the forward step its schedule lines up with the first stage's first
// forward of chunk c - 1; they run one after another per set of devices,
// and each reader waits for its own. Other orders with several chunks per
// stage (GPipe, a written order) are chained.
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "pcgx/pcg/pipeline_schedule.h"

namespace pcgx::search {

struct ParamGather {
  double seconds = 0;  // CostModel::weight_gather_time
  double needed = 0;   // when the forward pass first reads the bucket, without waiting (after the pass starts)
  std::vector<int64_t> devices = {};  // its chain: the devices of its group (SyncGroup::devices)
};

// Per chain (its devices), when its next gather is issued, in seconds
// after the step starts: 0 for a chain not yet seen.
using GatherChains = std::map<std::vector<int64_t>, double>;

// How long a forward pass starting at `start` (seconds after the step
// starts) waits in all for `gathers` (any order; replayed in `needed`
// order), the chains' state carried in `chains`.
double replay_param_gathers(std::vector<ParamGather> gathers, double start, GatherChains& chains);
// A pass starting with the step, every chain fresh: what is exposed
// without pipeline stages.
double replay_param_gathers(std::vector<ParamGather> gathers);

// A pipelined plan's gathers, replayed as pcg's schedule_makespan runs the
// stages' forward steps (its ForwardWait: each call returns how long that
// forward waits for its weights). `chunk_gathers`: per chunk of `shape`
// (no interlaced chunks), its gathers, `needed` counted from its first
// forward's start and `devices` numbered within its stage. Aligned under
// the interleaved schedule, chained otherwise.
class PipelineGathers {
 public:
  PipelineGathers(const PipelineShape& shape, std::vector<std::vector<ParamGather>> chunk_gathers);
  double operator()(int64_t stage, const PipelineStep& step, double start);

 private:
  // Issues a chunk's gathers at `at`, after what its chains already run.
  void issue(int64_t chunk, double at);
  PipelineShape shape_;
  std::vector<std::vector<ParamGather>> gathers_;  // per chunk, in `needed` order
  bool aligned_ = false;
  std::vector<GatherChains> chains_;              // per stage: chained, when the next is issued; aligned, when each is free
  std::vector<std::vector<double>> arrival_;      // aligned: per chunk, per gather, when it arrives (empty: not issued)
  std::vector<int64_t> forwards_;                 // per stage: forward steps seen
  std::set<int64_t> started_;                     // chunks whose first forward has been seen
};

}  // namespace pcgx::search
