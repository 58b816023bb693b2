#pragma once
// How `pcgx optimize` and `pcgx run` print a prediction: its terms, so
// every predicted time reads as the sum it is (docs/design.md "Search").
#include <ostream>
#include <string>

#include "pcgx/pcg/graph.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"

namespace pcgx::cli {

std::string ms(double seconds);  // "1.234 ms", or "infeasible"

// "  compute ... communication ... gradient sync ... idle ... bytes", one
// term a line, indented under a line naming the total. Under ZeRO
// (`zero` >= 1) the bytes line says what the estimate leaves out.
// `beside_forward`: ZeRO's weights gathered beside the forward pass
// (gradient_sync.h's gathers_beside_forward), where e.gather is its wait.
void print_terms(std::ostream& out, const search::Estimate& e, ZeroStage zero = ZeroStage::k0, bool beside_forward = false);

// With a profile: how many of g's compute operators it times, and the
// count that fall back to the roofline. Nothing without one.
void print_profile_coverage(std::ostream& out, const search::CostModel& cost, const Graph& g);

}  // namespace pcgx::cli
