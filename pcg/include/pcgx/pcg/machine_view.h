#pragma once
// A machine view (Unity, Section 3.2; docs/design.md "Machine mapping"): which
// device runs each task of an operator. The tasks form a grid
// (degree_inference.h: slot dimension, partial-sum kinds, then the kinds
// that split the output), and a view gives a start device and one stride
// per grid dimension, replica slots included:
//     device(coords) = start + sum_j coords_j * strides_j.
// Without per-dimension strides the view is one-dimensional: task t (in
// row-major grid order) runs on start + t * stride. Per-dimension strides
// let a tensor-parallel group sit inside a node (stride 1) while data
// parallelism spans nodes (stride = devices per node), whatever order the
// grid's dimensions come in.
//
// One type for the search (which chooses views) and the runtime (which
// runs them).
#include <cstdint>
#include <span>
#include <vector>

namespace pcgx {

struct MachineView {
  int64_t start = -1;            // -1: not placed (a source, or a node placed by its readers)
  int64_t stride = 1;            // one-dimensional views
  std::vector<int64_t> strides;  // per grid dimension; empty: one-dimensional

  bool placed() const { return start >= 0; }
  // Device of task `t` of a grid with `extents`.
  int64_t device(int64_t t, std::span<const int64_t> extents) const;
  // The highest device any task of the grid runs on.
  int64_t last_device(std::span<const int64_t> extents) const;
  bool operator==(const MachineView&) const = default;
};

}  // namespace pcgx
