#pragma once
// Hand-written strategies the search is compared with (and starts from):
// each is a PCG built from an unpartitioned model by choosing, per compute
// operator, degrees for some of its parallel kinds (the registry's
// ParallelKind names) and inserting the parallel operators that move data
// between consecutive choices.
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine.h"
#include "pcgx/search/machine_mapping.h"

namespace pcgx::search {

// Degrees per parallel kind name ("batch0" -> 8, "out" -> 4); empty: run
// the operator as one task.
using NodePlan = std::map<std::string, int64_t>;
// The one entry of a NodePlan that is no kind of the registry: the
// operator runs k copies of itself (every input replicated k more times,
// its outputs k copies, in replica slots outermost of its task grid), as
// SuperScaler's replicate transformation does; a reader that wants fewer
// copies takes the first (a Split along the replica axis).
inline constexpr const char* kReplicasKind = "replicas";

// `g` (unpartitioned) with every compute node run as plan(node). Before a
// node, its inputs are converted to the layout it needs: partial sums are
// reduced, surplus degrees combined, missing degrees repartitioned, replicas
// made; conversions are shared between readers. Repartition and Combine
// nodes already in `g` only change layout, so they are dropped: their
// readers convert from whatever layout the input has. An input needed as k
// summands (the bias of a reduction-parallel Linear) becomes k replica
// slots of x/k. A node whose plan is not legal for it runs unpartitioned
// (and is listed in `refused`, when given, with the reason). Graph outputs
// keep their original layout. A tensor `g` itself holds in replica slots
// (a Concat along the replica axis: operands side by side, not copies)
// keeps them, read one task per slot. `image`, when given, receives per node of
// `g` the node it became (-1: a dropped Repartition or Combine).
struct RefusedPlan {
  NodeId node;
  std::string reason;
};
Graph parallelize(const Graph& g, const std::function<NodePlan(const Graph&, const Node&)>& plan,
                  std::vector<RefusedPlan>* refused = nullptr, std::vector<NodeId>* image = nullptr);

// The kind splitting an operator's samples: input 0's first dimension,
// into output 0's first dimension or (losses, batch statistics) partial
// sums; null when it has none.
const ParallelKind* sample_kind(const std::vector<ParallelKind>& kinds);

// An operator spread over `devices` (as far as its sizes allow): its
// samples split by the largest degree that divides them, the devices left
// along its other output dimensions in turn (where a micro-batch holds
// fewer samples than there are devices). Empty where nothing splits.
NodePlan spread_plan(const Graph& g, const Node& n, int64_t devices);

// The largest divisor of `devices` that divides `n`.
int64_t largest_dividing_degree(int64_t devices, int64_t n);

// BatchNorm over the whole batch as its statistics applied:
// BatchNormApply(x, s, BatchSquares(x, s)) with s = BatchSum(x), the same
// values (axiom batch_norm_is_statistics_applied). Split by samples, each
// statistic is a partial sum all-reduced across the shards (synchronized
// BatchNorm: two all-reduces of C numbers, as two passes need). With
// `only`, just the BatchNorms of those names (and every unnamed one): the
// others stay whole (one operator, one kernel, where nothing splits their
// samples).
Graph synchronized_batch_norm(const Graph& g, const std::set<std::string>* only = nullptr);

// SoftmaxCrossEntropy as its `blocks` blocks' log-sum-exp applied:
// CrossEntropyApply(x, l, ClassLogSumExp(x, blocks)), the same values
// (axiom cross_entropy_is_blocks_applied); throws pcgx::Error naming the
// loss where `blocks` does not divide its classes. The parts are named
// NAME.lse and NAME. Split by classes over
// `blocks` devices, the logits stay split and only the blocks' values are
// all-gathered (Megatron-LM's vocabulary-parallel cross-entropy).
Graph vocabulary_parallel_loss(const Graph& g, int64_t blocks);
// The parallel kind by which both parts split the classes.
inline constexpr const char* kClassesKind = "classes";

// Data parallelism: every operator split along its first (sample)
// dimension by the largest degree <= devices that divides it; weights
// replicated (their gradients all-reduced); BatchNorm synchronized
// (synchronized_batch_norm). An operator that still cannot split its
// samples runs whole, or with `split_unsampled` along the dimension that
// takes the largest degree: slower where the whole batch fits one device,
// the only way when it does not. has_unsampled() says whether the choice
// exists.
Graph data_parallel(const Graph& g, int64_t devices, bool split_unsampled = false);
bool has_unsampled(const Graph& g);

// Expert strategies, or nothing when the model is of no family they cover:
//   - recommendation models (embedding bags): every table spread over t
//     devices (`tensor_degree`, by default all of them) by its embedding
//     columns, or where they do not divide by its rows (partial sums,
//     reduce-scattered), the MLPs data parallel (TorchRec's column- and
//     row-wise sharding);
//   - transformers (LayerNorm + BatchMatMul): Megatron-style tensor
//     parallelism of degree t (`tensor_degree`, by default the devices of
//     one node) and data parallelism of degree devices / t everywhere. The
//     feed-forward block's first Linear and the query/key/value projections
//     are split by output columns; the split follows through the attention
//     (heads: reshape, transpose, batched matmuls, softmax) and the
//     activation to the Linear that reads it on its reduction dimension,
//     which produces partial sums, then a Reduce. The operators between
//     a row-parallel Linear and the next column-parallel one (dropout,
//     residual sums, LayerNorm, the embeddings' sum) run where `between`
//     says (BetweenHalves, below; Megatron-LM's copies by default). The word
//     embedding, the LM head and the cross-entropy are split by
//     vocabulary (VocabParallelEmbedding, vocabulary_parallel_loss). With
//     `sequence_parallel` (Korthikanti et al. 2022), the operators between
//     a row-parallel Linear and the next column-parallel one (dropout,
//     residual sums, LayerNorm, the embeddings' sum) split the sequence
//     over the same t devices instead of repeating the whole of it on each:
//     the Reduce becomes a reduce-scatter, the copy to the column-parallel
//     Linear an all-gather, and those activations are kept 1/t per device;
//   - plain MLPs (only Linears, activations and a loss): the same degrees,
//     every Linear split by output columns (Megatron's MLP block); the
//     split is gathered before the next Linear unless that one has no
//     fused activation, which then runs row-parallel with a Reduce.
// With `chunk_of_transformer` (a pipeline chunk of a model cut into
// stages, as --search megatron and expert take every graph), a chunk
// holding only a transformer's
// embeddings, or only its final norm, head and loss, is a transformer's
// too: its word embedding, head and loss split by vocabulary.
//
// Without sequence parallelism, where the operators between a transformer's
// tensor-parallel halves run:
enum class BetweenHalves : uint8_t {
  // On every one of the t devices, each on its copy (replica degree t), as
  // Megatron-LM runs them: the Reduce and the copies after it are one
  // all-reduce, and each column-parallel Linear reads its device's copy.
  kCopies,
  // On the group's first device, summed there (a Reduce) and copied to the
  // others after (a Replicate): slower, but the layout from which the
  // shipped rules split the sequence one cheaper step at a time
  // (docs/search.md "Sequence parallelism from rules").
  kOneDevice,
};
std::optional<Graph> expert(const Graph& g, const Machine& machine, int64_t devices, int64_t tensor_degree = 0,
                            bool sequence_parallel = false, bool chunk_of_transformer = false,
                            BetweenHalves between = BetweenHalves::kCopies);
// The tensor-parallel degrees worth trying: powers of two up to the
// devices of a node (for recommendation models, up to all devices)
// dividing the device count, and that count.
std::vector<int64_t> expert_tensor_degrees(const Machine& machine, int64_t devices, const std::string& family = "");
// The family expert() recognized ("recommendation", "transformer", "mlp") or "".
std::string expert_family(const Graph& g);

// The data-parallel baseline, with operators that cannot split their
// samples run whole or split otherwise, whichever `mapper` predicts faster
// (`--search data-parallel`).
Graph best_data_parallel(const Graph& g, const MachineMapper& mapper);

// The expert strategy with its fastest tensor-parallel degree under
// `mapper`; nothing for a model of no family it covers (`--search expert`).
// With `chunk_of_transformer`, as expert()'s.
std::optional<Graph> tuned_expert(const Graph& g, const MachineMapper& mapper, bool sequence_parallel = false,
                                  bool chunk_of_transformer = false);
// Its degree with it: the fastest that fits; where none fits, the one
// needing the least memory (the closest miss: what a pipeline's
// micro-batches or the error message start from).
std::optional<std::pair<int64_t, Graph>> tuned_expert_choice(const Graph& g, const MachineMapper& mapper, bool sequence_parallel = false,
                                                             bool chunk_of_transformer = false);
// The tensor-parallel degree tuned_expert chooses (without sequence
// parallelism); 0 for a model of no family it covers.
int64_t tuned_expert_degree(const Graph& g, const MachineMapper& mapper);

}  // namespace pcgx::search
