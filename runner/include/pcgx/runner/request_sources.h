#pragma once
// What a front end names by text for a search, loaded into its request:
// the model (a zoo name, graph JSON or ONNX file) with its sizes, the
// machine (a name or file) and how many of its devices, and a plan file.
// One place for what `pcgx optimize`, `pcgx plan check` and
// `pcgx simulate MODEL --plan` read alike.
#include <cstdint>
#include <memory>
#include <string>

#include "pcgx/pcg/zoo.h"
#include "pcgx/runner/optimize.h"

namespace pcgx::runner {

struct RequestSources {
  std::string model;
  ModelParams sizes;
  bool per_device_batch = true;  // a zoo model's batch is per device, times the devices (Unity's evaluation)
  std::string machine;
  int64_t devices = 0;  // the first N devices (0: all)
  std::string plan;     // a plan file (empty: none)
  bool algorithm_stated = false;  // the search algorithm was chosen, so a plan does not choose it (plan_request.h)
};

// Loads the machine, the plan (lowered as lower_plan_with says; also
// returned, null without one) and the model into `q`. Throws pcgx::Error
// naming the file or value that cannot be read.
std::shared_ptr<const search::UserPlan> load_sources(const RequestSources& s, OptimizeRequest& q);

}  // namespace pcgx::runner
