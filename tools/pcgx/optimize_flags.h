#pragma once
// `pcgx optimize`'s flags and their translation into a
// runner::OptimizeRequest: the text parsed into the driver's types, the
// model, machine and plan loaded (runner/request_sources.h), the request
// validated. Kept out of cmd_optimize.cpp, which calls and prints.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline_flags.h"
#include "pcgx/runner/optimize.h"

namespace pcgx::cli {

struct OptimizeFlags {
  std::vector<std::string> rulesets;
  std::string model, machine, algorithm = "unity", rank = "simulation", out, dot, profile, efficiency, precision = "tf32",
      recompute = "auto", zero = "auto", plan, optimizer = "adam", persistence = "auto",
      attention = "eager", cross_entropy = "fused", dropout_add = "eager", grad_precision = "fp32";
  std::vector<std::string> sets;
  int64_t devices = 0;
  int32_t recompute_layers = 0;  // 0: not stated
  std::vector<std::string> recompute_operators;
  std::vector<std::string> zero_weights;  // PATTERN=STAGE each
  double bucket_mb = 25;
  bool quiet = false, per_device_batch = true, allow_unverified = false, reprove = false, overlap_grad_input = false,
       overlap_param_gather = false, overlap_grad_reduce = true, reduce_scatter = true;
  PipelineFlags pipe;
  search::SearchOptions search;
  CLI::Option *search_flag = nullptr, *precision_flag = nullptr, *recompute_flag = nullptr, *zero_flag = nullptr, *optimizer_flag = nullptr,
             *attention_flag = nullptr, *cross_entropy_flag = nullptr, *dropout_add_flag = nullptr, *overlap_flag = nullptr,
             *param_gather_flag = nullptr, *grad_reduce_flag = nullptr,
             *grad_precision_flag = nullptr, *reduce_scatter_flag = nullptr;
};

void add_optimize_options(CLI::App* cmd, OptimizeFlags& f);
// The request the flags state, validated (a plan's mistakes among them)
// before any output; throws pcgx::Error naming the flag or file.
runner::OptimizeRequest optimize_request(OptimizeFlags& f);

}  // namespace pcgx::cli
