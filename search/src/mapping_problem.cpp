// The machine-mapping problem: structure, hashes and per-node costs (see
// mapping_problem.h).
#include "mapping_problem.h"

#include <algorithm>
#include <bit>
#include <set>

#include "pcgx/pcg/relayout.h"
#include "pcgx/search/graph_hash.h"

namespace pcgx::search {
namespace {

// Every compute operator at start 0, stride 1: the DP shifts whole
// sub-graphs to the start of their resource.
std::vector<MachineView> canonical_views(const Graph& g) {
  std::vector<MachineView> v(g.size());
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs)) v[static_cast<size_t>(n.id)] = {0, 1, {}};
  return v;
}

}  // namespace

namespace {
bool moves(const Graph& g, NodeId x, DataMove m) { return g.node(x).op->data_move == m; }
// A tensor split by a layout change that sums (a Reduce, then one
// Repartition or several, each the only reader of the one before) whose
// last split is read only by merges: the pieces of one exchange, several
// to a device (layout_search.h's split-first sequence, relayout.h).
bool pieces_of_an_exchange(const Graph& g, NodeId n, const std::vector<std::vector<std::pair<NodeId, int>>>& consumers) {
  auto merged = [&](NodeId y) {
    const auto& readers = consumers[static_cast<size_t>(y)];
    return !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](const auto& r) { return moves(g, r.first, DataMove::kCombine); });
  };
  NodeId x = n;
  if (!moves(g, x, DataMove::kRepartition) || g.node(x).inputs.size() != 1) return false;
  if (moves(g, g.node(x).inputs[0].node, DataMove::kReduce) && merged(n)) return true;
  while (moves(g, x, DataMove::kRepartition)) {
    if (g.node(x).inputs.size() != 1) return false;
    x = g.node(x).inputs[0].node;
  }
  if (!moves(g, x, DataMove::kReduce)) return false;
  const auto partner = layout_change_partner(g, x, consumers);
  if (!partner) return false;
  const std::vector<NodeId> inside = layout_change_inside(g, x, *partner);
  return (*partner == n || std::find(inside.begin(), inside.end(), n) != inside.end()) && merged(*partner);
}
}  // namespace

int64_t task_count(const Graph& g, const Node& n, const std::vector<std::vector<std::pair<NodeId, int>>>& consumers) {
  if (n.op->op_class == OpClass::kParallel) {
    int64_t t = pieces_of_an_exchange(g, n.id, consumers) ? 1 : n.outputs[0].num_shards();
    for (const TensorRef& i : n.inputs)
      if (!pieces_of_an_exchange(g, i.node, consumers)) t = std::max(t, g.shape(i).num_shards());
    return t;
  }
  return n.outputs.empty() ? 1 : n.outputs[0].num_shards();
}

Problem::Problem(const Graph& graph, const CostModel& cm, Cache& ca, ChoiceCache* ch)
  : g(graph), cost(cm), cache(ca), choices(ch), layouts(source_layouts(graph)), place(graph, canonical_views(graph), cm.devices()) {
  active.assign(g.size(), 0);
  for (const Node& n : g.nodes())
    active[static_cast<size_t>(n.id)] = n.op->op_class != OpClass::kSource && !layouts.is_layout(g, n.id);
  consumers = g.consumers();
  for (auto& c : consumers) std::stable_sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // A layout node is paid for by its first active reader.
  std::vector<NodeId> owner(g.size(), -1);
  for (size_t i = g.size(); i-- > 0;) {
    if (!layouts.is_layout(g, static_cast<NodeId>(i))) continue;
    NodeId best = -1;
    for (const auto& [c, idx] : consumers[i]) {
      const NodeId o = active[static_cast<size_t>(c)] ? c : owner[static_cast<size_t>(c)];
      if (o >= 0 && (best < 0 || o < best)) best = o;
    }
    owner[i] = best;
  }
  feeders.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i)
    if (owner[i] >= 0) feeders[static_cast<size_t>(owner[i])].push_back(static_cast<NodeId>(i));
  // Layout changes priced as one step: a parallel node and the parallel
  // node completing it (relayout.h's partner; the splits between are tails).
  fused_tail.assign(g.size(), -1);
  fused_head.assign(g.size(), -1);
  is_tail.assign(g.size(), 0);
  for (const Node& n : g.nodes()) {
    if (!active[static_cast<size_t>(n.id)] || is_tail[static_cast<size_t>(n.id)]) continue;
    const auto tail = layout_change_partner(g, n.id, consumers);
    if (!tail || !active[static_cast<size_t>(*tail)]) continue;
    std::vector<NodeId> members = layout_change_inside(g, n.id, *tail);
    if (std::any_of(members.begin(), members.end(), [&](NodeId x) { return !active[static_cast<size_t>(x)]; })) continue;
    members.push_back(*tail);
    fused_tail[static_cast<size_t>(n.id)] = *tail;
    for (NodeId x : members) is_tail[static_cast<size_t>(x)] = 1, fused_head[static_cast<size_t>(x)] = n.id;
  }
  // A weight layout's gradient is synchronized by its first compute
  // reader (not a layout computed from it, which is synchronized as its
  // own); a parameter's copy, where its original holds it, by the
  // original's (sync_groups).
  copies = parameter_copy_map(g, layouts);
  syncs.resize(g.size());
  for (const Node& n : g.nodes()) {
    if (!active[static_cast<size_t>(n.id)] || n.op->op_class != OpClass::kCompute) continue;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const TensorRef t = n.inputs[i];
      if (!layouts.weight(t)) continue;
      NodeId first = -1;
      for (const auto& [c, idx] : consumers[static_cast<size_t>(t.node)])
        if (g.node(c).inputs[static_cast<size_t>(idx)] == t && g.node(c).op->op_class == OpClass::kCompute && !layouts.is_layout(g, c)) {
          first = c;
          break;
        }
      if (first == n.id && std::find_if(syncs[static_cast<size_t>(n.id)].begin(), syncs[static_cast<size_t>(n.id)].end(),
                                        [&](size_t j) { return n.inputs[j] == t; }) == syncs[static_cast<size_t>(n.id)].end())
        syncs[static_cast<size_t>(n.id)].push_back(i);
    }
  }
  recompute = plan_recompute(g, layouts, cost.recipe());
  kernels = cost.fused_kernels(g, layouts);
  beside.resize(g.size()), beside_through.resize(g.size());
  for (const Node& n : g.nodes()) beside[static_cast<size_t>(n.id)] = walk_beside(n.id, beside_through[static_cast<size_t>(n.id)]);
  hash_nodes();
  std::vector<std::vector<NodeId>> readers(g.size());
  tree = decompose(g, active, readers);
  tree_hash.resize(tree.nodes.size());
  for (size_t i = 0; i < tree.nodes.size(); ++i) tree_hash[i] = hash_tree(static_cast<int>(i));
}

// What a leaf's cost depends on: its own shapes and attributes, where its
// inputs' and outputs' shards live (decided by their producers and first
// readers, placement.h), the layouts it pays for and the collective it
// forms with a neighbour.
void Problem::hash_nodes() {
  std::vector<uint64_t> own(g.size()), where(g.size(), 0);
  for (const Node& n : g.nodes()) own[static_cast<size_t>(n.id)] = local_hash(n, g);
  // where[n]: the placement of n's outputs, from their producer (compute)
  // or their first reader (everything else); readers come later in id order.
  for (size_t i = g.size(); i-- > 0;) {
    const Node& n = g.node(static_cast<NodeId>(i));
    uint64_t h = own[i];
    if (n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs))
      for (const auto& [c, idx] : consumers[i]) {
        // (Which output the reader reads: a replica Split's slots go where
        // their readers are, and one nobody reads is a copy left behind.)
        const auto out = static_cast<uint64_t>(g.node(c).inputs[static_cast<size_t>(idx)].output);
        h = hash_mix(hash_mix(h, static_cast<uint64_t>(idx) + (out << 32)), hash_mix(own[static_cast<size_t>(c)], where[static_cast<size_t>(c)]));
      }
    where[i] = h;
  }
  local.resize(g.size());
  for (const Node& n : g.nodes()) {
    const auto id = static_cast<size_t>(n.id);
    uint64_t h = hash_mix(own[id], where[id]);
    for (const TensorRef& t : n.inputs)
      h = hash_mix(hash_mix(h, where[static_cast<size_t>(t.node)] + static_cast<uint64_t>(t.output)), layouts.weight(t) ? 0x3E16 : 0xAC7);
    // What upstream and the graph's outputs decide about the node: its
    // devices needed (the pieces of an exchange follow a Reduce upstream)
    // and whether a Split only takes a copy.
    h = hash_mix(h, 0x7C0 + static_cast<uint64_t>(task_count(g, n, consumers)));
    if (takes_copy(n.id)) h = hash_mix(h, 0x7A4E);
    for (size_t i : syncs[id]) {
      h = hash_mix(h, 0x5C + i);
      // Each synchronized weight at its own ZeRO stage (training_recipe.h's
      // ZeroWeights): two leaves alike but for it cost differently.
      if (!cost.recipe().zero_weights.empty()) h = hash_mix(h, 0x2E0 + static_cast<uint64_t>(zero_of(g, cost.recipe(), n.inputs[i])));
      // A tied parameter's copy, priced as held with its original or not at
      // the first placement (held_as_copy), which a graph elsewhere decides.
      if (copies.count(n.inputs[i]))
        h = hash_mix(h, 0xC09 + (held_as_copy(place, n.inputs[i], true) ? 2u : 0u) + (held_as_copy(place, n.inputs[i], false) ? 1u : 0u));
    }
    for (NodeId f : feeders[id]) h = hash_mix(h, own[static_cast<size_t>(f)] ^ (layouts.weight({f, 0}) ? 1 : 0));
    if (fused_tail[id] >= 0) h = hash_mix(h, hash_mix(own[static_cast<size_t>(fused_tail[id])], where[static_cast<size_t>(fused_tail[id])]));
    if (is_tail[id]) h = hash_mix(h, 0x7A11);
    // A collective sent beside its reader's weight product (overlap_grad_input).
    if (n.op->op_class == OpClass::kParallel && cost.recipe().overlap_grad_input)
      h = hash_mix(hash_mix(h, 0x0A51 ^ std::bit_cast<uint64_t>(weight_products_beside(n.id))),
                   std::bit_cast<uint64_t>(input_products_beside_rerun(n.id)));
    if (recompute.recomputed[id]) h = hash_mix(h, 0x8EC0 + static_cast<uint64_t>(recompute.recomputed_in_kernel(n.id)));
    const AttentionKernels& attention = kernels.attention;
    if (attention.first(n.id)) {  // it stands for its kernel: every member's own shapes
      for (const NodeId m : attention.members[static_cast<size_t>(attention.kernel[id])]) h = hash_mix(h, own[static_cast<size_t>(m)]);
    } else if (attention.in_kernel(n.id)) {
      h = hash_mix(h, 0xF1A5);
    }
    if (attention.strided_view(n.id)) h = hash_mix(h, 0x57D1);  // (no pass: a graph elsewhere, its readers, decides it)
    if (const int64_t copies = attention.grouped_sum_copies(n.id)) h = hash_mix(h, 0x6A0D + static_cast<uint64_t>(copies));
    // A dropout whose forward runs in its sum's pass, re-run alone or not.
    if (const NodeId sum = kernels.dropout_add.partner_of(n.id); sum >= 0 && n.op->dropout_add == DropoutAddPart::kDropout)
      h = hash_mix(h, 0xD40A + static_cast<uint64_t>(recompute.recomputed[static_cast<size_t>(sum)] != 0));
    local[id] = h;
  }
}

uint64_t Problem::hash_tree(int t) const {
  const SPNode& s = tree.nodes[static_cast<size_t>(t)];
  if (s.kind == SPNode::kLeaf) return local[static_cast<size_t>(s.node)];
  uint64_t h = s.kind == SPNode::kSeries ? 0x5E41E5 : 0x9A7A11E1;
  if (s.kind == SPNode::kSeries) {
    for (int c : s.children) h = hash_mix(h, hash_tree(c));
  } else {
    std::vector<uint64_t> hs;
    for (int c : s.children) hs.push_back(hash_mix(hash_tree(c), boundary_hash(c)));
    std::sort(hs.begin(), hs.end());
    for (uint64_t x : hs) h = hash_mix(h, x);
  }
  return h;
}

// The tensors crossing the boundary of sub-tree t (produced outside by an
// active node and read inside, or produced inside and read outside).
std::vector<TensorRef> Problem::boundary(int t) const {
  const auto& m = tree.nodes[static_cast<size_t>(t)].members;
  auto inside = [&](NodeId n) { return std::binary_search(m.begin(), m.end(), n); };
  std::set<TensorRef> out;
  for (NodeId n : m) {
    for (const TensorRef& i : g.node(n).inputs)
      if (active[static_cast<size_t>(i.node)] && !inside(i.node)) out.insert(i);
    for (const auto& [c, idx] : consumers[static_cast<size_t>(n)])
      if (!inside(c)) out.insert(g.node(c).inputs[static_cast<size_t>(idx)]);
  }
  for (const TensorRef& o : g.outputs())
    if (inside(o.node)) out.insert(o);
  return {out.begin(), out.end()};
}
uint64_t Problem::boundary_hash(int t) const {
  uint64_t h = 0xB0;
  for (const TensorRef& r : boundary(t)) h = hash_mix(h, local[static_cast<size_t>(r.node)] + static_cast<uint64_t>(r.output));
  return h;
}
// Forward and backward of moving sub-tree t's boundary from `from` to `to`.
double Problem::move(int t, int64_t from, int64_t to) const {
  if (from == to) return 0;
  double s = 0;
  for (const TensorRef& r : boundary(t)) s += cost.move_time(g.shape(r), from, to);
  return 2 * s;
}

// The synchronizations node `id` pays under `p` shifted by `lo`.
bool Problem::held_as_copy(const Placement& p, TensorRef t, bool gathers_too) const {
  const auto c = copies.find(t);
  if (c == copies.end()) return false;
  if (!gathers_too && pcgx::gathers_for_use(zero_of(g, cost.recipe(), c->second.of), cost.recipe().zero_persistence_threshold,
                                            g.shape(c->second.of).shard_elements()))
    return false;
  return held_by_original(p, t, c->second);
}

std::vector<SyncGroup> Problem::sync_groups(const Placement& p, NodeId id, int64_t lo) const {
  std::vector<SyncGroup> out;
  const Node& n = g.node(id);
  for (size_t i : syncs[static_cast<size_t>(id)])
    if (held_as_copy(p, n.inputs[i], false)) continue;
    else if (auto s = cost.sync_group(p, n.inputs[i], lo)) {
      s->rounds = sync_rounds(g, layouts, cost.recipe(), n, n.inputs[i]);
      out.push_back(*s);
    }
  return out;
}

bool Problem::gathers_for_use(NodeId id) const {
  const Node& n = g.node(id);
  for (size_t i : syncs[static_cast<size_t>(id)])
    if (pcgx::gathers_for_use(zero_of(g, cost.recipe(), n.inputs[i]), cost.recipe().zero_persistence_threshold, g.shape(n.inputs[i]).shard_elements())) return true;
  return false;
}

double Problem::step_bytes(const Placement& p, bool kept_inputs) const {
  const std::vector<NodeRun> runs = node_runs(p, layouts, RunDetail::kKinds);
  return pcgx::step_bytes(p, layouts, runs) + search::zero_extra_bytes(p, layouts, cost.recipe()) + recompute_step_bytes(p, runs, recompute, kept_inputs);
}


namespace {
// A recomputed node's backward re-runs its forward first.
Seconds with_recompute(Seconds s, bool recomputed) {
  if (recomputed) s.backward += s.forward;
  return s;
}
}  // namespace

Seconds Problem::task_seconds(NodeId id) const {
  Seconds s = kernel_seconds(id);
  s.backward += cast_pass_seconds(id);
  return s;
}

double Problem::cast_pass_seconds(NodeId id) const {
  // After each micro-batch's backward (GradPrecision::kFp32Cast), by the
  // node synchronizing each weight: its shard's gradient cast and added,
  // once a micro-batch. A parameter's copy (a tied head's table) adds
  // into its original's gradient, counted there.
  const Node& n = g.node(id);
  double elements = 0;
  int64_t tensors = 0;
  for (size_t k : syncs[static_cast<size_t>(id)]) {
    if (copies.count(n.inputs[k])) continue;
    elements += static_cast<double>(g.shape(n.inputs[k]).shard_elements());
    ++tensors;
  }
  if (tensors == 0) return 0.0;
  const int64_t micro_batches = n.outputs.empty() ? 1 : n.outputs[0].slices();
  return static_cast<double>(micro_batches) * cost.cast_pass_time(elements, tensors);
}

Seconds Problem::kernel_seconds(NodeId id) const {
  // An attention kernel's time stands at its first operator, nothing at
  // the others; the scores a FlashAttention kernel recomputes in its
  // backward are in that time, and only a layer re-run whole (full) runs
  // its forward again. A fused scale and softmax re-runs as the kernel
  // where both re-run; one recomputed alone (recompute operators naming
  // it) re-runs its own eager pass.
  const Seconds s = cost.operator_time(g, kernels, id);
  const bool again = recompute.recomputed[static_cast<size_t>(id)] && !recompute.recomputed_in_kernel(id);
  const AttentionKernels& attention = kernels.attention;
  if (again && attention.in_kernel(id) && cost.recipe().attention == AttentionKernel::kFused) {
    const std::vector<NodeId>& members = attention.members[static_cast<size_t>(attention.kernel[static_cast<size_t>(id)])];
    const bool whole = std::all_of(members.begin(), members.end(), [&](NodeId m) { return recompute.recomputed[static_cast<size_t>(m)] != 0; });
    if (!whole) return {s.forward, s.backward + cost.task_time(g, g.node(id)).forward};
  }
  // A fused dropout re-run without its sum re-runs its own eager pass.
  if (const NodeId sum = kernels.dropout_add.partner_of(id); again && sum >= 0 && g.node(id).op->dropout_add == DropoutAddPart::kDropout &&
                                                              !recompute.recomputed[static_cast<size_t>(sum)])
    return {s.forward, s.backward + cost.task_time(g, g.node(id)).forward};
  return with_recompute(s, again);
}

bool Problem::splits_backward(NodeId id) const {
  if (!cost.recipe().overlap_grad_input || !cost.machine().device.overlaps_communication || !active[static_cast<size_t>(id)]) return false;
  const Node& n = g.node(id);
  if (n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs) || !n.op->operand_products || n.inputs.size() < 2) return false;
  // One operand a weight, the other an activation.
  return layouts.weight(n.inputs[0]) != layouts.weight(n.inputs[1]);
}

double Problem::weight_gradient_seconds(NodeId id) const {
  return splits_backward(id) ? cost.operator_time(g, kernels, id).backward / 2 : 0.0;
}

std::vector<NodeId> Problem::products_beside(NodeId id, std::vector<NodeId>* through) const {
  if (through) *through = beside_through[static_cast<size_t>(id)];
  return beside[static_cast<size_t>(id)];
}

std::vector<NodeId> Problem::walk_beside(NodeId id, std::vector<NodeId>& walked) const {
  std::vector<NodeId> out;
  walked.clear();
  if (!cost.recipe().overlap_grad_input || !active[static_cast<size_t>(id)] || g.node(id).op->op_class != OpClass::kParallel ||
      is_tail[static_cast<size_t>(id)])
    return out;
  const NodeId last = fused_tail[static_cast<size_t>(id)] >= 0 ? fused_tail[static_cast<size_t>(id)] : id;
  const std::vector<int64_t> copy = g.node(last).outputs[0].shard_shape();
  // Through operators that run on copies of the collective's output, read
  // no product and join nothing computed after it (Megatron-LM's dropout,
  // residual sum and LayerNorm on every device of the tensor-parallel
  // group after its all-reduce): in backward their gradients come before
  // the collective's, which then runs beside the weight products of the
  // products reading them, as Megatron-LM's all-reduce of those products'
  // input gradient does. A residual sum that also reads what comes after
  // the collective (the next one's copies) runs its backward earlier: not
  // followed, no reason to hide nothing.
  auto joins_later = [&](const Node& n, NodeId from) {
    return std::any_of(n.inputs.begin(), n.inputs.end(), [&](const TensorRef& t) { return t.node != from && t.node > id && !layouts.weight(t); });
  };
  auto copied = [&](const Node& n) {
    return n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs) && !n.op->operand_products && n.outputs.size() == 1 &&
           n.outputs[0].shard_shape() == copy;
  };
  std::vector<NodeId> through{last};
  for (size_t i = 0; i < through.size(); ++i)
    for (const auto& [reader, idx] : consumers[static_cast<size_t>(through[i])]) {
      const Node& r = g.node(reader);
      const bool joins = joins_later(r, through[i]);
      if (!joins && copied(r) && active[static_cast<size_t>(reader)]) {
        if (std::find(through.begin(), through.end(), reader) == through.end()) through.push_back(reader);
        continue;
      }
      if (joins && i > 0) continue;  // (the collective's own readers are products or nothing)
      if (idx > 1 || !splits_backward(reader) || layouts.weight(r.inputs[static_cast<size_t>(idx)])) return {};
      if (!out.empty() && place.tasks(reader).tasks != place.tasks(out.front()).tasks) return {};
      // (ZeRO 3's gathers before use and reduce-scatters are replayed per
      // operator, not beside a collective: not modelled together.)
      if (gathers_for_use(reader)) return {};
      if (std::find(out.begin(), out.end(), reader) == out.end()) out.push_back(reader);
    }
  std::sort(out.begin(), out.end());
  walked.assign(through.begin() + 1, through.end());
  return out;
}

double Problem::weight_products_beside(NodeId id) const {
  double sum = 0;
  for (NodeId r : products_beside(id)) sum += weight_gradient_seconds(r);
  return sum;
}

double Problem::rerun_seconds(NodeId id, const Seconds& s) const { return recompute.recomputed[static_cast<size_t>(id)] ? s.forward : 0.0; }

bool Problem::rerun_beside_input_products(NodeId id) const {
  if (!recompute.recomputed[static_cast<size_t>(id)]) return false;
  std::vector<NodeId> through;
  const std::vector<NodeId> readers = products_beside(id, &through);
  auto reruns = [&](NodeId r) { return recompute.recomputed[static_cast<size_t>(r)] != 0; };
  return !readers.empty() && std::none_of(readers.begin(), readers.end(), reruns) && std::none_of(through.begin(), through.end(), reruns);
}

double Problem::input_products_beside_rerun(NodeId id) const {
  if (!rerun_beside_input_products(id)) return 0;
  const std::vector<NodeId> readers = products_beside(id);
  // The first output gradient in, last in the graph's order: the backward
  // pass runs readers first, a collective where its fused tail is.
  auto last_in = static_cast<NodeId>(g.size());
  for (NodeId r : readers)
    for (const auto& [c, idx] : consumers[static_cast<size_t>(r)])
      if (active[static_cast<size_t>(c)]) last_in = std::min(last_in, std::max(c, fused_tail[static_cast<size_t>(c)]));
  double sum = 0;
  for (NodeId r : readers)
    if (r < last_in) sum += weight_gradient_seconds(r);
  return sum;
}

Problem::Beside Problem::beside_products(const Placement& p, NodeId id, const Seconds& s) const {
  Beside b;
  if (products_beside(id).empty() || comm_levels(p, id) == 0) return b;
  const double products = weight_products_beside(id);
  const double rerun = rerun_seconds(id, s), backward = s.backward - rerun;
  b.left = std::max(0.0, backward - products);
  b.hidden = std::min(backward, products);
  b.hidden += std::min(rerun, input_products_beside_rerun(id));
  return b;
}

Seconds Problem::parallel_seconds(const Placement& p, NodeId id, int64_t lo) const {
  Seconds s;
  if (const NodeId tail = fused_tail[static_cast<size_t>(id)]; tail >= 0) {
    if (auto one = cost.layout_change_time(p, id, tail, lo)) {
      s = *one;
    } else {
      const Seconds a = cost.parallel_time(p, id, lo), b = cost.parallel_time(p, tail, lo);
      s = {a.forward + b.forward, a.backward + b.backward};
    }
  } else {
    s = cost.parallel_time(p, id, lo);
  }
  return with_recompute(s, recompute.recomputed[static_cast<size_t>(id)]);
}

double Problem::update_seconds(const Placement& p, NodeId id, int64_t lo) const {
  // Each weight layout updated once, by the node synchronizing it (its
  // first compute reader; a parameter's copy by its first layout's).
  double bytes = 0;
  for (size_t k : syncs[static_cast<size_t>(id)]) {
    const TensorRef i = g.node(id).inputs[k];
    if (held_as_copy(p, i, true)) continue;
    double share = shard_bytes(g.shape(i));
    if (shards_optimizer(cost.recipe().zero))
      if (const auto s = cost.sync_group(p, i, lo)) share /= static_cast<double>(s->group.size);
    bytes += share;
  }
  return cost.update_time(bytes);
}

double Problem::update_seconds_on(const Placement& p, NodeId id, int64_t device) const {
  const Node& n = g.node(id);
  const TaskTable& tt = p.tasks(id);
  const auto& dev = p.task_devices(id);
  const bool sharded = shards_optimizer(cost.recipe().zero);
  std::set<std::pair<size_t, int64_t>> seen;  // (input, shard or block)
  double bytes = 0;
  for (int64_t t = 0; t < tt.tasks; ++t) {
    if (dev[static_cast<size_t>(t)] != device) continue;
    for (size_t i : syncs[static_cast<size_t>(id)]) {
      const TensorRef w = n.inputs[i];
      if (held_as_copy(p, w, true)) continue;
      const ParallelTensorShape& s = g.shape(w);
      const int64_t shard = tt.input_shard[static_cast<size_t>(t)][i], blocks = s.num_blocks();
      if (!seen.insert({i, sharded ? shard % blocks : shard}).second) continue;
      bytes += shard_bytes(s) / (sharded ? static_cast<double>(p.block_holders(w, shard % blocks)) : 1.0);
    }
  }
  return cost.update_time(bytes);
}

bool Problem::takes_copy(NodeId id) const {
  const Node& n = g.node(id);
  if (n.inputs.size() != 1 || n.outputs.size() < 2) return false;
  std::vector<char> read(n.outputs.size(), 0);
  for (const auto& [c, idx] : consumers[static_cast<size_t>(id)]) read[static_cast<size_t>(g.node(c).inputs[static_cast<size_t>(idx)].output)] = 1;
  for (const TensorRef& o : g.outputs())
    if (o.node == id) read[static_cast<size_t>(o.output)] = 1;
  return std::find(read.begin(), read.end(), 0) != read.end();
}

Seconds Problem::shard_copies_seconds(const Placement& p, NodeId id, int64_t lo) const {
  // A Split taking one of its input's copies and leaving the others
  // unread is the first copy a pipeline stage takes of its boundary, whose
  // crossing the pipeline prices as Megatron-LM sends it, each device of
  // the group its own share (pipeline_timing.h); from the one device the
  // slot sits on it would be the whole tensor through one adapter, and
  // the joined plan cannot say the scattered send yet (docs/simulator.md).
  // Unpriced here, where it sends anything. A Split dealing out every slot
  // to its readers (unity's rules) sends each where it is read.
  if (takes_copy(id)) return {};
  return with_recompute(cost.parallel_time(p, id, lo), recompute.recomputed[static_cast<size_t>(id)]);
}

uint32_t Problem::comm_levels(const Placement& p, NodeId id) const {
  const Machine& m = cost.machine();
  uint32_t out = 0;
  auto cross = [&](int64_t a, int64_t b) {
    if (a == b) return;
    const auto l = static_cast<size_t>(&m.link_between(a, b) - m.links.data());
    if (l < 32) out |= uint32_t{1} << l;
  };
  const Node& n = g.node(id);
  // (A replica-axis Concat or Split: the copies it sends, shard_copies_seconds.)
  if (n.op->op_class == OpClass::kParallel || (n.op->is_shard_level(n.attrs) && !takes_copy(id))) {
    for (NodeId x : {id, fused_tail[static_cast<size_t>(id)]}) {
      if (x < 0) continue;
      const Node& node = g.node(x);
      for (const Move& mv : p.moves(x))
        cross(p.owner(node.inputs[static_cast<size_t>(mv.input)], mv.in_shard), p.owner({x, mv.output}, mv.out_shard));
    }
    return out;
  }
  if (n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs)) return out;
  const TaskTable& tt = p.tasks(id);
  const auto& dev = p.task_devices(id);
  for (int64_t t = 0; t < tt.tasks; ++t)
    for (size_t i = 0; i < n.inputs.size(); ++i) cross(p.owner(n.inputs[i], tt.input_shard[static_cast<size_t>(t)][i]), dev[static_cast<size_t>(t)]);
  return out;
}

Result Problem::comm(const Placement& p, NodeId id, int64_t lo) const {
  const Node& n = g.node(id);
  Result r = zero();
  Seconds s;
  if (n.op->op_class == OpClass::kParallel) {
    if (!is_tail[static_cast<size_t>(id)]) s = parallel_seconds(p, id, lo);
  } else if (n.op->is_shard_level(n.attrs)) {
    s = shard_copies_seconds(p, id, lo);
  } else {
    s = cost.input_transfer_time(p, id, lo);
    // Under ZeRO 2 each micro-batch's gradients are reduce-scattered
    // (SyncGroup::rounds); the weights are gathered once, after the update.
    for (const SyncGroup& x : sync_groups(p, id, lo)) r.sync += static_cast<double>(x.rounds) * cost.sync_share(x) + cost.gather_share(x);
  }
  r.comm = s.total(), r.backward = s.backward;
  // Sent while its reader computes its weight's gradient.
  if (n.op->op_class == OpClass::kParallel) {
    const double hidden = beside_products(p, id, s).hidden;
    r.comm -= hidden, r.backward -= hidden;
  }
  r.time = r.comm + r.sync;
  return r;
}

Result Problem::leaf(NodeId id, int64_t lo, int64_t size) const {
  const Node& n = g.node(id);
  if (task_count(g, n, consumers) > size) return {};
  Result r = comm(place, id, lo);
  if (n.op->op_class != OpClass::kParallel) {
    const Seconds c = task_seconds(id);
    r.update = update_seconds(place, id, lo);
    r.compute = c.total() + r.update;
    r.backward += c.backward;
  }
  r.time = r.compute + r.comm + r.sync;
  return r;
}

Result Problem::solve_leaf(NodeId id, int64_t lo, int64_t size) const {
  const Key key{local[static_cast<size_t>(id)], lo, size};
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  return leaf(id, lo, size);
}

}  // namespace pcgx::search
