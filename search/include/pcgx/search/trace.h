#pragma once
// A simulated timeline (simulator.h) in the Chrome trace-event format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
// which Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// One process per kind of resource ("devices", "links", "sync channels"),
// one track (thread) per resource, named as Simulator::resource_name does.
// Every task that runs for a while is one complete event ("ph": "X", times
// in microseconds) on each resource it holds, named after its node and
// kind ("fc1 (Linear) forward", "bucket 2"), with its task index, device
// and node id in "args". A task of no duration (a message that did not
// have to move) is left out.
#include <string>

#include "pcgx/search/simulator.h"

namespace pcgx::search {

std::string simulation_trace_json(const Simulator& s);

}  // namespace pcgx::search
