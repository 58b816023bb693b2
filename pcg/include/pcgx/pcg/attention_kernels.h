#pragma once
// Where a graph's attention runs as one FlashAttention kernel
// (training_recipe.h's AttentionKernel::kFlash): from the product of two
// activations that grows them (q k^T: [b, a, s, s] from [b, a, s, d]),
// through the same-sized operators reading it alone (scale, softmax,
// dropout), to the product that reads their result with another
// activation (the attention-weighted sum). One finding, read alike by the
// cost model (which prices the kernel at its first operator and nothing
// at the others), the memory model and the runtime (which keep none of
// the kernel's inner tensors: recompute_plan.h re-runs them in backward).
//
// FlashAttention reads q, k and v, and writes its output, at whatever
// strides keep a head's vector contiguous: a dimension permutation
// (an operator the registry says `permutes`, a Transpose) whose output
// only the kernel reads, or whose input is the kernel's output and read
// by it alone, is that strided access and never a pass of its own (the
// zoo's transposes of q, k and v into [b, a, s, d] and of the output
// back). Eager kernels, and Megatron-LM's fused softmax, copy them.
//
// Under grouped-query attention the kernel reads each key/value head for
// the query heads of its group (FlashAttention-2's num_heads_k: query head
// i reads head i / g): the copies of a head made for its group (copies of
// one tensor concatenated along its last dimension, doubling, as the zoo's
// `_repeat` concats make them, then viewed as g times the heads,
// [.., kv, g d] as [.., kv g, d]) are no forward pass either, where they
// reach the kernel alone through that view and a strided permutation. Their backward is one
// pass, FlashAttention-2's: the gradients of the g copies (written by the
// kernel per query head) summed into the grouped head's.
//
// A chain is a kernel only when each inner tensor has one reader, the next
// operator of the chain, and every operator reads no weight: the tensors
// the kernel never writes must not be read elsewhere. The graph may be a
// model or a parallelized strategy (its operators' shards: a parallel
// operator between two of them ends the chain).
#include <cstdint>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/source_layout.h"

namespace pcgx {

struct AttentionKernels {
  // Per node: the kernel it runs in, -1 for none.
  std::vector<int32_t> kernel;
  // Per kernel: its operators in forward order (the scores' product
  // first, the weighted sum last).
  std::vector<std::vector<NodeId>> members;
  // Per node (empty: none): a permutation the kernel reads or writes
  // through by strides (above), priced as no pass.
  std::vector<char> strided;
  bool strided_view(NodeId n) const { return !strided.empty() && strided[static_cast<size_t>(n)]; }
  // Per node (empty: none): for a group's head copies (above), the views
  // of them and the strided permutation the kernel reads, how many copies
  // of the head its output holds (0 elsewhere). The kernel reads the head
  // in place, so none of them is written: the memory model keeps the
  // permutation's output at 1/copies (the head) and the others not at all.
  std::vector<int64_t> grouped;
  int64_t grouped_copies(NodeId n) const { return grouped.empty() ? 0 : grouped[static_cast<size_t>(n)]; }
  // Per node (empty: none): at the last of the copies, the one its view
  // reads, how many (0 elsewhere): it stands for the chain, forward no
  // pass (it is strided too), backward the copies' gradients summed into
  // the grouped head's, one pass over the copies' bytes and the head's.
  std::vector<int64_t> grouped_sum;
  int64_t grouped_sum_copies(NodeId n) const { return grouped_sum.empty() ? 0 : grouped_sum[static_cast<size_t>(n)]; }
  bool in_kernel(NodeId n) const { return kernel[static_cast<size_t>(n)] >= 0; }
  // Whether n is a kernel's first operator (the one that stands for it).
  bool first(NodeId n) const {
    const int32_t k = kernel[static_cast<size_t>(n)];
    return k >= 0 && members[static_cast<size_t>(k)].front() == n;
  }
};

AttentionKernels find_attention_kernels(const Graph& g, const SourceLayouts& layouts);

// Megatron-LM's masked-softmax fusion (training_recipe.h's
// AttentionKernel::kFused): in each attention chain above, an elementwise
// inner member (the scale) and the inner member after it that is not
// elementwise (the softmax, normalizing along a dimension) as one kernel
// of those two, the scale first.
AttentionKernels fused_softmax_kernels(const Graph& g, const SourceLayouts& layouts);

// The fraction of the scores a kernel computes: (s + 1) / (2 s) of an
// s x s causal block (the blocks above the diagonal skipped), 1 without a
// causal mask. `members` as AttentionKernels lists them.
double attention_kernel_fraction(const Graph& g, const std::vector<NodeId>& members);

}  // namespace pcgx
