#pragma once
// Alpha-beta costs of the collectives pcgx's parallel operators perform
// (DESIGN.md, "Search"). `n` is the bytes one device holds of the value the
// collective moves (the whole value for broadcast/reduce/all-reduce, the
// gathered result for gather/scatter), `k` the group size, and the link is
// the slowest level the group spans (alpha = latency, beta = 1 / bandwidth):
//
//   scatter, gather     ceil(log2 k) alpha +  (k-1)/k n beta   (tree latency, each byte crosses once)
//   broadcast, reduce   ceil(log2 k) alpha + 2(k-1)/k n beta   (scatter + all-gather; reduce-scatter + gather)
//   all-reduce (ring)       2(k-1)  alpha + 2(k-1)/k n beta   (reduce-scatter + all-gather rings)
//   send/recv                      alpha +          n beta
//
// A group of one device costs nothing.
#include <cstdint>

#include "pcgx/pcg/machine.h"

namespace pcgx::search {

struct LinkCost {
  double alpha = 0;  // seconds
  double beta = 0;   // seconds per byte
  static LinkCost of(const LinkLevel& l) { return {l.latency, l.bandwidth > 0 ? 1.0 / l.bandwidth : 0.0}; }
};

double scatter_time(int64_t k, double n, LinkCost c);
double gather_time(int64_t k, double n, LinkCost c);
double broadcast_time(int64_t k, double n, LinkCost c);
double reduce_time(int64_t k, double n, LinkCost c);
double allreduce_time(int64_t k, double n, LinkCost c);
double send_time(double n, LinkCost c);

// The link a group of devices in [lo, hi] talks over (a single device: none,
// cost zero).
LinkCost group_link(const Machine& m, int64_t lo, int64_t hi);

}  // namespace pcgx::search
