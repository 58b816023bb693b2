#pragma once
// Gradient synchronization replayed against the backward pass, as PyTorch
// DDP on NCCL runs it (Li et al., "PyTorch Distributed", VLDB 2020, Section
// 3.2.3): gradients are assigned to buckets in the order the backward pass
// produces them, a bucket's all-reduce starts once its last gradient is
// ready (and the communication channel is free), and buckets of different
// process groups never mix. One channel serves every bucket, in the order
// they become ready, beside the backward pass; what runs past the end of
// the backward pass is exposed, the rest is hidden behind it. On devices
// that do not overlap communication (DeviceSpec::overlaps_communication,
// pcgx's CPU runtime), the buckets run after the backward pass. Under ZeRO
// stage 1 or 2 each bucket's weights are all-gathered after the update
// (CostModel::weight_gather_time), all of it exposed.
#include <cstdint>
#include <vector>

#include "pcgx/search/cost_model.h"

namespace pcgx::search {

struct ReadyGradient {
  double ready = 0;  // seconds after the backward pass starts
  SyncGroup sync;
};

struct SyncTimeline {
  double total = 0;    // every bucket's all-reduce
  double exposed = 0;  // past the end of the backward pass
  double gather = 0;   // ZeRO 1, 2: the buckets' weight all-gathers after the update
  double hidden() const { return total - exposed; }
  int64_t buckets = 0;
};

// `gradients` in any order; `backward` is when the backward pass ends. A
// bucket costs CostModel::bucket_time (packing, all-reduce, unpacking).
SyncTimeline replay_buckets(const CostModel& cost, std::vector<ReadyGradient> gradients, double backward, double bucket_bytes);

}  // namespace pcgx::search
