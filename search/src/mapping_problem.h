#pragma once
// The machine-mapping problem of one graph (internal to search/): what the
// DP (machine_mapping_dp.cpp) solves and the view refinement
// (view_refinement.cpp) improves. See machine_mapping.h.
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include <tbb/concurrent_unordered_map.h>
#include <vector>

#include "pcgx/pcg/attention_kernels.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/stable_hash.h"
#include "pcgx/search/gradient_sync.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/step_communication.h"
#include "sp_decomposition.h"

namespace pcgx::search {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

struct Result {
  double time = kInf;
  double compute = 0;   // the optimizer update included
  double comm = 0;
  double sync = 0;      // gradient synchronization (and ZeRO's weight all-gathers), as bucket shares
  double update = 0;
  double backward = 0;  // of compute + comm: the backward pass
};

inline Result zero() { return {0, 0, 0, 0, 0, 0}; }

inline Result series(Result a, const Result& b) {
  a.time += b.time, a.compute += b.compute, a.comm += b.comm, a.sync += b.sync, a.update += b.update, a.backward += b.backward;
  return a;
}

struct Key {
  uint64_t hash;
  int64_t lo, size;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return static_cast<size_t>(hash_mix(hash_mix(k.hash, static_cast<uint64_t>(k.lo)), static_cast<uint64_t>(k.size)));
  }
};


// The devices a node needs at least: a compute operator's tasks; a
// parallel operator's shards of the tensors it reads and writes, but for
// the pieces of one exchange (the Repartitions after a Reduce, the last
// read only by Combines: layout_search.h's split-first sequence), whose
// shards live with their readers (placement.h), several to a device. Nothing wider
// is accepted: a lone Repartition or Combine is priced group by group,
// which would undercount such a tensor's moves.
int64_t task_count(const Graph& g, const Node& n, const std::vector<std::vector<std::pair<NodeId, int>>>& consumers);

// Shared by the search's threads: looked up and filled without a lock (two
// threads solving one key compute the same result; the first stays). A
// reader-writer lock here spent a tenth of Inception-v3's search at 192
// devices waking threads.
using Cache = tbb::concurrent_unordered_map<Key, Result, KeyHash>;
// One parallel node's DP over its children (Problem::group): per range of
// its sorted children and resource, the best result and the choice (split
// before child j with s devices for the first part, or (0, 0): one after
// another); and while it runs, per (from, to), each child's boundary
// move.
struct Memo {
  std::map<std::tuple<size_t, size_t, int64_t, int64_t>, std::pair<Result, std::pair<size_t, int64_t>>> best;
  std::map<std::pair<int64_t, int64_t>, std::vector<double>> moves;
  // The sorted children it was solved for (Problem::children_signature):
  // another graph's node of the same hash may order children of equal
  // hashes but different boundaries otherwise, and then solves anew.
  std::vector<uint64_t> children;
};
// The choices of each parallel node solved, shared like Cache: placing a
// graph (Problem::assign) reads them where solving it found the node's
// result in Cache, instead of running the node's DP again.
using ChoiceCache = tbb::concurrent_unordered_map<Key, std::shared_ptr<const Memo>, KeyHash>;
using Resources = std::vector<std::pair<int64_t, int64_t>>;  // per node: (lo, size) of its resource

// Everything about one graph the DP needs.
struct Problem {
  const Graph& g;
  const CostModel& cost;
  Cache& cache;
  ChoiceCache* choices;  // null: none kept

  SourceLayouts layouts;
  Placement place;                           // compute operators at start 0, stride 1
  std::vector<char> active;
  std::vector<std::vector<NodeId>> feeders;  // per active node: layout nodes it pays for
  std::vector<std::vector<std::pair<NodeId, int>>> consumers;  // ascending reader id
  std::vector<NodeId> fused_tail;            // per node: the parallel node it forms one collective with, or -1
  // Per node: the first operator of the layout change it completes or sits
  // inside (relayout.h), or -1. Such nodes are tails (is_tail).
  std::vector<NodeId> fused_head;
  // Per node: products_beside's products and the operators walked through.
  std::vector<std::vector<NodeId>> beside, beside_through;
  std::vector<NodeId> walk_beside(NodeId id, std::vector<NodeId>& through) const;
  std::vector<char> is_tail;
  std::vector<std::vector<size_t>> syncs;    // per active node: the weight-layout inputs it synchronizes
  // Weight layouts holding a parameter an earlier layout holds
  // (source_layout.h's parameter_copies: a tied head's transposed
  // table). Where the original holds the same blocks on the same devices
  // (held_by_original) a copy is updated as it, not again, and
  // synchronized as it unless ZeRO 3 gathers its blocks for use (then
  // gathered and reduce-scattered per layout).
  std::map<TensorRef, ParameterCopy> copies;
  // Whether `t` is such a copy under `p` (`gathers_too`: even where ZeRO 3
  // gathers its blocks for use).
  bool held_as_copy(const Placement& p, TensorRef t, bool gathers_too) const;
  RecomputePlan recompute;                   // the cost model's recipe on g
  FusedKernels kernels;                      // attention kernels under flash or fused attention, fused dropout-adds (training_recipe.h)
  std::vector<uint64_t> local;               // local hashes
  SPTree tree;
  std::vector<uint64_t> tree_hash;

  Problem(const Graph& graph, const CostModel& cm, Cache& ca, ChoiceCache* ch = nullptr);

  // Structure and hashing (mapping_problem.cpp).
  void hash_nodes();
  uint64_t hash_tree(int t) const;
  std::vector<TensorRef> boundary(int t) const;
  uint64_t boundary_hash(int t) const;
  double move(int t, int64_t from, int64_t to) const;

  // Costs of one node under placement `p` shifted by `lo` (mapping_problem.cpp).
  // A compute node's task, its recomputed forward included, and in its
  // backward the cast-and-add of the gradients of the weights it
  // synchronizes, once a micro-batch (GradPrecision::kFp32Cast).
  Seconds task_seconds(NodeId id) const;
  // Of task_seconds: the kernels alone, and the cast-and-add passes.
  Seconds kernel_seconds(NodeId id) const;
  double cast_pass_seconds(NodeId id) const;
  // Whether compute node `id` can compute its input's gradient first and
  // its weight's after (TrainingRecipe::overlap_grad_input, on a machine
  // whose devices overlap communication): a product of an activation and a
  // weight (OpDef::operand_products). Those products_beside names do.
  bool splits_backward(NodeId id) const;
  // Of such a node's backward, the weight's product: half of it, each of
  // its two products the forward's cost (its recomputed forward aside); 0
  // where it does not split.
  double weight_gradient_seconds(NodeId id) const;
  // The readers of parallel node `id`'s output (its fused tail's where it
  // heads one; ascending) whose weight products the collective carrying
  // its gradient back runs beside: every reader, where each is a product
  // that splits its backward and reads it as its activation, all with as
  // many tasks (Megatron-LM's query, key and value, one product there);
  // else none. Their input gradients come first, summed and sent, and
  // their weight products run meanwhile. The readers may be reached
  // through operators on copies of the collective's output (Megatron-LM's
  // dropout, residual sum and LayerNorm on every device of the
  // tensor-parallel group after its all-reduce): their backward comes
  // before the collective's. `through`, where given, receives those.
  // (Found once per problem, at construction: walk_beside.)
  std::vector<NodeId> products_beside(NodeId id, std::vector<NodeId>* through = nullptr) const;
  // Their weight products' seconds, summed.
  double weight_products_beside(NodeId id) const;
  // Whether parallel node `id`'s re-run in backward (recomputation) runs
  // beside the input-gradient products of products_beside: where it is
  // recomputed and none of them is, so that only their weight products
  // read what it re-creates (Megatron-LM's sequence parallelism gathers
  // a Linear's input again in backward, launched before the input-gradient
  // GEMM and waited for before the weight-gradient one; Korthikanti et
  // al. 2022, Section 4.2.2). Where a reader, or an operator on the way to
  // the readers, is recomputed its re-run forward reads it, so the re-run
  // comes first.
  bool rerun_beside_input_products(NodeId id) const;
  // The seconds of those input-gradient products that run after every
  // reader's output gradient is in, when the re-run is launched (as
  // Megatron-LM's fused query-key-value product's backward begins): a
  // reader whose product comes before another reader's output gradient in
  // the backward pass (the graph's order, as the simulator runs it) runs
  // before the re-run. 0 where !rerun_beside_input_products.
  double input_products_beside_rerun(NodeId id) const;
  // What of parallel node `id`'s backward (`s`: its times under `p`, its
  // re-run included) runs beside the products of products_beside, where it
  // crosses devices: its backward collective beside their weight products,
  // and its re-run beside their input-gradient products where
  // rerun_beside_input_products (each product of a pair costs the same, so
  // the input-gradient products' seconds are the weight products'); a
  // re-run otherwise comes first.
  struct Beside {
    double hidden = 0;  // seconds of the node's backward hidden in all
    double left = 0;    // of its backward collective, what outlasts the weight products
  };
  Beside beside_products(const Placement& p, NodeId id, const Seconds& s) const;
  // Of a parallel node's times `s`, its recomputed forward in backward (0
  // where it is not recomputed).
  double rerun_seconds(NodeId id, const Seconds& s) const;
  // A parallel node that heads its collective (not a fused tail): with its
  // tail when they form one layout change, its recomputed forward included.
  Seconds parallel_seconds(const Placement& p, NodeId id, int64_t lo) const;
  // A shard-level compute node (a replica-axis Concat or Split): its
  // copies sent to other devices, all at once (CostModel::parallel_time),
  // its recomputed forward included; the local copies are its task's time.
  // Nothing for a Split that takes some slots and leaves others unread
  // (takes_copy): see the definition.
  Seconds shard_copies_seconds(const Placement& p, NodeId id, int64_t lo) const;
  // Whether node `id` is a replica-axis Split with an output nobody reads:
  // it takes some of its input's copies (the baselines' first copy).
  bool takes_copy(NodeId id) const;
  std::vector<SyncGroup> sync_groups(const Placement& p, NodeId id, int64_t lo) const;
  // Whether node `id` gathers weights it synchronizes before each pass (ZeRO
  // 3: a weight whose blocks reach the persistence threshold).
  bool gathers_for_use(NodeId id) const;
  // What a step sends between devices on placement `p` of this problem's
  // graph, as the runtime counts it (Estimate::bytes): step_communication.h's
  // step_bytes, what ZeRO 3's gathers before use send beyond them
  // (cost_model.h's zero_extra_bytes), and what the recomputation plan's
  // re-runs send again (recompute_step_bytes; `kept_inputs` under a
  // pipeline schedule with micro-batches in flight).
  double step_bytes(const Placement& p, bool kept_inputs) const;
  // The optimizer update of the weights compute node `id` synchronizes
  // (`syncs`: each weight layout updated by its first reader, once), on
  // one of its devices: all of each, or 1/r of it under ZeRO (r: its sync
  // group).
  double update_seconds(const Placement& p, NodeId id, int64_t lo) const;
  // The same where several of the node's tasks share `device` (co-shard):
  // each weight shard the device's tasks read updated once, or under ZeRO
  // each block's share once (1/r, r the devices holding the block).
  double update_seconds_on(const Placement& p, NodeId id, int64_t device) const;
  Result comm(const Placement& p, NodeId id, int64_t lo) const;  // communication only (comm, sync, backward)
  // The link levels node `id`'s messages cross under `p` (bit l: level l):
  // a layout change's moves (with its fused tail's), a compute node's
  // inputs brought from other devices.
  uint32_t comm_levels(const Placement& p, NodeId id) const;
  Result leaf(NodeId id, int64_t lo, int64_t size) const;
  Result solve_leaf(NodeId id, int64_t lo, int64_t size) const;  // cached

  // The DP (machine_mapping_dp.cpp).
  std::vector<int64_t> splits(int64_t size) const;
  Result group(const std::vector<int>& kids, size_t a, size_t b, int64_t lo, int64_t size, Memo& memo) const;
  std::vector<int> sorted_children(int t, int64_t lo, int64_t size) const;
  // Per sorted child its tree hash, with its boundary's where a neighbour has the same tree hash.
  std::vector<uint64_t> children_signature(const std::vector<int>& kids) const;
  Result solve(int t, int64_t lo, int64_t size) const;
  void assign(int t, int64_t lo, int64_t size, std::vector<MachineView>& views, Resources& at) const;
  void assign_group(const std::vector<int>& kids, size_t a, size_t b, int64_t lo, int64_t size, const Memo& memo,
                    std::vector<MachineView>& views, Resources& at) const;
  std::vector<double> busy(const Resources& at, const std::vector<Result>& leaves) const;
};

// A solved problem: the DP's result, its placement, and what the view
// refinement and the bucket replay made of it.
struct Mapped {
  Result dp;
  std::vector<MachineView> views;
  Resources at;
  std::vector<Result> leaves;  // per active node, under the final views
  SyncTimeline sync;
  double overhead = 0;  // running the nodes, beyond kernels and messages (CostModel::step_overhead)
  // The DP's synchronization shares replaced by the replayed buckets: what
  // is exposed, and the weights' all-gathers after the update (ZeRO 1, 2).
  double time() const { return dp.time - dp.sync + sync.exposed + sync.gather + overhead; }
};

// Solves, refines the views, replays the gradient buckets.
Mapped solve_all(const Problem& p, int64_t devices);

// Improves the views of compute operators that run on the whole machine
// (view_refinement.cpp): changes `m.views`, `m.leaves` and `m.dp`.
void refine_views(const Problem& p, Placement& where, Mapped& m);
// A tied parameter's copy (Problem::copies) is priced by its reader
// against the original at the DP's first placement; with the views
// final, each copy reader on the whole machine has its update and
// synchronization priced again at them, as the simulator prices them
// (view_refinement.cpp): changes `m.leaves` and `m.dp`.
void settle_copies(const Problem& p, const Placement& where, Mapped& m);

}  // namespace pcgx::search
