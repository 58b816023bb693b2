#pragma once
// A predicted step beside a measured one, term by term: what the cost
// model said a step's time is made of (machine_mapping.h's Estimate) and
// where the busiest device's time went in a timed run (trainer.h's
// DeviceTime). The terms pair as
//
//   kernels   predicted compute less update and overhead | measured kernels
//   update    the optimizer                              | measured update
//   overhead  running the nodes (calibrated)             | the rest of the step
//   messages  exposed communication                      | sending and waiting
//
// A device waits in a recv both for the bytes and for a slower peer, so
// measured messages hold what the prediction calls idle time too.
#include <string>
#include <vector>

#include "pcgx/runtime/trainer.h"
#include "pcgx/search/machine_mapping.h"

namespace pcgx::runner {

struct StepTerm {
  std::string name;
  double predicted = 0, measured = 0;  // seconds per step
};

struct StepTerms {
  int device = 0;  // the busiest device measured (most time outside messages)
  double predicted = 0, measured = 0;  // whole step, seconds
  std::vector<StepTerm> terms;         // kernels, update, overhead, messages
};

// Needs a run with TrainOptions::time_kernels; throws pcgx::Error otherwise.
StepTerms step_terms(const search::Estimate& e, const runtime::TrainResult& r);

}  // namespace pcgx::runner
