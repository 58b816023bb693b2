// Per-node costs (see cost_model.h).
#include "pcgx/search/cost_model.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <set>

#include <tbb/concurrent_unordered_map.h>

#include "pcgx/pcg/attention_kernels.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/relayout.h"
#include "pcgx/pcg/stable_hash.h"
#include "pcgx/pcg/step_communication.h"

namespace pcgx::search {
namespace {

// Each device once, ascending. (Collected first and sorted once: testing
// each device against the group as it grows is quadratic, and a
// data-parallel weight at 3,072 devices has 3,072 holders.)
void sort_unique(std::vector<int64_t>& group) {
  std::sort(group.begin(), group.end());
  group.erase(std::unique(group.begin(), group.end()), group.end());
}

// Groups of devices keyed by a shard index, filled from moves.
class Groups {
 public:
  explicit Groups(size_t keys) : members_(keys) {}
  void add(size_t key, int64_t device) { members_[key].push_back(device), shaped_ = false; }
  // The slowest group running collective `c` on `bytes` (the groups run
  // at once: concurrent_shapes, shaped once for every collective asked).
  double slowest(const Machine& m, Collective c, double bytes) {
    if (!shaped_) {
      for (auto& g : members_) sort_unique(g);
      shapes_ = concurrent_shapes(m, members_), shaped_ = true;
    }
    double worst = 0;
    for (const GroupShape& g : shapes_) worst = std::max(worst, collective_time(m, c, g, bytes));
    return worst;
  }

 private:
  std::vector<std::vector<int64_t>> members_;
  std::vector<GroupShape> shapes_;
  bool shaped_ = false;
};

Collective dual(Collective c) {
  switch (c) {
    case Collective::kAllGather: return Collective::kReduceScatter;
    case Collective::kReduceScatter: return Collective::kAllGather;
    case Collective::kBroadcast: return Collective::kReduce;
    case Collective::kReduce: return Collective::kBroadcast;
    case Collective::kScatter: return Collective::kGather;
    case Collective::kGather: return Collective::kScatter;
    default: return c;
  }
}

}  // namespace

double shard_bytes(const ParallelTensorShape& s) { return static_cast<double>(s.shard_elements() * byte_size(s.dtype)); }

double activation_shard_bytes(const ParallelTensorShape& s, Precision p) {
  return static_cast<double>(s.shard_elements() * element_bytes(s.dtype, p));
}

// A layout change priced as the runtime's pieces is the same whenever its
// shapes, the owners of its shards, its offset and its bytes per element
// are: the search meets the same one in many candidates and the view
// descent in many combinations (at 3,072 devices each is thousands of
// pieces). Keyed by two independent 64-bit hashes of all of it.
struct RelayoutKey {
  uint64_t a = 0, b = 0;
  bool operator==(const RelayoutKey&) const = default;
};
struct RelayoutKeyHash {
  size_t operator()(const RelayoutKey& k) const { return static_cast<size_t>(k.a); }
};
struct RelayoutCache {
  tbb::concurrent_unordered_map<RelayoutKey, Seconds, RelayoutKeyHash> seconds;
  // sync_group's results likewise (its groups sorted and shaped: at 3,072
  // devices a replicated weight's group is every device, and each
  // candidate asks for each weight).
  tbb::concurrent_unordered_map<RelayoutKey, std::optional<SyncGroup>, RelayoutKeyHash> sync_groups;
};

namespace {
class KeyHasher {
 public:
  void add(uint64_t v) { k_.a = hash_mix(k_.a, v), k_.b = hash_mix(k_.b, v ^ 0xA5A5A5A5DEADBEEFULL); }
  void add(const ParallelTensorShape& s) {
    add(s.dims.size()), add(static_cast<uint64_t>(s.replica)), add(static_cast<uint64_t>(s.dtype));
    for (const ParallelDim& d : s.dims) add(static_cast<uint64_t>(d.size)), add(static_cast<uint64_t>(d.degree)), add(static_cast<uint64_t>(d.pipeline));
  }
  void add(std::span<const int64_t> v) {
    add(v.size());
    for (int64_t x : v) add(static_cast<uint64_t>(x));
  }
  RelayoutKey key() const { return k_; }

 private:
  RelayoutKey k_{0x243F6A8885A308D3ULL, 0x13198A2E03707344ULL};
};
}  // namespace

CostModel::CostModel(Machine machine, Efficiency efficiency, Profile profile, CommOptions comm, TrainingRecipe recipe)
    : machine_(std::move(machine)), efficiency_(std::move(efficiency)), profile_(std::move(profile)), comm_(comm), recipe_(recipe),
      relayouts_(std::make_shared<RelayoutCache>()) {
  // (zero_of looks a weight's group up by name in the sorted list.)
  sort_zero_weights(recipe_.zero_weights);
  for (const LinkLevel& l : machine_.links)
    if (l.span > 0) period_ = std::lcm(period_, l.span);
  // Fitted figures replace the machine file's.
  for (const ProfileLink& f : profile_.links)
    for (LinkLevel& l : machine_.links)
      if (l.name == f.name) l.latency = f.latency, l.bandwidth = f.bandwidth, l.step_latency = f.step_latency;
  // A measured rate is this machine's at every precision (pcgx's CPU
  // kernels widen low precision to FP32).
  if (profile_.peak_flops > 0) machine_.device.peak_flops = profile_.peak_flops, machine_.device.peak_flops_by_precision = {};
  peak_ = machine_.device.peak(recipe_.precision);
  // A measured per-node overhead includes what a launch stands for.
  if (profile_.node_overhead > 0) efficiency_.launch = 0;
  if (profile_.memory_bandwidth > 0) machine_.device.memory_bandwidth = profile_.memory_bandwidth;
}

std::pair<int64_t, int64_t> CostModel::profile_coverage(const Graph& g) const {
  int64_t covered = 0, total = 0;
  std::vector<std::vector<int64_t>> shapes;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs)) continue;
    shapes.clear();
    for (const TensorRef& t : n.inputs) shapes.push_back(g.shape(t).slice_shape());
    ++total;
    covered += profile_.find(n.op->name, shapes) != nullptr;
  }
  return {covered, total};
}

double CostModel::step_overhead(const Placement& p) const {
  if (profile_.node_overhead <= 0 && profile_.byte_overhead <= 0) return 0;
  // The calibrated overhead is per node visit: a step visits each node
  // once forward and once backward, a pipelined one (reading or writing
  // micro-batch slices) once per micro-batch each way, and a recomputed
  // one forward once more in its backward, half a visit again.
  const Graph& g = p.graph();
  const RecomputePlan recompute = plan_recompute(g, source_layouts(g), recipe_);
  double visits = 0;
  for (const Node& n : g.nodes()) {
    if (n.op->op_class == OpClass::kSource) continue;
    visits += static_cast<double>(node_slices(g, n)) * (recompute.recomputed[static_cast<size_t>(n.id)] ? 1.5 : 1.0);
  }
  return profile_.node_overhead * visits + profile_.byte_overhead * max_held_bytes(p);
}

int64_t node_slices(const Graph& g, const Node& n) {
  int64_t p = 1;
  for (const ParallelTensorShape& s : n.outputs) p = std::max(p, s.slices());
  for (const TensorRef& t : n.inputs) p = std::max(p, g.shape(t).slices());
  return p;
}

bool computed_weight_layout(const Graph& g, const SourceLayouts& layouts, TensorRef t) {
  return layouts.weight(t) && !g.node(t.node).op->is_weight && !layouts.stored[static_cast<size_t>(t.node)];
}

std::map<TensorRef, ParameterCopy> parameter_copy_map(const Graph& g, const SourceLayouts& layouts) {
  std::map<TensorRef, ParameterCopy> out;
  for (const auto& [copy, of] : parameter_copies(g, layouts)) out.emplace(copy, ParameterCopy{of, *weight_copy(g, copy), *weight_copy(g, of)});
  return out;
}

bool held_by_original(const Placement& p, TensorRef t, const ParameterCopy& c) {
  const Graph& g = p.graph();
  const ParallelTensorShape& original = g.shape(c.of);
  const ParallelTensorShape& copy = g.shape(t);
  // (the Weight's block, device) pairs, sorted: a replicated table has a
  // shard per device, and this is asked for every candidate.
  std::vector<std::pair<int64_t, int64_t>> held;
  held.reserve(static_cast<size_t>(original.num_shards()));
  for (int64_t s = 0; s < original.num_shards(); ++s) held.emplace_back(c.original.weight_block(original, s), p.owner(c.of, s));
  std::sort(held.begin(), held.end());
  for (int64_t s = 0; s < copy.num_shards(); ++s)
    if (!std::binary_search(held.begin(), held.end(), std::pair<int64_t, int64_t>{c.copy.weight_block(copy, s), p.owner(t, s)})) return false;
  return true;
}

int64_t sync_rounds(const Graph& g, const SourceLayouts& layouts, const TrainingRecipe& recipe, const Node& reader, TensorRef t) {
  if (!syncs_every_micro_batch(zero_of(g, recipe, t)) || computed_weight_layout(g, layouts, t)) return 1;
  return node_slices(g, reader);
}

double zero_extra_bytes(const Placement& p, const SourceLayouts& layouts, const TrainingRecipe& recipe) {
  const ZeroStage highest = highest_zero(recipe);
  if (!shards_weights(highest) && !syncs_every_micro_batch(highest) && !zero1_all_reduces(recipe)) return 0.0;
  const Graph& g = p.graph();
  double out = 0;
  // Each weight layout counted at its first compute reader, which
  // synchronizes it; a parameter's copy where its original holds it, at
  // the original's (unless gathered for use: each copy its own).
  std::set<TensorRef> seen;
  for (const auto& [copy, c] : parameter_copy_map(g, layouts))
    if (!gathers_for_use(zero_of(g, recipe, c.of), recipe.zero_persistence_threshold, g.shape(c.of).shard_elements()) && held_by_original(p, copy, c))
      seen.insert(copy);
  for (const Node& n : g.nodes()) {
    if (n.op->op_class != OpClass::kCompute || layouts.is_layout(g, n.id)) continue;
    for (const TensorRef& w : n.inputs) {
      if (!layouts.weight(w) || !seen.insert(w).second) continue;
      const ParallelTensorShape& s = g.shape(w);
      // Reduce-scattered by every micro-batch (rounds), and at stage 3,
      // where gathered for use, gathered twice by each: beside the
      // all-reduce step_bytes counts (two of these), 3 rounds - 2 more
      // (one gather at rounds 1); otherwise rounds - 1 (the gather after
      // the update included); one more where ZeRO 1 all-reduces the
      // gradients and then gathers the weights.
      const auto rounds = static_cast<double>(sync_rounds(g, layouts, recipe, n, w));
      const double again = gathers_for_use(zero_of(g, recipe, w), recipe.zero_persistence_threshold, s.shard_elements()) ? 3 * rounds - 2
                           : zero1_all_reduces(recipe)                                                                  ? rounds
                                                                                                                        : rounds - 1;
      if (again <= 0) continue;
      for (int64_t b = 0; b < s.num_blocks(); ++b) out += again * static_cast<double>(p.block_holders(w, b) - 1) * shard_bytes(s);
    }
  }
  return out;
}

Seconds CostModel::task_time(const Graph& g, const Node& n) const {
  // A pipelined task runs once per micro-slice, on slice shapes.
  std::vector<TensorType> in, out;
  std::vector<std::vector<int64_t>> in_shapes;
  int64_t p = 1;
  for (const TensorRef& t : n.inputs) {
    const ParallelTensorShape& s = g.shape(t);
    in_shapes.push_back(s.slice_shape());
    in.push_back({in_shapes.back(), s.dtype});
    p = std::max(p, s.slices());
  }
  for (const auto& s : n.outputs) out.push_back({s.slice_shape(), s.dtype}), p = std::max(p, s.slices());
  const double k = static_cast<double>(p);
  // (A measured profile times pcgx's runtimes, whose cross-entropy is fused.)
  const bool eager_loss = recipe_.cross_entropy == CrossEntropyKernel::kEager && n.op->cross_entropy != CrossEntropyPart::kNone;
  if (const ProfileEntry* e = eager_loss ? nullptr : profile_.find(n.op->name, in_shapes)) return {k * e->forward, k * e->backward};
  const OpEfficiency& e = efficiency_.of(n.op->name);
  if (e.view) return {};
  const DeviceSpec& d = machine_.device;
  if (eager_loss && n.op->cross_entropy == CrossEntropyPart::kSoftmax) {
    // The eager passes over the logits, each its own streaming kernel
    // (cross_entropy_kernel.h), at the table's "EagerCrossEntropy".
    const CrossEntropyPasses passes = eager_cross_entropy_passes(element_bytes(in[0].dtype, recipe_.precision));
    const auto elements = static_cast<double>(product(in[0].shape));
    const double bandwidth = d.memory_bandwidth * efficiency_.of("EagerCrossEntropy").memory;
    return {k * (elements * passes.forward_bytes / bandwidth + passes.forward_kernels * efficiency_.launch),
            k * (elements * passes.backward_bytes / bandwidth + passes.backward_kernels * efficiency_.launch)};
  }
  const double flops = n.op->flops ? n.op->flops(n.attrs, in, out) : 0.0;
  double bytes = memory_bytes(*n.op, n.attrs, in, out, recipe_.precision);
  // Picking the labels' logits indexes the rows: their other classes stay unread.
  if (eager_loss) bytes -= static_cast<double>(product(in[0].shape) * element_bytes(in[0].dtype, recipe_.precision));
  const double fwd = std::max(flops / (peak_ * e.compute), bytes / (d.memory_bandwidth * e.memory)) + efficiency_.launch;
  return {k * fwd, k * fwd * e.backward};
}

Seconds CostModel::attention_kernel_time(const Graph& g, const std::vector<NodeId>& members) const {
  auto type = [](const ParallelTensorShape& s) { return TensorType{s.slice_shape(), s.dtype}; };
  auto bytes_of = [&](const ParallelTensorShape& s) { return static_cast<double>(product(s.slice_shape()) * element_bytes(s.dtype, recipe_.precision)); };
  double flops = 0, bytes = 0;
  int64_t p = 1;
  std::set<TensorRef> read;
  for (const NodeId m : members) {
    const Node& n = g.node(m);
    std::vector<TensorType> in, out;
    for (const TensorRef& t : n.inputs) {
      in.push_back(type(g.shape(t))), p = std::max(p, g.shape(t).slices());
      if (std::find(members.begin(), members.end(), t.node) == members.end() && read.insert(t).second) bytes += bytes_of(g.shape(t));
    }
    for (const ParallelTensorShape& s : n.outputs) out.push_back(type(s)), p = std::max(p, s.slices());
    if (n.op->flops) flops += n.op->flops(n.attrs, in, out);
  }
  for (const ParallelTensorShape& s : g.node(members.back()).outputs) bytes += bytes_of(s);
  flops *= attention_kernel_fraction(g, members);
  const OpEfficiency& e = efficiency_.of("FlashAttention");
  const double fwd = std::max(flops / (peak_ * e.compute), bytes / (machine_.device.memory_bandwidth * e.memory)) + efficiency_.launch;
  const double k = static_cast<double>(p);
  return {k * fwd, k * fwd * e.backward};
}

AttentionKernels CostModel::attention_kernels(const Graph& g, const SourceLayouts& layouts) const {
  if (recipe_.attention == AttentionKernel::kFlash) return find_attention_kernels(g, layouts);
  if (recipe_.attention == AttentionKernel::kFused) return fused_softmax_kernels(g, layouts);
  AttentionKernels none;
  none.kernel.assign(g.size(), -1);
  return none;
}

Seconds CostModel::grouped_heads_time(const Node& n, int64_t copies) const {
  const ParallelTensorShape& out = n.outputs[0];
  const double bytes = static_cast<double>(product(out.slice_shape()) * element_bytes(out.dtype, recipe_.precision));
  const double pass = bytes * (1.0 + 1.0 / static_cast<double>(copies)) / (machine_.device.memory_bandwidth * efficiency_.of(n.op->name).memory);
  return {0.0, static_cast<double>(out.slices()) * (pass + efficiency_.launch)};
}

FusedKernels CostModel::fused_kernels(const Graph& g, const SourceLayouts& layouts) const {
  FusedKernels k{attention_kernels(g, layouts), {}};
  if (recipe_.dropout_add == DropoutAddKernel::kFused) k.dropout_add = find_dropout_add_kernels(g, layouts);
  return k;
}

Seconds CostModel::operator_time(const Graph& g, const FusedKernels& fused, NodeId id) const {
  if (fused.dropout_add.fused(id) && g.node(id).op->dropout_add == DropoutAddPart::kDropout)
    return {0.0, task_time(g, g.node(id)).backward};  // (its forward in its sum's pass)
  const AttentionKernels& kernels = fused.attention;
  if (const int64_t copies = kernels.grouped_sum_copies(id)) return grouped_heads_time(g.node(id), copies);
  if (kernels.strided_view(id)) return {};  // (read or written by a FlashAttention kernel through its strides)
  const int32_t k = kernels.kernel[static_cast<size_t>(id)];
  if (k < 0) return task_time(g, g.node(id));
  if (!kernels.first(id)) return {};
  const std::vector<NodeId>& members = kernels.members[static_cast<size_t>(k)];
  // A fused scale and softmax: the softmax's pass alone, at its first member.
  return recipe_.attention == AttentionKernel::kFused ? task_time(g, g.node(members.back())) : attention_kernel_time(g, members);
}

Seconds CostModel::parallel_time(const Placement& p, NodeId id, int64_t lo) const {
  const Graph& g = p.graph();
  const Node& n = g.node(id);
  const DataMove op = n.op->data_move;
  if (op == DataMove::kPipeline || op == DataMove::kBatch) return {};
  const ParallelTensorShape& out = n.outputs.at(0);
  int64_t pieces = out.slices();
  for (const TensorRef& t : n.inputs) pieces = std::max(pieces, g.shape(t).slices());
  // Pipelined data moves once per micro-slice: p messages of 1/p the bytes.
  const double P = static_cast<double>(pieces);
  const auto& moves = p.moves(id);
  auto src = [&](const Move& m) { return lo + p.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard); };
  auto dst = [&](const Move& m) { return lo + p.owner({id, m.output}, m.out_shard); };
  Seconds s;
  if (op == DataMove::kReplicate || op == DataMove::kRepartition) {  // one input shard feeds a group of outputs
    const ParallelTensorShape& in = g.shape(n.inputs[0]);
    Groups groups(static_cast<size_t>(in.num_shards()));
    for (const Move& m : moves) groups.add(static_cast<size_t>(m.in_shard), src(m)), groups.add(static_cast<size_t>(m.in_shard), dst(m));
    const double bytes = activation_bytes(in) / P;
    const Collective c = op == DataMove::kReplicate ? Collective::kBroadcast : Collective::kScatter;
    s = {groups.slowest(machine_, c, bytes), groups.slowest(machine_, dual(c), bytes)};
  } else if (op == DataMove::kReduce || op == DataMove::kCombine) {  // a group of inputs feeds one output shard
    Groups groups(static_cast<size_t>(out.num_shards()));
    for (const Move& m : moves) groups.add(static_cast<size_t>(m.out_shard), dst(m)), groups.add(static_cast<size_t>(m.out_shard), src(m));
    const double bytes = activation_bytes(op == DataMove::kReduce ? g.shape(n.inputs[0]) : out) / P;
    const Collective c = op == DataMove::kReduce ? Collective::kReduce : Collective::kGather;
    s = {groups.slowest(machine_, c, bytes), groups.slowest(machine_, dual(c), bytes)};
    if (op == DataMove::kReduce) {
      const Seconds sum = local_sum_time(p, id, lo);
      s = {std::max(s.forward, sum.forward), std::max(s.backward, sum.backward)};
    }
  } else if (op == DataMove::kAllReduce) {  // the outputs of one group read the same inputs; key: the first
    const ParallelTensorShape& in = g.shape(n.inputs[0]);
    Groups groups(static_cast<size_t>(in.num_shards()));
    std::vector<int64_t> key(static_cast<size_t>(out.num_shards()), -1);
    for (const Move& m : moves)
      if (key[static_cast<size_t>(m.out_shard)] < 0) key[static_cast<size_t>(m.out_shard)] = m.in_shard;
    for (const Move& m : moves) {
      const auto k = static_cast<size_t>(key[static_cast<size_t>(m.out_shard)]);
      groups.add(k, src(m)), groups.add(k, dst(m));
    }
    const double t = groups.slowest(machine_, Collective::kAllReduce, activation_bytes(in) / P);
    s = {t, t};
  } else if (n.op->is_shard_level(n.attrs)) {  // replica-axis Concat/Split: plain copies, posted at once
    // Copies leaving or reaching one device share its links (a Concat of a
    // tensor with itself sends its shards twice to the same devices), so
    // they are one exchange, not each copy alone; backward, the gradients
    // come back the other way.
    thread_local std::vector<Transfer> there, back;
    there.clear(), back.clear();
    for (const Move& m : moves) {
      const int64_t a = src(m), b = dst(m);
      if (a == b) continue;
      const double bytes = activation_bytes(g.shape(n.inputs[static_cast<size_t>(m.input)])) / P;
      there.push_back({a, b, bytes}), back.push_back({b, a, bytes});
    }
    s = {exchange_time(machine_, there), exchange_time(machine_, back)};
  } else {
    throw Error("cost model: " + n.op->name + " is not a parallel operator");
  }
  return {P * s.forward, P * s.backward};
}

// Replica slots a Reduce sums where they all are (one device, so no
// collective runs: Unity's hybrid add on one device) are an elementwise sum
// the runtime computes there, k slots read and one written, as an EwAdd
// kernel would; backward, the gradient copied back to each, as EwAdd's
// backward. Per micro-slice (times P by the callers' convention: 1/P of
// the bytes here).
Seconds CostModel::local_sum_time(const Placement& p, NodeId id, int64_t lo) const {
  const Graph& g = p.graph();
  const Node& n = g.node(id);
  if (n.op->data_move != DataMove::kReduce) return {};
  const ParallelTensorShape& out = n.outputs.at(0);
  const ParallelTensorShape& in = g.shape(n.inputs[0]);
  const double P = static_cast<double>(std::max(out.slices(), in.slices()));
  const double bytes = activation_bytes(in) / P;
  std::vector<int64_t> local(static_cast<size_t>(out.num_shards()), 0), device(local.size(), -1);
  std::vector<char> apart(local.size(), 0);
  for (const Move& m : p.moves(id)) {
    const auto o = static_cast<size_t>(m.out_shard);
    const int64_t src = lo + p.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard), dst = lo + p.owner({id, m.output}, m.out_shard);
    if (src != dst) apart[o] = 1;
    device[o] = dst, ++local[o];
  }
  std::map<int64_t, double> adds;  // per device, the slots' bytes it reads and writes
  for (size_t o = 0; o < local.size(); ++o)
    if (!apart[o] && local[o] > 1) adds[device[o]] += static_cast<double>(local[o] + 1) * bytes;
  const OpEfficiency& e = efficiency_.of("EwAdd");
  Seconds s;
  for (const auto& [dev, b] : adds) {
    const double t = b / (machine_.device.memory_bandwidth * e.memory) + efficiency_.launch;
    s.forward = std::max(s.forward, t), s.backward = std::max(s.backward, t * e.backward);
  }
  return s;
}

std::optional<Seconds> CostModel::layout_change_time(const Placement& p, NodeId first, NodeId second, int64_t lo) const {
  const Graph& g = p.graph();
  const Node& a = g.node(first);
  const Node& b = g.node(second);
  const auto c = layout_change(a.op->data_move, b.op->data_move);
  if (!c || b.inputs.size() != 1) return std::nullopt;
  // A pair, or a sum splitting several dimensions (relayout.h): splits
  // from `first` to `second`, whose pieces are exchanged at once.
  const bool pair = b.inputs[0] == TensorRef{first, 0};
  if (!pair)
    for (NodeId x = b.inputs[0].node; x != first; x = g.node(x).inputs[0].node)
      if (g.node(x).op->data_move != DataMove::kRepartition || g.node(x).inputs.size() != 1) return std::nullopt;
  const int64_t k = a.attrs.get_int("degree");
  const TensorRef in = a.inputs[0], out{second, 0};
  const ParallelTensorShape& s_in = g.shape(in);
  const ParallelTensorShape& mid_shape = a.outputs[0];
  const double P = static_cast<double>(std::max({s_in.slices(), mid_shape.slices(), b.outputs[0].slices()}));
  const auto mids = static_cast<size_t>(mid_shape.num_shards());
  std::vector<std::vector<int64_t>> from(mids), to(mids);
  bool same_devices = pair && b.attrs.get_int("degree") == k;
  if (same_devices) {
    for (const Move& m : p.moves(first)) from[static_cast<size_t>(m.out_shard)].push_back(lo + p.owner(in, m.in_shard));
    for (const Move& m : p.moves(second)) to[static_cast<size_t>(m.in_shard)].push_back(lo + p.owner(out, m.out_shard));
    for (auto& x : from) sort_unique(x);
    for (auto& y : to) sort_unique(y);
  }
  for (size_t j = 0; j < mids && same_devices; ++j) same_devices = static_cast<int64_t>(from[j].size()) == k && from[j] == to[j];
  if (same_devices) {
    // The collective within each group. Bytes of one member's buffer: its
    // input shard, or the gathered shard.
    const double bytes = (*c == Collective::kAllGather ? activation_bytes(mid_shape) : activation_bytes(s_in)) / P;
    double fwd = 0, bwd = 0;
    const std::vector<GroupShape> shapes = concurrent_shapes(machine_, from);
    for (const GroupShape& gs : shapes) {
      fwd = std::max(fwd, collective_time(machine_, *c, gs, bytes));
      bwd = std::max(bwd, collective_time(machine_, dual(*c), gs, bytes));
    }
    return Seconds{P * fwd, P * bwd};
  }
  // Otherwise the pieces the runtime sends (pcg/relayout.h), all at once,
  // after a Reduce's sums of slots on one device.
  const auto [sum, copy] = relayout_factors(a, b);
  const Seconds moved = relayout_time(p, in, out, sum, copy, lo), summed = local_sum_time(p, first, lo);
  return Seconds{moved.forward + P * summed.forward, moved.backward + P * summed.backward};
}

Seconds CostModel::relayout_time(const Placement& p, TensorRef in, TensorRef out, int64_t sum, int64_t copy, int64_t lo) const {
  const Graph& g = p.graph();
  const ParallelTensorShape& s_in = g.shape(in);
  const ParallelTensorShape& s_out = g.shape(out);
  const double P = static_cast<double>(std::max(s_in.slices(), s_out.slices()));
  const int64_t element_size = element_bytes(s_in.dtype, recipe_.precision);
  const double element = static_cast<double>(element_size) / P;
  KeyHasher h;
  h.add(s_in), h.add(s_out), h.add(static_cast<uint64_t>(sum)), h.add(static_cast<uint64_t>(copy)), h.add(static_cast<uint64_t>(lo));
  h.add(static_cast<uint64_t>(element_size)), h.add(p.owners(in)), h.add(p.owners(out));
  const RelayoutKey key = h.key();
  if (const auto it = relayouts_->seconds.find(key); it != relayouts_->seconds.end()) return it->second;
  // The pieces priced as they are made, each way in turn (not listed: at
  // 3,072 devices a relayout can be millions of pieces, and listing them
  // and their transfers was a fifth of BERT-Large's search there).
  int64_t devices = 0;
  for (const TensorRef t : {in, out})
    for (const int64_t d : p.owners(t)) devices = std::max(devices, lo + d + 1);
  auto one_way = [&](bool backward) {
    Exchange x(machine_, devices);
    for_each_relayout_piece(s_in, s_out, sum, copy, [&](const PieceSize& pc) {
      const int64_t src = lo + p.owner(in, pc.in_shard), dst = lo + p.owner(out, pc.out_shard);
      const double bytes = static_cast<double>(pc.elements) * element;
      backward ? x.add(dst, src, bytes) : x.add(src, dst, bytes);
    });
    return x.time();
  };
  const Seconds s{P * one_way(false), P * one_way(true)};
  relayouts_->seconds.emplace(key, s);
  return s;
}

Seconds CostModel::input_transfer_time(const Placement& p, NodeId id, int64_t lo) const {
  const Graph& g = p.graph();
  const Node& n = g.node(id);
  if (n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs)) return {};
  const TaskTable& tt = p.tasks(id);
  if (tt.tasks <= 1 && n.inputs.empty()) return {};
  const auto& dev = p.task_devices(id);
  double worst = 0;
  for (int64_t t = 0; t < tt.tasks; ++t) {
    double mine = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ParallelTensorShape& s = g.shape(n.inputs[i]);
      const int64_t from = p.owner(n.inputs[i], tt.input_shard[static_cast<size_t>(t)][i]);
      const double pieces = static_cast<double>(s.slices());
      if (from != dev[static_cast<size_t>(t)]) mine += pieces * send_time(machine_, lo + from, lo + dev[static_cast<size_t>(t)], activation_bytes(s) / pieces);
    }
    worst = std::max(worst, mine);
  }
  return {worst, worst};
}

std::optional<SyncGroup> CostModel::sync_group(const Placement& p, TensorRef t, int64_t lo) const {
  const ParallelTensorShape& s = p.graph().shape(t);
  if (s.replica <= 1) return std::nullopt;
  const ZeroStage stage = zero_of(p.graph(), recipe_, t);
  // What it depends on beside the recipe (the cache's own).
  KeyHasher h;
  h.add(0x5C), h.add(s), h.add(p.owners(t)), h.add(static_cast<uint64_t>(lo)), h.add(static_cast<uint64_t>(stage));
  const RelayoutKey key = h.key();
  if (const auto it = relayouts_->sync_groups.find(key); it != relayouts_->sync_groups.end()) return it->second;
  const int64_t blocks = s.num_blocks();
  const int64_t gradient = param_bytes(recipe_.precision, recipe_.optimizer, recipe_.grad_precision).gradient;
  std::optional<SyncGroup> worst;
  double worst_time = -1;
  // Every block's group, all synchronized at once (their rings share a
  // node's adapters: concurrent_shapes).
  std::vector<std::vector<int64_t>> groups;
  std::vector<int64_t> all;
  for (int64_t b = 0; b < blocks; ++b) {
    std::vector<int64_t> members;
    for (int64_t c = 0; c < s.replica; ++c) members.push_back(lo + p.owner(t, c * blocks + b));
    sort_unique(members);
    if (members.size() < 2) continue;
    all.insert(all.end(), members.begin(), members.end());
    groups.push_back(std::move(members));
  }
  std::vector<GroupShape> shapes = concurrent_shapes(machine_, groups);
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::vector<int64_t>& members = groups[i];
    // (Its gradient's bytes: FP32, or the compute precision's.)
    SyncGroup sg{std::move(shapes[i]), static_cast<double>(s.shard_elements()) * static_cast<double>(gradient), 0};
    sg.gathered_for_use = gathers_for_use(stage, recipe_.zero_persistence_threshold, s.shard_elements());
    const double time = allreduce_times(machine_, sg.group, sg.bytes).best();
    if (time <= worst_time) continue;
    sg.key = 0x5EC;
    for (int64_t d : members) sg.key = hash_mix(sg.key, static_cast<uint64_t>(d));
    // (The same devices in rings shared otherwise with their siblings are
    // another collective: never one bucket.)
    for (const double links : sg.group.links) sg.key = hash_mix(sg.key, std::bit_cast<uint64_t>(links));
    if (sg.gathered_for_use) sg.key = hash_mix(sg.key, 0x3);  // never in a bucket with the weights kept whole
    // Weights of different stages never share a bucket (nor do they in the
    // runtime: execution_plan.h): what a device keeps of them differs.
    if (!recipe_.zero_weights.empty()) sg.key = hash_mix(sg.key, 0x20 + static_cast<uint64_t>(stage));
    worst = std::move(sg), worst_time = time;
  }
  if (worst) {
    std::sort(all.begin(), all.end());
    // A device in several blocks' groups (co-shard: its tasks read several
    // blocks) synchronizes each of them: as many blocks' bytes as the
    // busiest device holds.
    int64_t most = 1;
    for (size_t i = 0, j = 0; i < all.size(); i = j) {
      while (j < all.size() && all[j] == all[i]) ++j;
      most = std::max<int64_t>(most, static_cast<int64_t>(j - i));
    }
    worst->bytes *= static_cast<double>(most);
    all.erase(std::unique(all.begin(), all.end()), all.end());
    worst->devices = std::move(all);
  }
  relayouts_->sync_groups.emplace(key, worst);
  return worst;
}

namespace {
// The gradient collective of a bucket: all-reduce, or reduce-scatter when
// the optimizer state is sharded (unless ZeRO 1 all-reduces:
// TrainingRecipe::reduce_scatter).
double reduce_time(const Machine& m, const TrainingRecipe& r, const GroupShape& g, double bytes) {
  return shards_optimizer(r.zero) && !zero1_all_reduces(r) ? collective_time(m, Collective::kReduceScatter, g, bytes) : allreduce_times(m, g, bytes).best();
}
}  // namespace

double CostModel::sync_share(const SyncGroup& s) const {
  if (s.gathered_for_use) return reduce_time(machine_, recipe_, s.group, s.bytes);  // its own bucket
  const double bucket = comm_.bucket_bytes;
  return s.bytes * reduce_time(machine_, recipe_, s.group, bucket) / bucket;
}

double CostModel::gather_share(const SyncGroup& s) const {
  // Before its forward and its backward, in every micro-batch (rounds).
  if (s.gathered_for_use) return 2.0 * static_cast<double>(s.rounds) * use_gather_time(s);
  const double bucket = comm_.bucket_bytes;
  return s.bytes * weight_gather_time(s, bucket) / bucket;
}

namespace {
// An all-gather of the weights whose gradients are `gradient_bytes`, in compute precision.
double gather_weights(const Machine& m, const TrainingRecipe& r, const GroupShape& group, double gradient_bytes) {
  if (group.size <= 1) return 0.0;
  const ParamBytes per = param_bytes(r.precision, r.optimizer, r.grad_precision);
  const double weight_bytes = gradient_bytes * static_cast<double>(per.weight) / static_cast<double>(per.gradient);
  return collective_time(m, Collective::kAllGather, group, weight_bytes);
}
}  // namespace

double CostModel::weight_gather_time(const SyncGroup& bucket, double gradient_bytes) const {
  if (!shards_optimizer(recipe_.zero) || bucket.gathered_for_use) return 0.0;
  return gather_weights(machine_, recipe_, bucket.group, gradient_bytes);
}

double CostModel::use_gather_time(const SyncGroup& s) const {
  if (!s.gathered_for_use) return 0.0;
  return gather_weights(machine_, recipe_, s.group, s.bytes);
}

double CostModel::move_time(const ParallelTensorShape& s, int64_t from, int64_t to) const {
  if (from == to) return 0.0;
  double worst = 0;
  const int64_t shards = s.num_shards();
  const double p = static_cast<double>(s.slices());
  const double bytes = activation_bytes(s) / p;
  // Shard i goes from device from + i to to + i. Which link a pair crosses
  // repeats with the period of the link spans, so one period of shards
  // covers every case (8 pairs instead of 192 on a DGX machine).
  for (int64_t i = 0; i < std::min(shards, period_); ++i)
    worst = std::max(worst, p * send_time(machine_, from + i, to + i, bytes));
  return worst;
}

double CostModel::bucket_pack_time(double bytes) const {
  if (bytes <= 0) return 0.0;
  if (profile_.bucket_copy_bytes_per_second > 0) return bytes / profile_.bucket_copy_bytes_per_second;
  return 4.0 * bytes / (machine_.device.memory_bandwidth * efficiency_.fallback.memory);
}

double CostModel::bucket_time(const GroupShape& group, double bytes) const {
  return reduce_time(machine_, recipe_, group, bytes) + bucket_pack_time(bytes);
}

double CostModel::cast_pass_time(double elements, int64_t tensors) const {
  const int64_t per = cast_pass_bytes(recipe_.precision, recipe_.grad_precision);
  if (per == 0 || elements <= 0) return 0.0;
  return elements * static_cast<double>(per) / (machine_.device.memory_bandwidth * efficiency_.of("EwAdd").memory) +
         2.0 * static_cast<double>(tensors) * efficiency_.launch;
}

double CostModel::update_time(double bytes) const {
  if (bytes <= 0) return 0.0;
  // The optimizer's FP32 words per parameter (Adam's 7), and the compute
  // copy written when mixed.
  const double words = update_stream_words(recipe_.precision, recipe_.optimizer);
  // A measured rate, for the words its run streamed per parameter where
  // the profile says how many (another optimizer streams more or less).
  if (profile_.update_bytes_per_second > 0)
    return bytes / profile_.update_bytes_per_second * (profile_.update_words > 0 ? words / profile_.update_words : 1.0);
  return words * bytes / (machine_.device.memory_bandwidth * efficiency_.fallback.memory) + efficiency_.launch;
}

}  // namespace pcgx::search
