// Memory per device of a mapped graph (see cost_model.h for what counts).
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "pcgx/search/machine_mapping.h"
#include "pcgx/pcg/attention_kernels.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/recompute_plan.h"
#include "pcgx/pcg/saved_tensors.h"
#include "pcgx/pcg/step_communication.h"

namespace pcgx::search {

namespace {

// The micro-batches whose activations a device keeps of a node's tensors:
// one count for every node, or per stage and chunk (`stage_held`, a
// pipeline schedule's: stage device / per_stage's row, the node's chunk).
struct InFlight {
  int64_t count = 1;
  std::span<const int64_t> chunk;  // per node; empty: one chunk
  const std::vector<std::vector<int64_t>>* stage_held = nullptr;
  int64_t per_stage = 1;

  int64_t of(NodeId n, int64_t device) const {
    if (!stage_held) return count;
    const size_t c = chunk.empty() ? 0 : static_cast<size_t>(chunk[static_cast<size_t>(n)]);
    const auto stage = std::min(static_cast<size_t>(device / per_stage), stage_held->size() - 1);
    return (*stage_held)[stage][c];
  }
};

std::vector<DeviceMemory> breakdown(const Placement& p, const TrainingRecipe& recipe, const InFlight& in_flight) {
  const Graph& g = p.graph();
  const int64_t devices = p.devices();
  const Precision precision = recipe.precision;
  std::vector<DeviceMemory> mem(static_cast<size_t>(devices));
  const SourceLayouts layouts = source_layouts(g);
  const RecomputePlan recompute = plan_recompute(g, layouts, recipe, in_flight.chunk);
  // What the step keeps for backward; the rest is freed after its last
  // forward reader (pcg/saved_tensors.h), a recomputed segment after the
  // last reader of any of its outputs.
  const OutputLives lives = output_lives(g, layouts, recompute);
  std::vector<NodeId> segment_end(static_cast<size_t>(recompute.segments), -1);
  for (const Node& n : g.nodes())
    if (const int32_t seg = recompute.segment[static_cast<size_t>(n.id)]; seg >= 0)
      segment_end[static_cast<size_t>(seg)] = std::max(segment_end[static_cast<size_t>(seg)], lives.last_reader[static_cast<size_t>(n.id)]);
  // The first operator of a layout change run in one step holds nothing
  // of its own: it writes its partner's output, which exists from then.
  const std::vector<NodeId> partner = layout_change_partners(g, layouts);
  std::vector<char> created(g.size(), 0);
  // Per recomputed segment, in node order: the output shards its re-run
  // creates, each held until its segment's backward is done, or freed
  // again once its last reader in the re-run has run (kRecomputedPassing).
  struct Recreated {
    NodeId node, free_at;
    int64_t device;
    double bytes;
  };
  std::vector<std::vector<Recreated>> segment(static_cast<size_t>(recompute.segments));
  // The forward pass, node by node in graph order as the runtime runs it:
  // per device, the freed and recomputed outputs alive now and the most
  // ever alive at once (each node's outputs exist before its inputs go);
  // per node, what goes after it has run.
  std::vector<double> live(static_cast<size_t>(devices), 0.0), forward_peak(static_cast<size_t>(devices), 0.0);
  std::vector<std::vector<std::pair<int64_t, double>>> frees(g.size());
  // A pipelined tensor is kept one micro-slice per micro-batch in flight:
  // on the device keeping it, of its node's chunk (InFlight::of).
  auto bytes = [&](const ParallelTensorShape& s, NodeId n, int64_t device) {
    const int64_t slices = s.slices();
    const int64_t k = in_flight.of(n, device);
    return activation_shard_bytes(s, precision) * static_cast<double>(std::min(slices, std::max<int64_t>(k, 1))) /
           static_cast<double>(slices);
  };
  // Grouped-query attention's head copies that a FlashAttention kernel
  // reads in place (attention_kernels.h): none written, the permutation
  // the kernel reads standing for the head it keeps.
  const AttentionKernels kernels = recipe.attention == AttentionKernel::kFlash ? find_attention_kernels(g, layouts) : AttentionKernels{};
  auto grouped_share = [&](NodeId n) {
    const int64_t copies = kernels.grouped_copies(n);
    return copies > 0 ? 1.0 / static_cast<double>(copies) : 1.0;
  };
  auto kept = [&](TensorRef t, int64_t d, const ParallelTensorShape& s) {
    // A FlashAttention kernel's inner tensors (the scores) never reach
    // memory: it holds a block of them at a time, in its own buffers.
    if (d < 0 || d >= devices || recompute.never_written(t.node)) return;
    if (kernels.grouped_copies(t.node) > 0 && !g.node(t.node).op->permutes) return;
    const double share = grouped_share(t.node);
    const auto dev = static_cast<size_t>(d);
    const OutputLife life = lives.at(t);
    if (life == OutputLife::kKept) {
      mem[dev].activations += share * bytes(s, t.node, d);
      return;
    }
    // Alive for one micro-batch at a time: forward until freed, and a
    // recomputed one again during its segment's backward.
    const double slice = share * activation_shard_bytes(s, precision) / static_cast<double>(s.slices());
    const int32_t seg = recompute.segment[static_cast<size_t>(t.node)];
    live[dev] += slice;
    forward_peak[dev] = std::max(forward_peak[dev], live[dev]);
    const bool held = life == OutputLife::kRecomputed;
    frees[static_cast<size_t>(held ? segment_end[static_cast<size_t>(seg)] : lives.last_reader[static_cast<size_t>(t.node)])].emplace_back(d, slice);
    if (life == OutputLife::kFreed) return;
    const NodeId free_at = held ? std::numeric_limits<NodeId>::max() : lives.rerun_last_reader[static_cast<size_t>(t.node)];
    segment[static_cast<size_t>(seg)].push_back({t.node, free_at, d, slice});
  };
  auto freed_after = [&](NodeId n) {
    for (const auto& [d, b] : frees[static_cast<size_t>(n)]) live[static_cast<size_t>(d)] -= b;
  };
  auto eager_softmax = [&](const Node& n) {
    return recipe.cross_entropy == CrossEntropyKernel::kEager && n.op->cross_entropy == CrossEntropyPart::kSoftmax;
  };
  const ParamBytes per = param_bytes(precision, recipe.optimizer, recipe.grad_precision);
  // Under ZeRO what the stage shards is split over the devices holding the
  // same block (`group` of them): one share per device, however many of
  // the block's replicas it holds (co-shard), as the runtime's buckets
  // keep it. What the stage does not shard is held per shard.
  // Each weight at its own stage (training_recipe.h's ZeroWeights); the
  // optimizer state is sharded for all or for none.
  const bool opt_sharded = shards_optimizer(recipe.zero);
  // At stage 3 a block below the persistence threshold stays whole.
  auto weight_sharded = [&](ZeroStage z, const ParallelTensorShape& s) { return gathers_for_use(z, recipe.zero_persistence_threshold, s.shard_elements()); };
  auto per_shard = [&](int64_t d, ZeroStage z, const ParallelTensorShape& s) {
    if (d < 0 || d >= devices) return;
    const bool grad_sharded = shards_gradients(z);
    const auto elements = static_cast<double>(s.shard_elements());
    DeviceMemory& m = mem[static_cast<size_t>(d)];
    if (!weight_sharded(z, s)) m.weights += elements * static_cast<double>(per.weight);
    if (!opt_sharded) m.master += elements * static_cast<double>(per.master);
    if (!grad_sharded) m.gradients += elements * static_cast<double>(per.gradient);
    // (fp32-cast: the backward's compute-precision gradient, whole on
    // every device holding the shard, whatever the stage shards.)
    m.gradients += elements * static_cast<double>(per.written);
    if (!opt_sharded) m.optimizer += elements * static_cast<double>(per.optimizer);
  };
  auto per_block = [&](int64_t d, ZeroStage z, const ParallelTensorShape& s, int64_t group) {
    if (d < 0 || d >= devices) return;
    const bool grad_sharded = shards_gradients(z);
    const auto elements = static_cast<double>(s.shard_elements());
    const double r = static_cast<double>(group);
    DeviceMemory& m = mem[static_cast<size_t>(d)];
    if (weight_sharded(z, s)) m.weights += elements * static_cast<double>(per.weight) / r;
    if (opt_sharded) m.master += elements * static_cast<double>(per.master) / r;
    if (grad_sharded) m.gradients += elements * static_cast<double>(per.gradient) / r;
    if (opt_sharded) m.optimizer += elements * static_cast<double>(per.optimizer) / r;
  };
  // The devices holding each weight block (its ZeRO group), found once per
  // block rather than per task reading it (every replica's task reads it).
  std::map<std::pair<TensorRef, int64_t>, int64_t> holders;
  auto block_holders = [&](TensorRef w, int64_t block) {
    const auto [it, fresh] = holders.try_emplace({w, block}, 0);
    if (fresh) it->second = p.block_holders(w, block);
    return it->second;
  };
  // Per weight layout (node, output), the shards counted already: a
  // replicated weight has a shard per device (3,072 at 3,072 devices),
  // which an ordered set of pairs spent most of its time inserting.
  std::vector<std::vector<std::vector<char>>> counted(g.size());
  auto first_read = [&](TensorRef w, int64_t shard) {
    auto& outs = counted[static_cast<size_t>(w.node)];
    if (outs.size() <= static_cast<size_t>(w.output)) outs.resize(static_cast<size_t>(w.output) + 1);
    auto& seen = outs[static_cast<size_t>(w.output)];
    if (seen.empty()) seen.assign(static_cast<size_t>(g.shape(w).num_shards()), 0);
    if (seen[static_cast<size_t>(shard)]) return false;
    seen[static_cast<size_t>(shard)] = 1;
    return true;
  };
  // A parameter read through several layouts (source_layout.h's
  // parameter_copies: a tied head's transposed table) is held once per
  // device per block of it, however many of the layouts' shards there
  // hold that block: (its first layout, the Weight's block, device).
  const std::map<TensorRef, ParameterCopy> copies = parameter_copy_map(g, layouts);
  std::map<TensorRef, WeightCopy> originals;
  for (const auto& [c, x] : copies) originals.emplace(x.of, x.original);
  std::set<std::tuple<TensorRef, int64_t, int64_t>> parameter_held;
  // Whether shard `shard` of weight layout w, on d, is to be counted: a
  // copy's only where its original holds none of that block (the
  // original's shards always, as any weight's).
  auto first_of_parameter = [&](TensorRef w, int64_t shard, int64_t d) {
    if (const auto o = originals.find(w); o != originals.end()) {
      parameter_held.insert({w, o->second.weight_block(g.shape(w), shard), d});
      return true;
    }
    const auto c = copies.find(w);
    return c == copies.end() || parameter_held.insert({c->second.of, c->second.copy.weight_block(g.shape(w), shard), d}).second;
  };
  std::set<std::tuple<TensorRef, int64_t, int64_t>> blocks_held;  // (weight, block, device) under ZeRO
  // ZeRO 3: per device, the weights each operator gathers there, in model
  // order (two operators' at most are held at once: cost_model.h).
  std::vector<std::vector<std::pair<NodeId, double>>> gathered(static_cast<size_t>(devices));
  std::set<std::tuple<TensorRef, int64_t, int64_t>> gathered_here;  // (weight, block, device): each block a device's tasks read
  for (const Node& n : g.nodes()) {
    gathered_here.clear();
    if (n.op->op_class == OpClass::kSource || layouts.is_layout(g, n.id)) {
      freed_after(n.id);
      continue;
    }
    if (n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs)) {
      const TaskTable& tt = p.tasks(n.id);
      const auto& dev = p.task_devices(n.id);
      for (int64_t t = 0; t < tt.tasks; ++t) {
        for (size_t o = 0; o < n.outputs.size(); ++o) kept({n.id, static_cast<int32_t>(o)}, dev[static_cast<size_t>(t)], n.outputs[o]);
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          const TensorRef w = n.inputs[i];
          const int64_t shard = tt.input_shard[static_cast<size_t>(t)][i];
          const int64_t d = p.owner(w, shard);
          if (!layouts.weight(w)) {
            // An activation shard read from another device: the task keeps
            // the copy it received for its backward pass (a pipeline
            // stage's boundary input, one per micro-batch in flight).
            const int64_t here = dev[static_cast<size_t>(t)];
            // (A grouped head's transposed copies, as kept: the head alone.)
            if (d != here && here >= 0 && here < devices) mem[static_cast<size_t>(here)].activations += grouped_share(w.node) * bytes(g.shape(w), n.id, here);  // (the reader's chunk)
            if (i == 0 && eager_softmax(n) && !recompute.recomputed[static_cast<size_t>(n.id)] && here >= 0 && here < devices) {
              // An eager cross-entropy keeps the FP32 probabilities in
              // place of the logits (counted as kept already where no
              // recomputation frees them), and while its forward runs
              // holds both (cross_entropy_kernel.h; FP32 logits are worked
              // in place).
              const ParallelTensorShape& s = g.shape(w);
              const int64_t logit_bytes = element_bytes(s.dtype, precision);
              const auto logit = static_cast<double>(logit_bytes);
              const double probabilities = eager_cross_entropy_passes(logit_bytes).kept_bytes;
              const double already = lives.at(w) == OutputLife::kKept ? logit : 0.0;
              const auto dv = static_cast<size_t>(here);
              mem[dv].activations += bytes(s, n.id, here) * (probabilities - already) / logit;
              if (probabilities != logit)
                forward_peak[dv] = std::max(forward_peak[dv], live[dv] + activation_shard_bytes(s, precision) / static_cast<double>(s.slices()));
            }
            continue;
          }
          const int64_t group = recipe.zero == ZeroStage::k0 ? 1 : block_holders(w, shard % g.shape(w).num_blocks());
          // Each weight shard once, on its owner: copies read by several
          // tasks there count once, and a co-sharded operator's shards
          // (several tasks on one device) each; what ZeRO shards, once per
          // block a device holds.
          const ZeroStage z = zero_of(g, recipe, w);
          if (first_read(w, shard) && first_of_parameter(w, shard, d)) {
            per_shard(d, z, g.shape(w));
            if (recipe.zero != ZeroStage::k0 && blocks_held.insert({w, shard % g.shape(w).num_blocks(), d}).second) per_block(d, z, g.shape(w), group);
          }
          if (weight_sharded(z, g.shape(w)) && group > 1 && d >= 0 && d < devices && gathered_here.insert({w, shard % g.shape(w).num_blocks(), d}).second) {
            auto& list = gathered[static_cast<size_t>(d)];
            if (list.empty() || list.back().first != n.id) list.emplace_back(n.id, 0.0);
            list.back().second += static_cast<double>(g.shape(w).shard_elements()) * static_cast<double>(per.weight);
          }
        }
      }
      freed_after(n.id);
      continue;
    }
    // Shard-level operators: their outputs live where their shards do.
    const NodeId writes = partner[static_cast<size_t>(n.id)] >= 0 ? partner[static_cast<size_t>(n.id)] : n.id;
    if (!created[static_cast<size_t>(writes)]) {
      created[static_cast<size_t>(writes)] = 1;
      const Node& w = g.node(writes);
      for (size_t o = 0; o < w.outputs.size(); ++o)
        for (int64_t d : p.owners({w.id, static_cast<int32_t>(o)})) kept({w.id, static_cast<int32_t>(o)}, d, w.outputs[o]);
    }
    freed_after(n.id);
  }
  // Beside the kept activations: the most the forward pass holds of the
  // rest at once, or one segment's re-run in its backward (node by node,
  // each node's outputs created before what it was the last to read goes).
  for (size_t d = 0; d < mem.size(); ++d) mem[d].transient = forward_peak[d];
  std::vector<double> rerun(static_cast<size_t>(devices), 0.0);
  for (const std::vector<Recreated>& rerun_list : segment) {
    std::vector<Recreated> goes = rerun_list;
    std::stable_sort(goes.begin(), goes.end(), [](const Recreated& a, const Recreated& b) { return a.free_at < b.free_at; });
    for (size_t a = 0, f = 0; a < rerun_list.size();) {
      const NodeId k = rerun_list[a].node;
      for (; a < rerun_list.size() && rerun_list[a].node == k; ++a) {
        double& held = rerun[static_cast<size_t>(rerun_list[a].device)];
        held += rerun_list[a].bytes;
        mem[static_cast<size_t>(rerun_list[a].device)].transient = std::max(mem[static_cast<size_t>(rerun_list[a].device)].transient, held);
      }
      for (; f < goes.size() && goes[f].free_at <= k; ++f) rerun[static_cast<size_t>(goes[f].device)] -= goes[f].bytes;
    }
    for (const Recreated& r : rerun_list) rerun[static_cast<size_t>(r.device)] = 0;
  }
  // ZeRO 3's gathered weights (during the backward pass too, so beside a
  // re-created segment): the most two consecutive operators hold.
  for (size_t d = 0; d < gathered.size(); ++d) {
    double most = 0;
    for (size_t k = 0; k < gathered[d].size(); ++k)
      most = std::max(most, gathered[d][k].second + (k + 1 < gathered[d].size() ? gathered[d][k + 1].second : 0.0));
    // At the turn to the backward pass the last operator's weights arrive
    // again while its forward copy is in use.
    if (!gathered[d].empty()) most = std::max(most, 2 * gathered[d].back().second);
    mem[d].transient += most;
  }
  // The update's FP32 copies of gradients kept in the compute precision:
  // one per parameter it updates, as many as the FP32 masters.
  if (is_mixed(precision) && recipe.grad_precision == GradPrecision::kCompute)
    for (DeviceMemory& m : mem) m.update_copies = m.master;
  return mem;
}

}  // namespace

std::vector<DeviceMemory> memory_breakdown(const Placement& p, const TrainingRecipe& recipe, int64_t in_flight) {
  return breakdown(p, recipe, InFlight{in_flight});
}

std::vector<DeviceMemory> memory_breakdown(const Placement& p, const TrainingRecipe& recipe, const PipelineShape& shape,
                                           std::span<const int64_t> chunk) {
  const int64_t devices = p.devices();
  if (shape.stages < 1 || devices < shape.stages || devices % shape.stages != 0)
    throw Error("memory: " + std::to_string(devices) + " devices do not split into " + std::to_string(shape.stages) + " pipeline stages");
  if (chunk.empty() && shape.chunks() > 1)
    throw Error("memory: a pipeline of " + std::to_string(shape.chunks()) + " chunks needs each node's chunk");
  if (!chunk.empty() && chunk.size() != p.graph().size())
    throw Error("memory: " + std::to_string(chunk.size()) + " chunks given for " + std::to_string(p.graph().size()) + " nodes");
  for (const int64_t c : chunk)
    if (c < 0 || c >= shape.chunks()) throw Error("memory: chunk " + std::to_string(c) + " of a pipeline of " + std::to_string(shape.chunks()));
  // Per stage, per chunk, the activation sets a device holds: one pass,
  // each device counting with its own stage's row.
  const std::vector<std::vector<int64_t>> held = activation_sets_held(shape, stage_programs(shape));
  InFlight k;
  k.chunk = chunk, k.stage_held = &held, k.per_stage = devices / shape.stages;
  return breakdown(p, recipe, k);
}

std::vector<double> memory_per_device(const Placement& p, const TrainingRecipe& recipe, int64_t in_flight) {
  std::vector<double> total;
  for (const DeviceMemory& m : memory_breakdown(p, recipe, in_flight)) total.push_back(m.total());
  return total;
}

std::vector<DeviceMemory> memory_breakdown(const Graph& g, const std::vector<MachineView>& views, int64_t devices,
                                           const TrainingRecipe& recipe, int64_t in_flight) {
  std::vector<MachineView> placed(views);
  placed.resize(g.size());
  return memory_breakdown(Placement(g, placed, devices), recipe, in_flight);
}

std::vector<double> memory_per_device(const Graph& g, const std::vector<MachineView>& views, int64_t devices,
                                      const TrainingRecipe& recipe, int64_t in_flight) {
  std::vector<double> total;
  for (const DeviceMemory& m : memory_breakdown(g, views, devices, recipe, in_flight)) total.push_back(m.total());
  return total;
}

}  // namespace pcgx::search
