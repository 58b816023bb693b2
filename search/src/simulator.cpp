// The task graph of a mapped PCG and its delta re-simulation (see
// simulator.h).
#include "pcgx/search/simulator.h"

#include <algorithm>
#include <set>

#include "pcgx/pcg/error.h"
#include "simulator_impl.h"

namespace pcgx::search {

const char* to_string(SimKind k) {
  switch (k) {
    case SimKind::kForward: return "forward";
    case SimKind::kBackward: return "backward";
    case SimKind::kTransfer: return "transfer";
    case SimKind::kGradientTransfer: return "gradient transfer";
    case SimKind::kCollective: return "collective";
    case SimKind::kSync: return "gradient sync";
    case SimKind::kUpdate: return "update";
    case SimKind::kOverhead: return "overhead";
    case SimKind::kGather: return "weight gather";
    case SimKind::kShardGather: return "weight gather before use";
    case SimKind::kWeightGradient: return "weight gradient";
    case SimKind::kGatherIssue: return "weight gathers issued";
  }
  return "?";
}

Simulator::Simulator(const Graph& g, std::vector<MachineView> views, const CostModel& cost, std::optional<PipelineShape> pipeline)
    : impl_(std::make_unique<Impl>(g, std::move(views), cost)) {
  impl_->asked = pipeline;
  rebuild();
}

std::optional<PipelineShape> Simulator::pipeline() const {
  if (!impl_->pipe) return std::nullopt;
  return impl_->pipe->shape;
}

std::vector<DeviceMemory> Simulator::memory_breakdown() const {
  const Impl& x = *impl_;
  if (!x.pipe) return search::memory_breakdown(*x.place, recipe());
  return search::memory_breakdown(*x.place, recipe(), x.pipe->shape, x.pipe->chunk);
}

std::vector<double> Simulator::memory() const {
  std::vector<double> out;
  for (const DeviceMemory& m : memory_breakdown()) out.push_back(m.total());
  return out;
}

std::string Simulator::label(TaskId t) const {
  const SimTaskInfo& k = info(t);
  if (k.kind == SimKind::kSync) return "gradient bucket " + std::to_string(k.index);
  if (k.kind == SimKind::kGather)
    return "weight gather of bucket " + std::to_string(k.index) + (k.node >= 0 ? " beside the forward pass" : " after the update");
  if (k.kind == SimKind::kGatherIssue) return "chunk " + std::to_string(k.chunk) + "'s weight gathers issued";
  if (k.kind == SimKind::kShardGather)
    return describe(graph().node(k.node)) + " weight gather before " + (k.index == 0 ? "forward" : "backward");
  if (k.kind == SimKind::kCollective && k.index == 2) return describe(graph().node(k.node)) + " collective re-run in backward";
  if (k.kind == SimKind::kUpdate || k.kind == SimKind::kOverhead) return std::string(to_string(k.kind)) + " on device " + std::to_string(k.device);
  if (k.node < 0)
    return "chunk " + std::to_string(k.chunk) + " " + to_string(k.kind) +
           (k.micro_batch < 0 ? std::string(" once per step") : " of micro-batch " + std::to_string(k.micro_batch));
  return describe(graph().node(k.node)) + " " + to_string(k.kind) + " " + std::to_string(k.index);
}
Simulator::~Simulator() = default;

const std::vector<MachineView>& Simulator::views() const { return impl_->views; }
const Graph& Simulator::graph() const { return impl_->g; }
int64_t Simulator::devices() const { return impl_->D; }
double Simulator::capacity() const { return impl_->cost.machine().device.memory_capacity; }
const TrainingRecipe& Simulator::recipe() const { return impl_->cost.recipe(); }
double Simulator::step_bytes() const {
  const Impl& x = *impl_;
  return x.problem.step_bytes(*x.place, x.pipe && x.pipe->shape.in_flight());
}

void Simulator::rebuild() {
  Impl& x = *impl_;
  timeline_ = Timeline(x.resources());
  info_.clear();
  x.place = std::make_unique<Placement>(x.g, x.views, x.D);
  if (!x.build_pipelined(timeline_, info_)) {
    x.build_structure(timeline_, info_);
    for (const Node& n : x.g.nodes()) x.cost_node(n.id, timeline_);
  }
  x.build_tail(timeline_, info_);
  timeline_.simulate_full();
  rebuilt_ = static_cast<int64_t>(timeline_.size());
}

void Simulator::set_view(NodeId n, const MachineView& v) {
  Impl& x = *impl_;
  if (n < 0 || static_cast<size_t>(n) >= x.g.size()) throw Error("simulate: no node " + std::to_string(n));
  x.views[static_cast<size_t>(n)] = v;
  // Chunk bodies are simulated whole, and the weight gathers beside the
  // forward pass follow the buckets: build again.
  if (x.graph_micro_batches() > 1 || x.param_gathers_in_structure()) {
    rebuild();
    return;
  }
  x.place->set_view(n, v);
  int64_t touched = 0;
  for (NodeId a : x.affected(n)) {
    const Impl::Unit& u = x.units[static_cast<size_t>(a)];
    touched += u.shape == Impl::Unit::kTasks ? 2 * u.tasks * (1 + u.inputs) : u.shape == Impl::Unit::kSingle ? 2 : 0;
    x.cost_node(a, timeline_);
  }
  timeline_.truncate(x.tail_start);
  info_.resize(static_cast<size_t>(x.tail_start));
  x.build_tail(timeline_, info_);
  rebuilt_ = touched + static_cast<int64_t>(timeline_.size()) - x.tail_start;
  timeline_.simulate_delta();
}

std::string Simulator::resource_name(ResourceId r) const {
  const Impl& x = *impl_;
  if (r < x.D) return "device " + std::to_string(r);
  if (r >= x.gather_base) return "gather channel of device " + std::to_string(r - x.gather_base);
  if (r >= x.sync_base) return "sync channel of device " + std::to_string(r - x.sync_base);
  const auto& links = x.cost.machine().links;
  size_t l = links.size() - 1;
  while (l > 0 && r < x.port_base[l]) --l;
  const int64_t index = r - x.port_base[l];
  if (l == 0) return links[0].name + " port of device " + std::to_string(index);
  const int64_t group = index / x.adapters(l), adapter = index % x.adapters(l);
  const int64_t span = links[l - 1].span <= 0 ? x.D : links[l - 1].span;
  return links[l].name + " adapter " + std::to_string(adapter) + " of devices " + std::to_string(group * span) + "-" +
         std::to_string(std::min(x.D, (group + 1) * span) - 1);
}

SimulationSummary Simulator::summary() const {
  const Impl& x = *impl_;
  SimulationSummary s;
  s.time = timeline_.makespan();
  s.tasks = static_cast<int64_t>(timeline_.size());
  s.buckets = x.buckets;
  if (shards_weights(highest_zero(x.cost.recipe())))
    for (const Node& n : x.g.nodes()) s.gathered_for_use += x.gathers(n);
  s.devices.assign(static_cast<size_t>(x.D), {});
  std::vector<char> used(static_cast<size_t>(x.D), 0);
  for (size_t i = 0; i < timeline_.size(); ++i) {
    const TimedTask& t = timeline_.task(static_cast<TaskId>(i));
    const SimTaskInfo& k = info_[i];
    const Impl::Body* body = x.body(i);
    if (k.kind == SimKind::kSync || k.kind == SimKind::kShardGather) s.sync_total += t.duration;  // the sync channel's
    else if (k.communication()) s.communication_total += t.duration;
    else if (body) s.communication_total += body->communication_total;
    for (ResourceId r : t.resources) {
      if (r < x.D) {
        s.devices[static_cast<size_t>(r)].compute += t.duration;
        if (k.kind == SimKind::kForward && t.duration > 0) used[static_cast<size_t>(r)] = 1;
      } else if (r >= x.sync_base) {  // (the sync or the gather channel)
        s.devices[static_cast<size_t>((r - x.sync_base) % x.D)].sync += t.duration;
      }
    }
  }
  double passes_end = 0, sync_end = 0;
  for (size_t i = 0; i < timeline_.size(); ++i) {
    const SimKind k = info_[i].kind;
    const double end = timeline_.task(static_cast<TaskId>(i)).end;
    if (k == SimKind::kSync) sync_end = std::max(sync_end, end);
    else if (k != SimKind::kUpdate && k != SimKind::kGather && k != SimKind::kOverhead && k != SimKind::kShardGather)
      passes_end = std::max(passes_end, end);
  }
  s.sync_past = std::max(0.0, sync_end - passes_end);
  for (DeviceSummary& d : s.devices) d.idle = std::max(0.0, s.time - d.compute);
  s.devices_used = std::count(used.begin(), used.end(), 1);
  s.critical_path = timeline_.critical_path();
  for (TaskId t : s.critical_path) {
    const double d = timeline_.task(t).duration;
    const SimKind k = info_[static_cast<size_t>(t)].kind;
    if (const Impl::Body* b = x.body(static_cast<size_t>(t))) {  // a chunk step: its body's own critical path
      s.communication += b->communication, s.compute += d - b->communication;
      if (k == SimKind::kBackward) s.backward += d;
      continue;
    }
    if (k == SimKind::kBackward || k == SimKind::kWeightGradient || k == SimKind::kGradientTransfer || (k == SimKind::kCollective && info_[static_cast<size_t>(t)].index >= 1))
      s.backward += d;
    // A bucket held back on its links by the backward's own collectives
    // (in the background, timeline.h): that wait is communication.
    if (const TimedTask& task = timeline_.task(t); !task.background.empty()) s.communication += std::max(0.0, task.end - task.start - d);
    if (k == SimKind::kSync || k == SimKind::kShardGather) s.sync += d;
    else if (info_[static_cast<size_t>(t)].communication()) s.communication += d;
    else s.compute += d;
    if (k == SimKind::kGather) s.gather += d;
    if (k == SimKind::kUpdate) s.update += d;
    if (k == SimKind::kOverhead) s.overhead += d;
  }
  return s;
}

Estimate simulated_estimate(const Simulator& s) {
  const SimulationSummary sum = s.summary();
  Estimate e;
  e.time = sum.time;
  // Exposed sync as the cost model counts it: past the backward pass.
  e.compute = sum.compute, e.update = sum.update, e.overhead = sum.overhead, e.once = sum.update + sum.sync_past + sum.gather;
  e.gather = sum.gather;
  e.backward = sum.backward;
  e.communication = sum.communication + sum.sync;
  e.sync = sum.sync_total, e.sync_hidden = std::max(0.0, sum.sync_total - sum.sync_past), e.buckets = sum.buckets;
  e.gathered_for_use = sum.gathered_for_use;
  double idle = 0;
  for (const DeviceSummary& d : sum.devices) idle += d.idle;
  e.idle = sum.devices.empty() ? 0 : idle / static_cast<double>(sum.devices.size());
  e.devices_used = sum.devices_used;
  e.memory = s.memory();
  e.bytes = s.step_bytes();
  const double cap = s.capacity();
  if (e.max_memory() > cap) {
    e.infeasible = "a device needs " + std::to_string(e.max_memory() / 1073741824.0) + " GiB of " + std::to_string(cap / 1073741824.0) + " GiB";
    e.time = std::numeric_limits<double>::infinity();
    return e;
  }
  e.feasible = true;
  return e;
}

}  // namespace pcgx::search
