#pragma once
// Small machines with round figures, and one- and three-Linear graphs, so
// that expected times are easy to work out by hand.
#include <string>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine.h"
#include "pcgx/search/cost_model.h"

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

// Two nodes of four devices: 1 TFLOP/s, 100 GB/s, 1 GB each; 10 GB/s at
// 1 us inside a node, 1 GB/s at 10 us between nodes.
inline Machine toy_machine() {
  Machine m;
  m.name = "toy";
  m.nodes = 2;
  m.devices_per_node = 4;
  m.device = {"toy", 1e12, 1e11, 1e9};
  m.links = {{"fast", 4, 1e10, 1e-6}, {"slow", 0, 1e9, 1e-5}};
  return m;
}

// The toy machine with FP32 and TF32 at 1 TFLOP/s, BF16 and FP16 at 2.
inline Machine mixed_machine() {
  Machine m = toy_machine();
  m.name = "toy-mixed";
  m.device.peak_flops_by_precision = {1e12, 1e12, 2e12, 2e12};
  return m;
}

// Peak FLOP/s and bandwidth reached exactly, no launch cost, backward
// twice the forward: times follow from the roofline alone.
inline Efficiency toy_efficiency() {
  Efficiency e;
  e.launch = 0;
  e.fallback = {1.0, 1.0, 2.0, false};
  return e;
}

// x[batch, in] times w[in, out]: node 2 is the Linear.
inline Graph linear_graph(int64_t batch, int64_t in, int64_t out) {
  Graph g("lin");
  const NodeId x = g.add("Input", {{"shape", IntList{batch, in}}}, {}, "x");
  const NodeId w = g.add("Weight", {{"shape", IntList{in, out}}}, {}, "w");
  const NodeId y = g.add("Linear", {}, {{x, 0}, {w, 0}}, "fc");
  g.add_output({y, 0});
  return g;
}

// x[batch, 32] through three Linears: 32x16 (512 parameters), 16x64
// (1024), 64x4 (256).
inline Graph three_linears(int64_t batch) {
  Graph g("three");
  const NodeId x = g.add("Input", {{"shape", IntList{batch, 32}}}, {}, "x");
  TensorRef h{x, 0};
  int64_t in = 32;
  int i = 0;
  for (const int64_t out : {16, 64, 4}) {
    const NodeId w = g.add("Weight", {{"shape", IntList{in, out}}}, {}, "w" + std::to_string(i));
    h = {g.add("Linear", {}, {h, {w, 0}}, "fc" + std::to_string(i++)), 0};
    in = out;
  }
  g.add_output(h);
  return g;
}

}  // namespace pcgx::search
