#pragma once
// The simulator's task graph builder (simulator.h), shared by its files:
// simulator.cpp builds one iteration's tasks node by node,
// simulator_pipeline.cpp runs a pipelined graph's micro-batches in the
// order of its pipeline schedule.
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "mapping_problem.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/search/simulator.h"

namespace pcgx::search {

// order = phase | position | sub-index (timeline.h: a topological order).
constexpr int kSubBits = 40;
constexpr uint64_t kRegion = uint64_t{1} << 26;  // sub-indices of one kind of task in a unit
// A pipelined step expanded task by task (simulator_pipeline.cpp): its i-th
// task at sub-index (i + 1) << kSlotBits, the gradient buckets it closes in
// the slots after it, and the step's end at kStepEnd.
constexpr int kSlotBits = 12;
constexpr uint64_t kStepEnd = uint64_t{1} << (kSubBits - 1);
inline uint64_t order_of(uint64_t phase, uint64_t position, uint64_t sub) { return phase << 62 | position << kSubBits | sub; }


struct Simulator::Impl {
  const Graph& g;
  const CostModel& cost;
  Cache cache;
  Problem problem;  // which nodes run, fused layout changes, who synchronizes which weight
  std::vector<MachineView> views;
  std::unique_ptr<Placement> place;
  std::vector<NodeId> head;  // per node: the node whose tasks stand for its own (a fused tail: its head)
  int64_t D;
  std::vector<int32_t> port_base;  // per link level: first port resource
  int32_t sync_base = 0;
  // ZeRO 3's gathers before use have a channel of their own per device,
  // after the sync channels (FSDP and DeepSpeed all-gather on a stream
  // apart from their reduce-scatters): resources() counts it only then.
  int32_t gather_base = 0;
  int32_t resources() const { return gather_base + (gathers_any() ? static_cast<int32_t>(D) : 0); }

  // Per node: where its tasks are in the timeline.
  struct Unit {
    enum Shape : uint8_t { kNone, kTasks, kSingle } shape = kNone;
    TaskId fwd_transfer = -1, fwd_compute = -1, bwd_compute = -1, bwd_transfer = -1;  // kTasks
    TaskId fwd = -1, bwd = -1;                                                        // kSingle
    TaskId fwd_gather = -1, bwd_gather = -1;  // ZeRO 3: its weights gathered before each pass (kTasks)
    // Its weight's product after its input's (TrainingRecipe::overlap_grad_input):
    // bwd_compute computes the input's gradient, bwd_weight the weight's (kTasks).
    TaskId bwd_weight = -1;
    // A recomputed collective's re-run, before its backward where products
    // run beside it (kSingle); -1: in bwd.
    TaskId bwd_rerun = -1;
    int64_t tasks = 0, inputs = 0;
    // The task of task t's backward after which its weights' gradients are complete.
    TaskId gradients_done(int64_t t) const { return (bwd_weight >= 0 ? bwd_weight : bwd_compute) + static_cast<TaskId>(t); }
  };
  std::vector<Unit> units;
  // Per split product: the node at whose backward position its weight
  // product runs (its collective's last), and its sub-index offset there
  // ({-1, 0}: not split).
  std::vector<std::pair<NodeId, uint64_t>> weight_product_at;
  TaskId tail_start = 0;  // buckets and updates, rebuilt on every change
  int64_t buckets = 0;
  // ZeRO's weights gathered beside the next forward pass
  // (TrainingRecipe::overlap_param_gather, gradient_sync.h's
  // replay_param_gathers): a gather task per bucket, in the order the
  // forward pass first reads the buckets, one chain per set of devices
  // (each pipeline stage's devices gather their own weights, as each
  // rank's distributed optimizer does): each issued at the first reader
  // of the one before it in its chain (the first at its own), after what
  // that reader waits for; each reader's first forward waits for its
  // buckets'. Part of the structure (empty: gathered after the update,
  // in the tail).
  struct ParamGather {
    double seconds = 0;
    std::vector<ResourceId> resources;  // its members' sync channels
    NodeId first = -1;                  // the first node reading it in the forward pass
    int32_t before = -1;                // the one before it in its chain (-1: none)
    NodeId issuer = -1;                 // the node issuing it: `before`'s first, else its own
    std::vector<int64_t> devices;       // its chain's devices
    TaskId task = -1;
  };
  std::vector<ParamGather> param_gathers;
  std::vector<std::vector<int32_t>> param_buckets_of;  // per node: the param_gathers its weights are in
  // Per node of a pipelined graph, its chunk: a bucket never spans two
  // (each model chunk's buffers hold its own, as Megatron-LM's do, and as
  // the estimate maps each chunk alone). Empty: one chunk.
  std::vector<int64_t> gather_chunks;
  // Under the interleaved schedule (not GPipe or a written order with
  // several chunks per stage: chained), a chunk's gathers are issued together
  // (param_gathers.h, Megatron-LM's --align-param-gather): each after the
  // one before it in its chain only, not at a reader (build_pipelined adds
  // when the stage issues them).
  bool aligned_gathers = false;
  // Fills param_gathers and param_buckets_of from the current placement
  // (the buckets the tail closes, simulator_tail.cpp).
  void plan_param_gathers();
  bool param_gathers_in_structure() const;

  // A pipelined graph (simulator_pipeline.cpp): its micro-batches run
  // through chunk bodies, one task per stage program step.
  struct Body {
    double duration = 0;               // one micro-batch through the chunk, one way
    double compute = 0, communication = 0;  // along the body's critical path
    double communication_total = 0;    // over all of its tasks
  };
  struct Pipelined {
    PipelineShape shape;
    std::vector<int64_t> chunk;                    // per node
    std::vector<TaskId> last_backward;             // per chunk: its once-per-step backward, after its last micro-batch's
    std::vector<uint64_t> last_backward_position;  // per chunk: the order position of its last micro-batch's backward
    // A micro-batch's backward of every chunk run task by task (the
    // gradient buckets start inside it): the last micro-batch's, and under
    // ZeRO 2 and 3 (training_recipe.h: each micro-batch's gradients synchronized)
    // every micro-batch's, in micro-batch order.
    struct Expanded {
      int64_t micro_batch = 0;
      std::vector<TaskId> task;        // per task of the one-micro-batch graph: its copy; -1 for the rest
      std::vector<uint64_t> last;      // per node: the sub-index of its last task (0: none)
      std::vector<TaskId> end;         // per chunk: the task that ends its expansion
      std::vector<uint64_t> position;  // per chunk: that backward step's order position
    };
    std::vector<Expanded> expanded;
    uint64_t end_position = 0;                     // after every step
    std::vector<Body> bodies;
    std::vector<int32_t> body_of;                  // per task: its body, -1 for none
  };
  std::optional<PipelineShape> asked;  // the constructor's
  std::optional<Pipelined> pipe;
  // The body a chunk step runs; nullptr for every other task.
  const Body* body(size_t task) const {
    if (!pipe || task >= pipe->body_of.size() || pipe->body_of[task] < 0) return nullptr;
    return &pipe->bodies[static_cast<size_t>(pipe->body_of[task])];
  }
  // The micro-batches of the graph (the slices of its pipelined tensors).
  int64_t graph_micro_batches() const;
  // Builds the pipelined task graph (pipe set) when the graph has
  // micro-batches; false otherwise.
  bool build_pipelined(Timeline& tl, std::vector<SimTaskInfo>& info);
  // Per node, its chunk in model order (pipeline_schedule.h).
  std::vector<int64_t> node_chunks(const PipelineShape& p) const;

  Impl(const Graph& graph, std::vector<MachineView> v, const CostModel& cm)
      : g(graph), cost(cm), problem(graph, cm, cache), views(std::move(v)), D(cm.devices()) {
    views.resize(g.size());
    head.resize(g.size());
    for (const Node& n : g.nodes()) head[static_cast<size_t>(n.id)] = n.id;
    for (const Node& n : g.nodes())
      if (const NodeId h = problem.fused_head[static_cast<size_t>(n.id)]; h >= 0) head[static_cast<size_t>(n.id)] = h;
    const Machine& m = cost.machine();
    int32_t next = static_cast<int32_t>(D);
    for (size_t l = 0; l < m.links.size(); ++l) {
      port_base.push_back(next);
      next += static_cast<int32_t>(groups_below(l) * adapters(l));
    }
    sync_base = next;
    gather_base = sync_base + static_cast<int32_t>(D);
  }

  int64_t groups_below(size_t level) const {
    if (level == 0) return D;
    const int64_t span = cost.machine().links[level - 1].span;
    return span <= 0 ? 1 : (D + span - 1) / span;
  }
  // Links of a level-l group into the level above it (a node's network
  // adapters): device d uses adapter (d's place in its group) mod their
  // count, as a GPU uses the adapter next to it. The first level: one per device.
  int64_t adapters(size_t level) const { return level == 0 ? 1 : std::max<int64_t>(1, cost.machine().links[level].ports); }
  int64_t group_below(size_t level, int64_t device) const {
    if (level == 0) return device;
    const int64_t span = cost.machine().links[level - 1].span;
    return span <= 0 ? 0 : device / span;
  }
  size_t level_between(int64_t a, int64_t b) const {
    const auto& links = cost.machine().links;
    for (size_t l = 0; l < links.size(); ++l)
      if (links[l].span <= 0 || a / links[l].span == b / links[l].span) return l;
    return links.size() - 1;
  }
  ResourceId port(size_t level, int64_t device) const {
    int64_t local = 0;
    if (level > 0) {
      const int64_t span = cost.machine().links[level - 1].span;
      local = (span <= 0 ? device : device % span) % adapters(level);
    }
    return port_base[level] + static_cast<ResourceId>(group_below(level, device) * adapters(level) + local);
  }
  void check_device(int64_t d, NodeId n) const {
    if (d < 0 || d >= D)
      throw Error("simulate: " + describe(g.node(n)) + " runs a task on device " + std::to_string(d) + " but the machine has " +
                  std::to_string(D) + " devices");
  }
  bool active(NodeId n) const { return problem.active[static_cast<size_t>(n)]; }
  // Throws unless `n` positions fit an order (order_of).
  static void check_positions(uint64_t n) {
    if (n >= uint64_t{1} << (62 - kSubBits))
      throw Error("simulate: " + std::to_string(n) + " operators or pipeline steps are more than the simulator orders (" +
                  std::to_string(uint64_t{1} << (62 - kSubBits)) + ")");
  }
  bool task_node(const Node& n) const { return n.op->op_class == OpClass::kCompute && !n.op->is_shard_level(n.attrs); }
  // The node whose tasks stand for n's (a fused layout change's tail: its head).
  NodeId runner(NodeId n) const { return head[static_cast<size_t>(n)]; }
  // The node whose output a fused head's readers read.
  NodeId last_of(NodeId n) const {
    const NodeId t = problem.fused_tail[static_cast<size_t>(n)];
    return t >= 0 ? t : n;
  }

  // The forward task that produces shard `s` of `t`; -1 when it is there from the start.
  TaskId producer(TensorRef t, int64_t s) const {
    if (!active(t.node)) return -1;
    const Unit& u = units[static_cast<size_t>(runner(t.node))];
    if (u.shape == Unit::kSingle) return u.fwd;
    return u.fwd_compute + static_cast<TaskId>(s);  // task s writes output shard s (degree_inference.h)
  }

  // Per task node and input, its tasks grouped by the shard of that input
  // they read, ascending (tasks reading shard s: tasks[start[s] ..
  // start[s + 1]]), so that finding the readers of one shard does not scan
  // every task of the reader: at 3,072 devices that scan was quadratic.
  struct ShardReaders {
    std::vector<int32_t> start, tasks;
  };
  std::vector<std::vector<ShardReaders>> shard_readers;  // [node][input]
  void index_shard_readers() {
    shard_readers.assign(g.size(), {});
    for (const Node& n : g.nodes()) {
      if (units[static_cast<size_t>(n.id)].shape != Unit::kTasks) continue;
      const TaskTable& tt = place->tasks(n.id);
      auto& inputs = shard_readers[static_cast<size_t>(n.id)];
      inputs.resize(n.inputs.size());
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        ShardReaders& x = inputs[i];
        x.start.assign(static_cast<size_t>(g.shape(n.inputs[i]).num_shards()) + 1, 0);
        for (int64_t k = 0; k < tt.tasks; ++k) ++x.start[static_cast<size_t>(tt.input_shard[static_cast<size_t>(k)][i]) + 1];
        for (size_t s = 1; s < x.start.size(); ++s) x.start[s] += x.start[s - 1];
        x.tasks.resize(static_cast<size_t>(tt.tasks));
        std::vector<int32_t> at(x.start.begin(), x.start.end() - 1);
        for (int64_t k = 0; k < tt.tasks; ++k)
          x.tasks[static_cast<size_t>(at[static_cast<size_t>(tt.input_shard[static_cast<size_t>(k)][i])]++)] = static_cast<int32_t>(k);
      }
    }
  }

  // The backward tasks that hand back the gradient of shard `s` of `t`
  // (every shard when s < 0).
  void gradient_sources(TensorRef t, int64_t s, std::vector<TaskId>& out) const {
    for (const auto& [c, idx] : problem.consumers[static_cast<size_t>(t.node)]) {
      const Node& reader = g.node(c);
      if (reader.inputs[static_cast<size_t>(idx)] != t || !active(c)) continue;
      const Unit& u = units[static_cast<size_t>(runner(c))];
      if (u.shape == Unit::kSingle) {
        out.push_back(u.bwd);
        continue;
      }
      if (s < 0) {
        for (int64_t k = 0; k < u.tasks; ++k) out.push_back(u.bwd_transfer + static_cast<TaskId>(k * u.inputs + idx));
        continue;
      }
      const ShardReaders& x = shard_readers[static_cast<size_t>(c)][static_cast<size_t>(idx)];
      for (int32_t j = x.start[static_cast<size_t>(s)]; j < x.start[static_cast<size_t>(s) + 1]; ++j)
        out.push_back(u.bwd_transfer + static_cast<TaskId>(x.tasks[static_cast<size_t>(j)] * u.inputs + idx));
    }
  }

  // Whether node n gathers its weights before each pass (ZeRO 3).
  bool gathers(const Node& n) const {
    return task_node(n) && problem.gathers_for_use(n.id);
  }
  // Whether any node does: ZeRO 3 with every block under the persistence
  // threshold gathers nothing before use, and runs as stage 2 does (its
  // buckets beside the backward pass), as the cost model prices it.
  bool gathers_any() const {
    return shards_weights(highest_zero(cost.recipe())) && std::any_of(g.nodes().begin(), g.nodes().end(), [&](const Node& n) { return gathers(n); });
  }

  // The tasks of every node, without costs (the structure does not depend on the views).
  void build_structure(Timeline& tl, std::vector<SimTaskInfo>& info);

  std::vector<ResourceId> transfer_ports(int64_t a, int64_t b) const {
    const size_t l = level_between(a, b);
    std::vector<ResourceId> r{port(l, a), port(l, b)};
    if (r[0] == r[1]) r.pop_back();
    return r;
  }
  void add_pair_ports(int64_t a, int64_t b, std::set<ResourceId>& out) const {
    if (a == b) return;
    for (ResourceId r : transfer_ports(a, b)) out.insert(r);
  }
  void add_move_ports(NodeId n, std::set<ResourceId>& out) const {
    const Node& node = g.node(n);
    for (const Move& m : place->moves(n))
      add_pair_ports(place->owner(node.inputs[static_cast<size_t>(m.input)], m.in_shard), place->owner({n, m.output}, m.out_shard), out);
  }

  // Sets the durations and resources of node n's tasks from the current views.
  void cost_node(NodeId id, Timeline& tl) {
    const Unit& u = units[static_cast<size_t>(id)];
    const Node& n = g.node(id);
    if (u.shape == Unit::kTasks) {
      const TaskTable& tt = place->tasks(id);
      const auto& dev = place->task_devices(id);
      const Seconds c = problem.task_seconds(id);
      const double weight_product = u.bwd_weight >= 0 ? problem.weight_gradient_seconds(id) : 0.0;
      for (int64_t t = 0; t < u.tasks; ++t) {
        const int64_t d = dev[static_cast<size_t>(t)];
        check_device(d, id);
        tl.set_cost(u.fwd_compute + static_cast<TaskId>(t), c.forward, {static_cast<ResourceId>(d)});
        tl.set_cost(u.bwd_compute + static_cast<TaskId>(t), c.backward - weight_product, {static_cast<ResourceId>(d)});
        if (u.bwd_weight >= 0) tl.set_cost(u.bwd_weight + static_cast<TaskId>(t), weight_product, {static_cast<ResourceId>(d)});
        for (int64_t i = 0; i < u.inputs; ++i) {
          const TensorRef in = n.inputs[static_cast<size_t>(i)];
          const ParallelTensorShape& s = g.shape(in);
          const int64_t from = place->owner(in, tt.input_shard[static_cast<size_t>(t)][static_cast<size_t>(i)]);
          const auto slot = static_cast<TaskId>(t * u.inputs + i);
          if (from == d) {
            tl.set_cost(u.fwd_transfer + slot, 0.0, {});
            tl.set_cost(u.bwd_transfer + slot, 0.0, {});
            continue;
          }
          const double pieces = static_cast<double>(s.slices());
          const double time = pieces * send_time(cost.machine(), from, d, cost.activation_bytes(s) / pieces);
          tl.set_cost(u.fwd_transfer + slot, time, transfer_ports(from, d));
          tl.set_cost(u.bwd_transfer + slot, time, transfer_ports(d, from));
        }
      }
      if (u.fwd_gather >= 0) {  // ZeRO 3: every weight it synchronizes and gathers for use, gathered over its group
        double seconds = 0;
        std::set<ResourceId> res;
        // A weight gathered once per step (a layout computed once per step:
        // SyncGroup::rounds 1) read by a node that runs per micro-batch is
        // charged 1/M of its gather in each, as the DP's replay charges it.
        const double slices = static_cast<double>(node_slices(g, n));
        for (const SyncGroup& s : problem.sync_groups(*place, id, 0)) {
          if (!s.gathered_for_use) continue;  // kept whole (below the persistence threshold)
          seconds += cost.use_gather_time(s) * (s.rounds > 1 ? 1.0 : 1.0 / slices);
          sync_resources(s, !cost.machine().device.overlaps_communication, id, res, nullptr, true);
        }
        std::vector<ResourceId> r = seconds > 0 ? std::vector<ResourceId>(res.begin(), res.end()) : std::vector<ResourceId>{};
        tl.set_cost(u.fwd_gather, seconds, r);
        tl.set_cost(u.bwd_gather, seconds, std::move(r));
      }
      return;
    }
    if (u.shape != Unit::kSingle) return;
    Seconds s;
    std::set<ResourceId> res;
    if (n.op->op_class == OpClass::kParallel) {
      s = problem.parallel_seconds(*place, id, 0);
      if (const NodeId tail = problem.fused_tail[static_cast<size_t>(id)]; tail >= 0) add_move_ports(tail, res);
      add_move_ports(id, res);
      // A Reduce summing slots where they all are moves nothing: the sum
      // (the cost model's local_sum_time) holds the devices computing it.
      if (res.empty() && n.op->data_move == DataMove::kReduce)
        for (const Move& m : place->moves(id)) res.insert(static_cast<ResourceId>(place->owner({id, m.output}, m.out_shard)));
    } else {
      // A shard-level compute node (a replica-axis Concat or Split): what
      // it sends to other devices (Problem::shard_copies_seconds) holds the
      // links and the devices it arrives on, not those it leaves; where it
      // sends nothing, its copies run on the devices holding its outputs.
      const Seconds copies = problem.task_seconds(id), sent = problem.shard_copies_seconds(*place, id, 0);
      s = {copies.forward + sent.forward, copies.backward + sent.backward};
      if (sent.total() > 0)
        for (const Move& m : place->moves(id)) {
          const int64_t from = place->owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard), to = place->owner({id, m.output}, m.out_shard);
          if (from == to) continue;
          check_device(to, id);
          res.insert(static_cast<ResourceId>(to));
          add_pair_ports(from, to, res);
        }
      if (res.empty())
        for (size_t o = 0; o < n.outputs.size(); ++o)
          for (int64_t d : place->owners({id, static_cast<int32_t>(o)})) {
            check_device(d, id);
            res.insert(static_cast<ResourceId>(d));
          }
    }
    std::vector<ResourceId> r(res.begin(), res.end());
    tl.set_cost(u.fwd, s.forward, s.forward > 0 ? r : std::vector<ResourceId>{});
    if (u.bwd_rerun >= 0) {  // the re-run on its own, before the products beside the rest
      const double rerun = problem.rerun_seconds(id, s);
      tl.set_cost(u.bwd_rerun, rerun, rerun > 0 ? r : std::vector<ResourceId>{});
      s.backward -= rerun;
    }
    tl.set_cost(u.bwd, s.backward, s.backward > 0 ? r : std::vector<ResourceId>{});
  }

  // The ports a collective over sync group `s` crosses, on its members'
  // sync channels (their gather channels for ZeRO 3's gathers before use,
  // `before_use`; and compute streams, `with_devices`), into `out`; the
  // ports into `ports` instead where given.
  void sync_resources(const SyncGroup& s, bool with_devices, NodeId reader, std::set<ResourceId>& out,
                      std::set<ResourceId>* ports = nullptr, bool before_use = false) const {
    for (int64_t d : s.devices) {
      check_device(d, reader);
      out.insert((before_use ? gather_base : sync_base) + static_cast<ResourceId>(d));
      if (with_devices) out.insert(static_cast<ResourceId>(d));
      for (size_t l = 0; l < cost.machine().links.size(); ++l)
        if (s.group.crossed(l)) (ports ? *ports : out).insert(port(l, d));
    }
  }

  // Gradient buckets and optimizer updates (timeline.h's tail).
  void build_tail(Timeline& tl, std::vector<SimTaskInfo>& info);

  // The nodes whose tasks' costs depend on node n's view (placement.h):
  // n, the readers of its outputs, and up every input laid out by its
  // readers (non-compute producers), the producer and all its readers.
  std::vector<NodeId> affected(NodeId n) const {
    std::set<NodeId> out{n};
    std::vector<NodeId> up{n};
    auto readers = [&](NodeId x) {
      for (const auto& [c, idx] : problem.consumers[static_cast<size_t>(x)]) {
        out.insert(c);
      }
    };
    readers(n);
    std::set<NodeId> seen;
    while (!up.empty()) {
      const NodeId x = up.back();
      up.pop_back();
      if (!seen.insert(x).second) continue;
      for (const TensorRef& in : g.node(x).inputs) {
        if (task_node(g.node(in.node))) continue;
        out.insert(in.node);
        readers(in.node);
        up.push_back(in.node);
      }
    }
    std::set<NodeId> runners;
    for (NodeId x : out) runners.insert(runner(x));
    return {runners.begin(), runners.end()};
  }
};

}  // namespace pcgx::search
