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
// term a line, indented under a line naming the total, as priced by
// `cost` (its recipe: under ZeRO the bytes line says what the estimate
// leaves out; whether the buckets run beside the backward pass and ZeRO's
// weights are gathered beside the forward pass, gradient_sync.h, where
// e.gather is its wait). Without a cost model: ZeRO 0, the buckets
// beside the backward pass.
void print_terms(std::ostream& out, const search::Estimate& e, const search::CostModel* cost);

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
