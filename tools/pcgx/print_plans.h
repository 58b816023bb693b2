#pragma once
// How `pcgx plan check` and `pcgx plan certify` print their reports.
#include <ostream>
#include <string>

#include "pcgx/runner/certify.h"
#include "pcgx/runner/plan_request.h"

namespace pcgx::cli {

// What each rule of `plan` (read from `path`) decides, the operators left
// one task, and the communication derived, costliest first.
void print_plan_check(std::ostream& out, const std::string& path, const search::UserPlan& plan, const runner::PlanCheck& c);
// Unity's search of the whole model beside the plan: its prediction and
// the plan's time over it, or why it found nothing.
void print_unity_beside(std::ostream& out, const runner::PlanCheck& c);
// A certificate's verdict, what each claim stood for with `verbose`, every
// claim not proved or not claimable, and whether the operators proved are
// the model's.
void print_certificate(std::ostream& out, const runner::CertifyReport& rep, bool verbose);

}  // namespace pcgx::cli
