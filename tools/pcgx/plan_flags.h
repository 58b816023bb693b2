#pragma once
// The flags that lower a plan written by hand against a model (docs/plans.md)
// for `pcgx plan check` and `pcgx simulate MODEL --plan`: the model, its
// sizes, the machine and its devices; and their translation into the
// request runner::check_plan and runner::optimize take. One concept, kept
// out of the commands.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pcgx/runner/optimize.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::cli {

struct PlanFlags {
  std::string model, plan, machine;
  std::vector<std::string> sets, rulesets;
  int64_t devices = 0;
  bool per_device_batch = true;
  bool allow_unverified = false;
};

// --machine, --devices, --set, --global-batch, --ruleset and
// --allow-unverified (MODEL and PLAN are the command's own: a positional
// argument or an option).
void add_plan_model_options(CLI::App* cmd, PlanFlags& f);
// The request lowering f.plan for f.model on the machine, with the plan's
// precision, recomputation, ZeRO stage and pipeline (as `optimize --plan`
// with no recipe flags). Throws pcgx::Error naming the file or flag.
runner::OptimizeRequest plan_request(const PlanFlags& f, std::shared_ptr<const search::UserPlan>& plan);

}  // namespace pcgx::cli
