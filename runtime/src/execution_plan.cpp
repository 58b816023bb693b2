#include "pcgx/runtime/execution_plan.h"

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/placement.h"
#include "micro_batches.h"

#include <algorithm>
#include <map>
#include <optional>

namespace pcgx::runtime {

int devices_needed(const Graph& g, std::span<const MachineView> views) {
  return static_cast<int>(Placement(g, views, 1).devices_needed());
}

double sharded_sync_extra_bytes(const ExecutionPlan& plan) {
  if (!shards_optimizer(plan.zero)) return 0;
  double floats = 0;
  for (const SyncBucket& b : plan.buckets) {
    const auto r = static_cast<int64_t>(b.devices.size());
    const double padded = static_cast<double>(r * ((b.floats + r - 1) / r));
    floats += 2.0 * static_cast<double>(r - 1) * (padded - static_cast<double>(b.floats));
    // Stage 3 gathers twice (before the forward and the backward) instead of once.
    if (b.gathered_for_use) floats += static_cast<double>(r - 1) * padded;
    // Over micro-batches, every micro-batch's reduce-scatter (and at stage
    // 3, its two gathers).
    if (b.every_micro_batch)
      floats += static_cast<double>(plan.micro_batches - 1) * static_cast<double>(r - 1) * padded * (b.gathered_for_use ? 3.0 : 1.0);
  }
  return floats * sizeof(float);
}

namespace {

// Buckets of the stored layouts' blocks, in weight order, one open bucket
// per group of devices; a block the plan's ZeRO stage gathers for use
// (training_recipe.h) is a bucket alone.
std::vector<SyncBucket> sync_buckets(const ExecutionPlan& plan, double bucket_bytes) {
  const Graph& g = *plan.graph;
  std::vector<SyncBucket> closed;
  std::map<std::tuple<std::vector<int>, bool, ZeroStage>, SyncBucket> open;  // by devices, every_micro_batch and stage
  const auto consumers = g.consumers();
  TrainingRecipe recipe;
  recipe.zero = plan.zero, recipe.zero_weights = plan.zero_weights;
  const std::vector<ZeroStage> stage = weight_zero_stages(g, plan.layouts, recipe);
  // Whether tensor t's gradient, at stage z, arrives with every micro-batch
  // to be synchronized: one of its readers runs per micro-batch.
  auto every = [&](TensorRef t, ZeroStage z) {
    if (!syncs_every_micro_batch(z) || plan.micro_batches <= 1) return false;
    for (const auto& [c, i] : consumers[static_cast<size_t>(t.node)]) {
      const StepPhase ph = plan.phase[static_cast<size_t>(c)];
      if (g.node(c).inputs[static_cast<size_t>(i)] == t && (ph == StepPhase::kMicro || ph == StepPhase::kAccumulate)) return true;
    }
    return false;
  };
  for (const Node& n : g.nodes()) {
    if (!n.op->is_weight || plan.parameter[static_cast<size_t>(n.id)].node == n.id) continue;
    const TensorRef t = plan.parameter[static_cast<size_t>(n.id)];
    const ParallelTensorShape& s = g.shape(t);
    const ZeroStage z = stage[static_cast<size_t>(n.id)];
    const int64_t blocks = s.num_blocks();
    for (int64_t b = 0; b < blocks; ++b) {
      SyncPart part{t, {}, s.shard_elements()};
      std::vector<int> devices;
      for (int64_t c = 0; c < s.replica; ++c) {
        part.shards.push_back(c * blocks + b);
        devices.push_back(plan.owner(t, c * blocks + b));
      }
      std::sort(devices.begin(), devices.end());
      devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
      if (gathers_for_use(z, plan.zero_persistence_threshold, part.floats)) {
        closed.push_back({devices, {}, part.floats, true, every(t, z), z});
        closed.back().parts.push_back(std::move(part));
        continue;
      }
      const std::tuple<std::vector<int>, bool, ZeroStage> key{devices, every(t, z), z};
      SyncBucket& bucket = open[key];
      bucket.devices = devices;
      bucket.every_micro_batch = std::get<1>(key);
      bucket.zero = z;
      bucket.floats += part.floats;
      bucket.parts.push_back(std::move(part));
      if (static_cast<double>(bucket.floats) * sizeof(float) >= bucket_bytes) closed.push_back(std::move(bucket)), open.erase(key);
    }
  }
  for (auto& [key, bucket] : open) closed.push_back(std::move(bucket));
  return closed;
}

}  // namespace

ExecutionPlan make_plan(const Graph& g, std::span<const MachineView> views, int devices, double bucket_bytes) {
  ExecutionPlan plan;
  plan.graph = &g;
  plan.devices = devices;
  plan.nodes.resize(g.size());
  plan.layouts = source_layouts(g);
  const Placement place(g, views, devices);
  std::vector<NodeRun> runs = node_runs(place, plan.layouts);
  for (const Node& n : g.nodes()) {
    NodePlan& np = plan.nodes[static_cast<size_t>(n.id)];
    NodeRun& r = runs[static_cast<size_t>(n.id)];
    np.run = r.kind, np.to = r.to, np.pieces = std::move(r.pieces), np.groups = std::move(r.groups);
    if (np.run == NodePlan::Run::kMoves) np.moves = place.moves(n.id);
    if (np.run == NodePlan::Run::kTasks) {
      if (!n.op->kernel_f32 || !n.op->grad_f32) throw Error(describe(n) + ": the runtime has no kernel or gradient rule for it");
      np.tasks = place.tasks(n.id);
      const auto& dev = place.task_devices(n.id);
      for (int64_t t = 0; t < np.tasks.tasks; ++t) {
        const int64_t d = dev[static_cast<size_t>(t)];
        if (d >= devices)
          throw Error(describe(n) + ": task " + std::to_string(t) + " runs on device " + std::to_string(d) +
                      ", but only " + std::to_string(devices) + " devices are available (the strategy needs " +
                      std::to_string(place.devices_needed()) + ")");
        np.task_device.push_back(static_cast<int>(d));
      }
    }
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const auto& own = place.owners({n.id, static_cast<int32_t>(o)});
      np.owner.emplace_back(own.begin(), own.end());
    }
  }
  plan_micro_batches(plan);
  plan.parameter = parameter_tensors(g, plan.layouts);
  plan.buckets = sync_buckets(plan, bucket_bytes);
  set_recompute(plan, Recompute::kNone);  // what the step frees
  return plan;
}

void set_zero(ExecutionPlan& plan, ZeroStage zero, int64_t persistence_threshold, const ZeroWeights& groups, double bucket_bytes) {
  if (persistence_threshold < 0) throw FieldError("TrainOptions.zero_persistence_threshold", "must not be negative");
  if (const auto why = zero_weights_problem(zero, groups)) throw FieldError("TrainOptions.zero_weights", *why);
  plan.zero = zero;
  plan.zero_weights = groups;
  sort_zero_weights(plan.zero_weights);
  plan.zero_persistence_threshold = shards_weights(highest_zero(zero, groups)) ? persistence_threshold : 0;
  plan.buckets = sync_buckets(plan, bucket_bytes);
}

}  // namespace pcgx::runtime
