#pragma once
// The reference interpreter: what every operator means. It evaluates any PCG
// on the sharded representation (every shard of every tensor is computed, by
// running each operator's tasks on their local shards) in two number systems:
// float, and exact integers modulo p (ModP) for fingerprints.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/tensor.h"

namespace pcgx {

// Values of every node output: values[node][output].
template <class T>
using GraphValues = std::vector<std::vector<ShardedTensor<T>>>;

// Supplies the logical value of a source node (Input or Weight); the
// interpreter distributes it as the node's parallel shape prescribes.
template <class T>
using SourceFn = std::function<Tensor<T>(const Node&)>;

template <class T>
GraphValues<T> evaluate(const Graph& g, const SourceFn<T>& sources);

// As evaluate, but sources supply every shard themselves: replica slots may
// hold unrelated values (partial sums), as rule fingerprints need.
template <class T>
using ShardedSourceFn = std::function<ShardedTensor<T>(const Node&)>;
template <class T>
GraphValues<T> evaluate_sharded(const Graph& g, const ShardedSourceFn<T>& sources);
// Independent random values for every shard of every source, keyed by name.
template <class T>
ShardedSourceFn<T> random_sharded_sources(uint64_t seed);

// Deterministic pseudo-random sources: every source node gets a tensor drawn
// from (seed, node name), or (seed, node id) for an unnamed node, so two
// graphs that name their inputs alike see the same values. Index tensors (Input with index_range > 0) get
// integers in [0, index_range).
template <class T>
SourceFn<T> random_sources(uint64_t seed);
template <class T>
Tensor<T> random_tensor(const TensorType& type, uint64_t seed, int64_t index_range = 0);

// Evaluates one operator instance on sharded inputs; `outputs` shapes come
// from shape inference.
template <class T>
std::vector<ShardedTensor<T>> evaluate_op(const OpDef& op, const Attributes& attrs,
                                          std::span<const ShardedTensor<T>* const> inputs,
                                          std::span<const ParallelTensorShape> output_shapes);

// Logical value of every output of `g` (slot 0 of each).
template <class T>
std::vector<Tensor<T>> evaluate_outputs(const Graph& g, const SourceFn<T>& sources);

}  // namespace pcgx
