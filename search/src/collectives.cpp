// Collective cost formulas (see collectives.h).
#include "pcgx/search/collectives.h"

#include <cmath>

namespace pcgx::search {
namespace {

double log2_ceil(int64_t k) { return std::ceil(std::log2(static_cast<double>(k))); }
double frac(int64_t k) { return static_cast<double>(k - 1) / static_cast<double>(k); }

}  // namespace

double scatter_time(int64_t k, double n, LinkCost c) {
  return k <= 1 ? 0.0 : log2_ceil(k) * c.alpha + frac(k) * n * c.beta;
}
double gather_time(int64_t k, double n, LinkCost c) { return scatter_time(k, n, c); }
double broadcast_time(int64_t k, double n, LinkCost c) {
  return k <= 1 ? 0.0 : log2_ceil(k) * c.alpha + 2.0 * frac(k) * n * c.beta;
}
double reduce_time(int64_t k, double n, LinkCost c) { return broadcast_time(k, n, c); }
double allreduce_time(int64_t k, double n, LinkCost c) {
  return k <= 1 ? 0.0 : 2.0 * static_cast<double>(k - 1) * c.alpha + 2.0 * frac(k) * n * c.beta;
}
double send_time(double n, LinkCost c) { return c.alpha + n * c.beta; }

LinkCost group_link(const Machine& m, int64_t lo, int64_t hi) {
  if (lo == hi) return {};
  return LinkCost::of(m.link_between(lo, hi));
}

}  // namespace pcgx::search
