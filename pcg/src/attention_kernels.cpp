// FlashAttention's kernels in a graph (see attention_kernels.h).
#include "pcgx/pcg/attention_kernels.h"

#include "pcgx/pcg/tensor.h"

#include <algorithm>
#include <optional>

namespace pcgx {
namespace {

// A compute operator (not a shard-level one) with one output that reads no
// weight: its activation inputs, or nothing when it is not one.
std::vector<TensorRef> activations(const SourceLayouts& layouts, const Node& n) {
  if (n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs) || n.outputs.size() != 1) return {};
  std::vector<TensorRef> acts;
  for (const TensorRef& t : n.inputs) {
    if (layouts.weight(t)) return {};
    acts.push_back(t);
  }
  return acts;
}

bool has_flops(const Graph& g, const Node& n) {
  if (!n.op->flops) return false;
  std::vector<TensorType> in, out;
  for (const TensorRef& t : n.inputs) in.push_back({g.shape(t).logical_shape(), g.shape(t).dtype});
  for (const ParallelTensorShape& s : n.outputs) out.push_back({s.logical_shape(), s.dtype});
  return n.op->flops(n.attrs, in, out) > 0;
}

// Data movement that keeps every element where a strided read finds it:
// one input viewed in another shape (a Reshape), no permutation, no scaling.
bool is_view(const Graph& g, const Node& n) {
  if (!n.op->weight_layout || n.op->permutes || n.op->elementwise || n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs)) return false;
  return n.inputs.size() == 1 && n.outputs.size() == 1 && n.outputs[0].shard_elements() == g.shape(n.inputs[0]).shard_elements();
}

// Data movement of two or more inputs into one output (a Concat on a data
// dimension): copies of one tensor where every input is that tensor.
bool is_copies(const Node& n) {
  return n.op->weight_layout && n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs) && n.inputs.size() >= 2 && n.outputs.size() == 1;
}

}  // namespace

AttentionKernels find_attention_kernels(const Graph& g, const SourceLayouts& layouts) {
  AttentionKernels out;
  out.kernel.assign(g.size(), -1);
  std::vector<std::vector<NodeId>> readers(g.size());
  for (const Node& n : g.nodes())
    for (const TensorRef& t : n.inputs) readers[static_cast<size_t>(t.node)].push_back(n.id);
  for (std::vector<NodeId>& r : readers) r.erase(std::unique(r.begin(), r.end()), r.end());
  auto is_output = [&](NodeId id) { return std::any_of(g.outputs().begin(), g.outputs().end(), [&](const TensorRef& t) { return t.node == id; }); };
  for (const Node& n : g.nodes()) {
    const std::vector<TensorRef> acts = activations(layouts, n);
    if (acts.size() < 2 || out.kernel[static_cast<size_t>(n.id)] >= 0 || !has_flops(g, n)) continue;
    const int64_t grown = n.outputs[0].shard_elements();
    if (std::any_of(acts.begin(), acts.end(), [&](const TensorRef& t) { return g.shape(t).shard_elements() >= grown; })) continue;
    // Follow the one reader of each inner tensor: same-sized operators of
    // one activation, then the product that shrinks it back.
    std::vector<NodeId> chain{n.id};
    bool closed = false;
    while (!closed) {
      const std::vector<NodeId>& next = readers[static_cast<size_t>(chain.back())];
      if (next.size() != 1 || is_output(chain.back())) break;
      const Node& r = g.node(next.front());
      const std::vector<TensorRef> in = activations(layouts, r);
      if (in.empty() || std::count_if(r.inputs.begin(), r.inputs.end(), [&](const TensorRef& t) { return t.node == chain.back(); }) != 1) break;
      if (in.size() == 1 && r.outputs[0].shard_elements() == grown) {
        chain.push_back(r.id);
      } else if (in.size() >= 2 && r.outputs[0].shard_elements() < grown && has_flops(g, r)) {
        chain.push_back(r.id);
        closed = true;
      } else {
        break;
      }
    }
    if (!closed) continue;
    const auto k = static_cast<int32_t>(out.members.size());
    for (const NodeId m : chain) out.kernel[static_cast<size_t>(m)] = k;
    // The permutations into the kernel, read only by it, and the one out
    // of it, its output's only reader: strides, not passes, where each
    // leaves the head dimension innermost in memory (the kernel's loads
    // and stores run along it). Of the products A[.., m, k] B[.., k, n]:
    // the scores' A (q) and B (k^T) hold it at k, the weighted sum's B
    // (v) at n, its output at n.
    // A permutation whose input's innermost dimension lands at `at` of its output.
    auto permutation_to = [&](NodeId id, int64_t at) {
      const Node& p = g.node(id);
      if (!p.op->permutes || p.op->op_class != OpClass::kCompute || p.op->is_shard_level(p.attrs) || p.inputs.size() != 1) return false;
      const std::vector<int64_t> perm = p.op->permutes(p.attrs);  // output dimension d is input dimension perm[d]
      const auto last = static_cast<int64_t>(perm.size()) - 1;
      return at >= 0 && at <= last && perm[static_cast<size_t>(at)] == last;
    };
    auto mark = [&](NodeId id) {
      out.strided.resize(g.size(), 0);
      out.strided[static_cast<size_t>(id)] = 1;
    };
    const Node& scores = g.node(chain.front());
    const Node& weighted = g.node(chain.back());
    const auto rank = static_cast<int64_t>(scores.outputs[0].rank());
    auto head_at = [&](const Node& m, size_t input) -> int64_t {
      if (m.id == scores.id) return input == 0 ? rank - 1 : rank - 2;
      if (m.id == weighted.id && input == 1) return rank - 1;
      return -1;
    };
    auto alone = [&](NodeId id) { return out.kernel[static_cast<size_t>(id)] < 0 && readers[static_cast<size_t>(id)].size() == 1 && !is_output(id); };
    // A group's head copies behind a permutation the kernel reads by
    // strides: one view, then copies of one tensor (every leaf of the
    // concatenations the same tensor, each inner one read by the next
    // alone), concatenated along its last dimension and viewed as more
    // heads, [.., kv, g d] as [.., kv g, d]: query head i then reads head
    // i / g, as FlashAttention-2's num_heads_k has it.
    auto mark_grouped = [&](NodeId permutation) {
      const NodeId view = g.node(permutation).inputs[0].node;
      if (!is_view(g, g.node(view)) || !alone(view)) return;
      const NodeId at = g.node(view).inputs[0].node;
      if (!is_copies(g.node(at)) || !alone(at)) return;
      const std::vector<int64_t> stacked = g.node(at).outputs[0].logical_shape(), heads = g.node(view).outputs[0].logical_shape();
      const auto last = static_cast<int64_t>(stacked.size()) - 1;
      auto along_last = [&](const Node& c) { return c.attrs.has("axis") && c.attrs.get_int("axis") == last; };
      std::vector<NodeId> copies{at};
      std::optional<TensorRef> source;
      for (size_t c = 0; c < copies.size(); ++c) {
        if (!along_last(g.node(copies[c]))) return;
        for (const TensorRef& t : g.node(copies[c]).inputs) {
          if (is_copies(g.node(t.node)) && alone(t.node)) {
            if (std::find(copies.begin(), copies.end(), t.node) == copies.end()) copies.push_back(t.node);
          } else if (source && *source != t) {
            return;  // (a concatenation of different tensors)
          } else {
            source = t;
          }
        }
      }
      const std::vector<int64_t> head = g.shape(*source).logical_shape();
      if (last < 1 || head.size() != stacked.size() || heads.size() != stacked.size() || stacked[static_cast<size_t>(last)] % head.back() != 0) return;
      const int64_t count = stacked[static_cast<size_t>(last)] / head.back();
      for (int64_t d = 0; d < last - 1; ++d)
        if (heads[static_cast<size_t>(d)] != stacked[static_cast<size_t>(d)]) return;
      if (heads[static_cast<size_t>(last - 1)] != stacked[static_cast<size_t>(last - 1)] * count || heads.back() != head.back()) return;
      out.grouped.resize(g.size(), 0), out.grouped_sum.resize(g.size(), 0);
      for (const NodeId c : copies) mark(c), out.grouped[static_cast<size_t>(c)] = count;
      for (const NodeId c : {permutation, view}) out.grouped[static_cast<size_t>(c)] = count;
      out.grouped_sum[static_cast<size_t>(at)] = count;
    };
    for (const Node* m : {&scores, &weighted})
      for (size_t i = 0; i < m->inputs.size(); ++i) {
        const NodeId from = m->inputs[i].node;
        if (alone(from) && permutation_to(from, head_at(*m, i))) mark(from), mark_grouped(from);
      }
    // The output transposed: its innermost dimension must stay innermost.
    if (const std::vector<NodeId>& by = readers[static_cast<size_t>(weighted.id)]; by.size() == 1) {
      const Node& t = g.node(by.front());
      if (t.outputs.size() == 1 && permutation_to(t.id, static_cast<int64_t>(t.outputs[0].rank()) - 1)) mark(t.id);
    }
    out.members.push_back(std::move(chain));
  }
  return out;
}

AttentionKernels fused_softmax_kernels(const Graph& g, const SourceLayouts& layouts) {
  const AttentionKernels chains = find_attention_kernels(g, layouts);
  AttentionKernels out;
  out.kernel.assign(g.size(), -1);
  for (const std::vector<NodeId>& chain : chains.members)
    // (Inner members only: the scores' and the weighted sum's products
    // stay kernels of their own.)
    for (size_t i = 1; i + 2 < chain.size(); ++i) {
      const Node& scale = g.node(chain[i]);
      const Node& softmax = g.node(chain[i + 1]);
      if (!scale.op->elementwise || softmax.op->elementwise) continue;
      const auto k = static_cast<int32_t>(out.members.size());
      out.kernel[static_cast<size_t>(scale.id)] = out.kernel[static_cast<size_t>(softmax.id)] = k;
      out.members.push_back({scale.id, softmax.id});
    }
  return out;
}

double attention_kernel_fraction(const Graph& g, const std::vector<NodeId>& members) {
  for (const NodeId m : members) {
    const Node& n = g.node(m);
    if (!n.attrs.has("causal") || !n.attrs.get_bool("causal")) continue;
    const ParallelTensorShape& s = n.outputs[0];
    if (s.rank() < 2) continue;
    const auto rows = static_cast<double>(s.dims[s.rank() - 1].size);
    return (rows + 1) / (2 * rows);
  }
  return 1.0;
}

}  // namespace pcgx
