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
// With pipeline stages every stage's chain starts as the step starts, but
// a stage's first forward starts only when the first micro-batch reaches
// it, so a later stage's gathers have that long to arrive: a pass is
// replayed from the time it starts (`start`), the chains carrying over
// from one pass to the next on the same devices (a stage's chunks, under
// interleaving, in the order it first runs them; Megatron-LM's param
// buffers list the model chunks' buckets one after another).
#include <cstdint>
#include <map>
#include <vector>

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

}  // namespace pcgx::search
