// The layout changes between a producer's and a consumer's layout
// (SuperScaler's RVD transitions: R replicated, V value-split into partial
// sums, D dimension-split) as the collective pcgx runs for each
// (collectives.h's layout_change), against the naive plan of sending every
// block a device needs from every device that holds part of it, all
// transfers posted at once (collectives.h's exchange), as the cost model
// prices both. A priced comparison on the machine files, not a measurement.
//
//   bench_layout_changes [--machine NAME] [--mib N]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "pcgx/search/collectives.h"
#include "pcgx/search/cost_model.h"

namespace {

using pcgx::Machine;
using namespace pcgx::search;

struct Change {
  const char* from;
  const char* to;
  Collective collective;
  // The naive plan: every device sends every other device this many bytes
  // of a tensor of `n` bytes over `k` devices, all posted at once.
  double (*per_pair)(int64_t k, double n);
};

// D -> R: a device's block to every other. V -> D: block b of a device's
// partial sum to device b (who adds them). The same transfers.
double block(int64_t k, double n) { return n / static_cast<double>(k); }
// V -> R: a device's whole partial sum to every other, which adds them.
double whole(int64_t, double n) { return n; }
// D(i) -> D(j): the part of a device's block that device b now holds.
double block_part(int64_t k, double n) { return n / static_cast<double>(k * k); }

std::vector<Transfer> every_pair(int64_t k, double bytes) {
  std::vector<Transfer> t;
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b)
      if (a != b) t.push_back({a, b, bytes});
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::string machine_name = "dgx-h100";
  double mib = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--machine" && i + 1 < argc) machine_name = argv[++i];
    else if (a == "--mib" && i + 1 < argc) mib = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_layout_changes [--machine NAME] [--mib N]\n");
      return 2;
    }
  }
  if (!(mib > 0)) {
    std::fprintf(stderr, "error: --mib: must be a positive number\n");
    return 2;
  }
  Machine machine;
  try {
    machine = find_machine(machine_name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: --machine: %s\n", e.what());
    return 2;
  }
  const double n = mib * 1024 * 1024;  // the whole tensor (one partial sum of it, for V)
  const std::vector<Change> changes{
      {"D", "R", Collective::kAllGather, block},
      {"V", "R", Collective::kAllReduce, whole},
      {"V", "D", Collective::kReduceScatter, block},
      {"D(i)", "D(j)", Collective::kAllToAll, block_part},
  };
  std::printf("Layout changes of a %.0f MiB tensor on %s, priced by the cost model (collectives.h); seconds in ms\n", mib, machine.name.c_str());
  std::printf("%-6s %-6s %-8s %-15s %12s %12s %8s\n", "from", "to", "devices", "collective", "collective", "naive", "naive/x");
  const int64_t per_node = machine.devices_per_node;
  for (const int64_t k : {int64_t{2}, per_node, 2 * per_node, 8 * per_node}) {
    if (k < 2 || k > machine.num_devices()) continue;
    const GroupShape g = strided_group(machine, 0, 1, k);
    for (const Change& c : changes) {
      // The buffer collective_time takes: the gathered one for all-gather
      // and reduce-scatter, the whole tensor for all-reduce, one member's
      // share of it (n / k) for all-to-all.
      const double bytes = c.collective == Collective::kAllToAll ? n / static_cast<double>(k) : n;
      const double collective = collective_time(machine, c.collective, g, bytes);
      const std::vector<Transfer> t = every_pair(k, c.per_pair(k, n));
      const double naive = exchange_time(machine, t);
      std::printf("%-6s %-6s %-8lld %-15s %12.3f %12.3f %7.2fx\n", c.from, c.to, static_cast<long long>(k),
                  std::string(to_string(c.collective)).c_str(), collective * 1e3, naive * 1e3, naive / collective);
    }
  }
  return 0;
}
