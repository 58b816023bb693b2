#pragma once
// Small machines with round figures, so that expected times are easy to
// work out by hand.
#include "pcgx/pcg/machine.h"

namespace pcgx::search {

// Two nodes of four devices: inside a node 10 GB/s links at 1 us; between
// nodes 1 GB/s per adapter at 10 us, two adapters per node.
inline Machine two_level_machine() {
  Machine m;
  m.name = "two-level";
  m.nodes = 2;
  m.devices_per_node = 4;
  m.device = {"toy", 1e12, 1e11, 1e12};
  m.links = {{"fast", 4, 1e10, 1e-6, 1}, {"slow", 0, 1e9, 1e-5, 2}};
  return m;
}

}  // namespace pcgx::search
