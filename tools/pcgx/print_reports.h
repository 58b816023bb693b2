#pragma once
// How `pcgx optimize` and `pcgx run` print the driver's reports (plain text
// on standard output; the files they write are the driver's).
#include <chrono>
#include <cstdint>
#include <ostream>

#include "pcgx/runner/optimize.h"
#include "pcgx/runner/train.h"
#include "print_estimate.h"

namespace pcgx::cli {

// How much print_optimize_report adds after the summary: every operator's
// layout and machine view, nothing, or nothing and no pointer to the
// layout search's rewrites (`plan check` has listed them above).
enum class ReportDetail : uint8_t { kOperators, kSummary, kBelowPlanCheck };
// The search, the prediction term by term, the simulation, the finalists,
// pipeline stages, memory, data parallelism beside it, the rules applied
// and what `detail` adds. Throws Error when the plan found is infeasible.
void print_optimize_report(std::ostream& out, const runner::OptimizeRequest& q, const runner::OptimizeReport& rep, ReportDetail detail);
// The ruleset a search used, and a warning where it was unverified.
void print_ruleset_notes(std::ostream& out, const runner::OptimizeReport& rep);

// The model, strategy, devices, loss, measured and predicted step time
// (term by term, and beside the measurement with a breakdown), throughput
// and traffic.
void print_train_report(std::ostream& out, const runner::TrainReport& rep);

// One progress line per step on standard error: a bar, the loss and
// samples per second; on a terminal redrawn in place at most every 0.1 s,
// elsewhere a line a second. `last` holds the time of the last line.
void print_progress(const runtime::StepReport& r, int64_t batch, bool tty, std::chrono::steady_clock::time_point& last);

// The search's progress on standard error: its phase, candidates explored
// and evaluated, and the best time so far; on a terminal redrawn in place
// at most every 0.1 s, elsewhere a line every 2 s.
void print_search_progress(const search::SearchProgress& p, bool tty, std::chrono::steady_clock::time_point& last);

}  // namespace pcgx::cli
