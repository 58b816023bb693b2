#pragma once
// What lays out a source rather than computing (docs/design.md, "Search").
//
//   - A parallel operator fed only by Inputs (or by their layouts) lays out
//     a batch: a data loader reads its own shard, so it costs nothing.
//   - Whatever is computed from weights alone by parallel operators and
//     data movement or scaling (Concat, Split, Reshape, Transpose, ScalarMul) is the weights'
//     layout: a framework stores the weight in that layout. It costs
//     nothing forward; per iteration it costs the synchronization of its
//     gradient, which is the same however the layout was written
//     (Split(Replicate(Concat(Wk, Wq))) synchronizes what
//     Replicate(Wk) and Replicate(Wq) do).
//
// A layout made only of value-preserving parallel operators (Replicate,
// Repartition, Combine, Pipeline, Batch) from one source holds that
// source's values, copied or cut ("sliced"): the runtime fills it straight
// from the source instead of moving shards every step. For an Input that
// is the data loader reading its own shard ("loaded"). For a Weight whose
// layouts form one chain W -> ... -> L it is DDP's parameter: the runtime
// keeps L itself, every shard on its device, updates every copy and
// all-reduces the copies' gradients ("stored"). Other weight layouts
// (Concat, ScalarMul, a weight laid out twice) are computed every step.
//
// Layout nodes run with their readers. An Input named "piece:..." is not a
// source: it stands for the output of the previous piece of a split graph
// (unity_search.h), and moving it costs what moving any activation costs.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/training_recipe.h"

namespace pcgx {

inline constexpr const char* kPieceInputPrefix = "piece:";

enum class Layout : uint8_t { kNone, kInput, kWeight };

struct SourceLayouts {
  std::vector<Layout> of;  // per node; sources: kInput or kWeight (piece inputs: kNone)
  // A layout node (not a source itself).
  bool is_layout(const Graph& g, NodeId n) const {
    return of[static_cast<size_t>(n)] != Layout::kNone && g.node(n).op->op_class != OpClass::kSource;
  }
  // A Weight or a weight layout.
  bool weight(TensorRef t) const { return of[static_cast<size_t>(t.node)] == Layout::kWeight; }
  std::vector<char> loaded;   // per node: a sliced layout of an Input (above)
  std::vector<char> stored;   // per node: a sliced layout of a Weight kept as its parameter (above)
  // Filled from its source, not run: loaded or stored.
  bool sliced(NodeId n) const { return loaded[static_cast<size_t>(n)] || stored[static_cast<size_t>(n)]; }
  // The source a sliced node lays out.
  std::vector<NodeId> root;   // per node; -1 when not sliced
};

SourceLayouts source_layouts(const Graph& g);

// The Weight a layout holds the values of, and how: `t` reached from one
// Weight through operators that keep its values (value-preserving
// parallel operators, dimension permutations) and nothing else. Two
// layouts alike in `weight`, `degrees` and `replica` hold the same blocks
// of the Weight, each block in as many copies: one parameter read twice,
// as a tied LM head reads the word embedding table transposed. A
// framework keeps such a parameter once per device, sums the gradients of
// its uses there and synchronizes it once (PyTorch's DDP and FSDP,
// Megatron-LM without pipeline stages), and so do the memory and cost
// models where the two layouts' copies share devices (search/).
struct WeightCopy {
  NodeId weight = -1;
  std::vector<int64_t> degrees;     // per dimension of the Weight
  int64_t replica = 1;
  std::vector<int64_t> weight_dim;  // per dimension of the layout: the Weight's it is
  bool same_parameter(const WeightCopy& o) const { return weight == o.weight && degrees == o.degrees && replica == o.replica; }
  // The block of the Weight (ParallelTensorShape's canonical block order
  // over `degrees`) that shard `shard` of layout `s` holds.
  int64_t weight_block(const ParallelTensorShape& s, int64_t shard) const;
};
// nullopt where `t` is not such a copy (a Weight's own output is one of
// itself; a Concat, a ScalarMul or a Reshape on the way is not).
std::optional<WeightCopy> weight_copy(const Graph& g, TensorRef t);
// The weight layouts compute operators read that hold a parameter an
// earlier one holds (same_parameter; earlier: its first compute reader
// comes first in node order), each mapped to that first layout. Empty
// where every Weight is read through one layout.
std::map<TensorRef, TensorRef> parameter_copies(const Graph& g, const SourceLayouts& layouts);

// The ZeRO stage weight layout `t` trains at (training_recipe.h's
// ZeroWeights): its Weight's, or, computed from several Weights, the
// lowest of theirs (it is synchronized as one tensor: what all of them
// shard at least).
ZeroStage zero_of(const Graph& g, const TrainingRecipe& r, TensorRef t);
// Per node, the stage each Weight trains at, as the runtime shards its
// stored layout: its own, lowered to that of any weight layout computed
// from it that an operator reads (zero_of), so that a Weight feeding a
// Concat with a weight at a lower stage is sharded as the Concat is
// synchronized. Other nodes: the plan's stage.
std::vector<ZeroStage> weight_zero_stages(const Graph& g, const SourceLayouts& layouts, const TrainingRecipe& r);

}  // namespace pcgx
