#pragma once
// How `pcgx optimize`, `pcgx run` and `pcgx simulate` print a prediction:
// its terms, so every predicted time reads as the sum it is (docs/design.md
// "Search"), and what each device keeps, by kind.
#include <ostream>
#include <string>
#include <vector>

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

// "  between devices     1.25 GiB per step", and under ZeRO (`zero` >= 1)
// what the figure leaves out (the runtime pads its buckets).
std::string between_devices_line(double bytes, ZeroStage zero);

// What each device keeps, by kind, one line per distinct breakdown (as
// printed), busiest first, naming its devices and the most one of them
// keeps ("  devices 0..7, 16..23 1.25 GiB: weights ..., master ...,
// gradients ..., optimizer ..., activations ..., transient ..."); past
// `most` lines, one line counting the rest; each line starts with `indent`.
void print_memory_breakdown(std::ostream& out, const std::vector<search::DeviceMemory>& memory, const std::string& indent = "  ",
                            size_t most = 8);

// With a profile: how many of g's compute operators it times, and the
// count that fall back to the roofline. Nothing without one.
void print_profile_coverage(std::ostream& out, const search::CostModel& cost, const Graph& g);

}  // namespace pcgx::cli
