#pragma once
// The requests runner::optimize's tests search (optimize_test.cpp,
// optimize_zero_test.cpp).
#include <optional>

#include "pcgx/pcg/zoo.h"
#include "pcgx/runner/optimize.h"
#include "search/toy_machines.h"

namespace pcgx::testing {

// The tiny GPT on one toy device, searched as data parallelism (no rules).
inline runner::OptimizeRequest request(double capacity, std::optional<Recompute> recompute) {
  runner::OptimizeRequest q;
  q.model = build_model("gpt-tiny", {});
  q.machine = search::toy_machine().with_devices(1);
  q.machine.device.memory_capacity = capacity;
  q.search.algorithm = search::Algorithm::kDataParallel;
  q.efficiency = search::toy_efficiency();
  q.recompute = recompute;
  q.accumulate = false;  // the recipes alone; accumulation: OptimizeAccumulation
  q.recompute_kinds = false;  // whole layers; kinds of operators: OptimizeRecompute.KindsOfOperators
  return q;
}

// The tiny GPT data parallel on the 8 toy devices in bf16, recomputing
// nothing: the need of each ZeRO stage.
inline runner::OptimizeRequest sharded(double capacity, std::optional<ZeroStage> zero) {
  runner::OptimizeRequest q = request(capacity, Recompute::kNone);
  q.model = build_model("gpt-tiny", {{"batch", 16}});
  q.machine = search::toy_machine();
  q.machine.device.memory_capacity = capacity;
  q.precision = Precision::kBf16;
  q.zero = zero;
  return q;
}

}  // namespace pcgx::testing
