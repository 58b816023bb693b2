#pragma once
// How `pcgx simulate` prints its report.
#include <cstdint>
#include <ostream>
#include <string>

#include "pcgx/runner/simulate.h"

namespace pcgx::cli {

// The strategy (`label`: where it came from) and its recipe, the simulated
// iteration along the critical path beside the search's estimate, memory,
// devices, and with `show` > 0 that many devices and longest critical-path
// tasks.
void print_simulation(std::ostream& out, const runner::SimulateReport& rep, const std::string& label, int64_t show);

}  // namespace pcgx::cli
