#include "print_estimate.h"

#include <cmath>
#include <cstdio>

#include "cli_common.h"

namespace pcgx::cli {

std::string ms(double seconds) {
  if (std::isinf(seconds)) return "infeasible";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f ms", seconds * 1e3);
  return b;
}

void print_terms(std::ostream& out, const search::Estimate& e, ZeroStage zero, bool beside_forward) {
  out << "  compute             " << ms(e.compute);
  if (e.overhead > 0) out << " (" << ms(e.overhead) << " of it running the nodes: calibrated overhead)";
  out << "\n"
      << "  communication       " << ms(e.communication) << " exposed\n"
      << "  gradient sync       " << ms(e.sync) << " in " << e.buckets << " bucket" << (e.buckets == 1 ? "" : "s") << ", "
      << ms(e.sync_hidden) << " hidden behind the backward pass\n";
  if (e.gather > 0)
    out << "  weight gather       " << ms(e.gather)
        << (beside_forward && e.gathered_for_use == 0 ? " beside the forward pass (ZeRO): what the forward pass waits for them\n"
                                                      : " after the update (ZeRO), exposed\n");
  out << "  idle (mean/device)  " << ms(e.idle) << (e.devices_used > 0 ? ", " + std::to_string(e.devices_used) + " devices compute" : std::string()) << "\n"
      << "  between devices     " << human_bytes(e.bytes) << " per step"
      << (shards_optimizer(zero) ? " (ZeRO's collectives as the cost model counts them; pcgx run predicts them bucket by bucket, padding included, and measures them)" : "")
      << "\n";
}

void print_profile_coverage(std::ostream& out, const search::CostModel& cost, const Graph& g) {
  if (cost.profile().entries.empty()) return;
  const auto [covered, total] = cost.profile_coverage(g);
  out << "profile               times " << covered << " of " << total << " compute operators";
  if (covered < total) out << "; " << total - covered << " fell back to the roofline";
  out << "\n";
}

}  // namespace pcgx::cli
