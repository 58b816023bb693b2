#pragma once
// What a training run leaves behind: a JSON report (format "pcgx.run") and
// a loss-curve picture (SVG).
#include <cstdint>
#include <string>

#include "pcgx/runtime/trainer.h"

namespace pcgx::runtime {

struct RunSummary {
  std::string model, strategy;  // model name; where the strategy came from (search algorithm or file)
  std::string backend = "cpu";
  int64_t batch = 0;            // samples per step (global)
  double predicted_step_seconds = 0;  // from the cost model; 0 when unknown
  double predicted_step_bytes = 0;    // sent between devices per step, counted for the plan (pcg/step_communication.h)
  TrainOptions options;
  TrainResult result;

  // Mean step time without the first (warm-up) step, when there are more.
  double mean_step_seconds() const;
  double samples_per_second() const { return static_cast<double>(batch) / mean_step_seconds(); }
  double step_bytes() const { return static_cast<double>(result.bytes_sent) / static_cast<double>(result.losses.size()); }
};

std::string run_report_json(const RunSummary& s);
// A self-contained SVG: loss per step, axes labelled.
std::string loss_curve_svg(const RunSummary& s);

}  // namespace pcgx::runtime
