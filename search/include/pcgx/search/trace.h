#pragma once
// A simulated timeline (simulator.h) in the Chrome trace-event format
// (pcg/chrome_trace.h), which Perfetto and chrome://tracing open; a
// measured step (runtime/step_trace.h, `pcgx run --trace`) is written the
// same way, its devices on the same tracks.
//
// One process per kind of resource ("devices", "links", "sync channels"),
// one track (thread) per resource, named as Simulator::resource_name does.
// Every task that runs for a while is one complete event ("ph": "X", times
// in microseconds) on each resource it holds, named after its node and
// kind ("fc1 (Linear) forward", "bucket 2"), its kind as the category, and
// its task index, device and node id in "args". A task of no duration (a message that did not
// have to move) is left out.
#include <string>

#include "pcgx/search/simulator.h"

namespace pcgx::search {

std::string simulation_trace_json(const Simulator& s);

}  // namespace pcgx::search
