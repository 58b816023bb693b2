#pragma once
// Reverse-mode differentiation of a PCG on the sharded representation: the
// reference for the runtime's backward pass.
//
// The sharded evaluation (interpreter.h) is a composition of per-task
// kernels and shard-level moves, so its gradient is the composition of
// their reverse rules (operator.h: GradKernel, ShardGrad), taken shard by
// shard. A parallel operator's reverse rule is its dual: the gradient of
// Replicate(k) sums its k slots (Reduce), which is where data parallelism's
// gradient all-reduce comes from. Gradients have the parallel shape of the
// value they belong to. Index tensors get zero gradients.
#include <span>
#include <vector>

#include "pcgx/pcg/interpreter.h"

namespace pcgx {

// Gradients of every input of one operator instance, given its inputs, its
// outputs and their gradients. Throws pcgx::Error if the operator has no
// reverse rule.
std::vector<ShardedTensor<float>> backward_op(const OpDef& op, const Attributes& attrs,
                                              std::span<const ShardedTensor<float>* const> inputs,
                                              std::span<const ShardedTensor<float>* const> outputs,
                                              std::span<const ShardedTensor<float>* const> out_grads);

// A zero tensor of parallel shape s (every shard).
ShardedTensor<float> zeros_like(const ParallelTensorShape& s);

// Gradients of every node output, grads[node][output], from `values` (as
// evaluate returns them) and the gradient of each graph output.
GraphValues<float> evaluate_gradients(const Graph& g, const GraphValues<float>& values,
                                      std::span<const ShardedTensor<float>> output_grads);

// The gradient seed of a scalar loss: 1 in replica slot 0, 0 elsewhere (the
// loss is the value slot 0 holds).
ShardedTensor<float> loss_seed(const ParallelTensorShape& s);

}  // namespace pcgx
