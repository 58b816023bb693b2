#pragma once
// `pcgx run`'s flags and their translation into a runner::TrainRequest
// (text parsed into the driver's types). Kept out of cmd_run.cpp, which
// calls and prints.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "pcgx/runner/backend_choice.h"
#include "pcgx/runner/train.h"

namespace pcgx::cli {

struct RunFlags {
  std::string backend = "auto", search = "unity", optimizer = "sgd", report = "run-report.json", plot = "loss.svg", precision, schedule, plan;
  std::vector<std::string> sets;
  int64_t batch = 0, threads = 0, search_budget = 12;
  double bucket_mb = 25;
  CLI::Option* search_flag = nullptr;
  bool optimize = false, strict_fp32 = false, no_report = false, no_plot = false;
  runner::TrainRequest q;
};

void add_run_options(CLI::App* cmd, RunFlags& f);
// The request the flags state, for `backend` (held in f.q).
runner::TrainRequest& run_request(RunFlags& f, runner::BackendKind backend);

}  // namespace pcgx::cli
