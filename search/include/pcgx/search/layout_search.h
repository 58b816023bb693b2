#pragma once
// The cheapest sequence of parallel operators between a producer's layout
// and its readers' (SuperScaler's RVD search, docs/plans.md "Derived
// communication"). A tensor's layout is R (replica slots holding copies),
// V (replica slots holding partial sums) and D (a degree per dimension);
// pcgx's parallel operators are its transitions: Reduce (V -> fewer
// slots), Replicate (more R), Combine and Repartition (lower or raise one
// dimension's degree). A pair of them over the same devices runs as one
// collective (relayout.h: reduce-scatter, all-gather, all-reduce,
// all-to-all), any other step as its own moves, so the order of the steps
// decides what runs: V(2)D1(2) -> D2(4), written as Reduce(2) Combine1(2)
// Repartition2(4), is a reduce and an exchange of pieces; as Reduce(2)
// Repartition2(2) Combine1(2) Repartition2(2) it is a reduce-scatter and
// an all-to-all.
//
// The search enumerates every sequence that takes one layout to the other
// and computes the same value, prices each as the cost model prices the
// plan (CostModel::layout_change_time for a pair, parallel_time for a lone
// step, at the placement the readers' machine views give), and keeps the
// cheapest. A sequence computes the same value when it sums the same
// partial sums first (one Reduce of all of them, as the certificate's
// conversion claims require, verifier/certificate.h) and then only changes
// degrees and makes copies, which the interpreter and the runtime run as
// identities of the value.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/search/cost_model.h"

namespace pcgx::search {

// One parallel operator of a sequence: Reduce and Replicate with their
// degree, Combine and Repartition with a dimension and a degree.
struct LayoutStep {
  DataMove move = DataMove::kNone;
  int dim = -1;
  int64_t degree = 1;
  bool operator==(const LayoutStep&) const = default;
};
// "Reduce(2) Repartition2(2) Combine0(2) Repartition2(2)".
std::string describe(std::span<const LayoutStep> steps);
// The step a parallel operator node takes.
LayoutStep layout_step(const Node& n);

// Every sequence taking `from` to `to` that first sums `sum` partial-sum
// slots (one Reduce, when sum > 1), then combines each dimension down to
// the greatest common divisor of its two degrees and repartitions it up
// to its target degree, in any interleaving with Replicates whose degrees
// multiply to `copy`, never holding more shards than the larger of the
// two layouts (at most `limit` of them, in a deterministic order); and,
// where partial sums are summed and nothing is copied, the sum followed
// by splitting first: each growing dimension split to the least common
// multiple of its two degrees, then every dimension merged down (one
// sequence more, wider than either layout: see layout_search.cpp).
std::vector<std::vector<LayoutStep>> layout_sequences(const ParallelTensorShape& from, const ParallelTensorShape& to, int64_t sum,
                                                      int64_t copy, size_t limit = 512);

// A conversion the search rewrote.
struct LayoutChoice {
  std::string from, to;   // the producer's name and the first reader's
  std::string before, after;  // the sequences (describe)
  Seconds before_time, after_time;  // as the cost model prices them, forward and backward
  // The naive plan beside them: every block a reader's shard needs sent
  // straight from every producer's shard holding part of it, all at once.
  Seconds naive_time;
};

// `g` with every conversion between compute operators (a chain of
// Reduce, Combine, Repartition and Replicate from a compute operator's
// output to compute readers, nothing else reading its inside)
// replaced by the cheapest sequence of layout_sequences where it is
// cheaper at `views`; the rest copied as it is. Chains from sources and
// what is computed from them alone (weights' stored layouts, inputs'
// loaded ones: source_layout.h), to graph outputs, over micro-slices or
// through an AllReduce are left alone, and so is a conversion that is
// one collective (a merge and
// a split of the same degree): a posted exchange pays one latency however
// many messages a device sends (collectives.h), so the cost model would
// price a rewrite of a small one (BatchNorm's statistics, all-reduced)
// below NCCL's collective without its messages being cheaper to send. `views` of the result are the copied nodes' (the new
// parallel operators' own views are unused: their shards live with their
// readers, placement.h); `image` maps every node of g to its copy, -1 for
// a replaced chain's operators.
struct Relaid {
  Graph graph;
  std::vector<MachineView> views;
  std::vector<NodeId> image;
  std::vector<LayoutChoice> choices;  // empty: graph is a copy of g
};
Relaid cheapest_layout_changes(const Graph& g, std::span<const MachineView> views, const CostModel& cost);

// The time of a chain of parallel operators `chain` (in order, each the
// only reader of the one before) of a placed graph, as the machine-mapping
// DP prices it, but a lone Repartition or Combine (not one of a pair)
// never below its moves posted at once: the DP prices a scatter or a
// gather by its slowest group alone, and a search among sequences would
// otherwise prefer steps whose groups send to the same devices at once.
Seconds chain_time(const Placement& p, std::span<const NodeId> chain, const CostModel& cost);

}  // namespace pcgx::search
