#pragma once
// The execution simulator (FlexFlow, Jia et al. 2019, Section 5): the task
// graph of one training iteration of a mapped PCG, simulated on the
// machine (timeline.h), and re-simulated incrementally when one operator's
// machine view changes (delta simulation).
//
// Where the machine-mapping DP adds times along series compositions, the
// simulator runs every task on the resource it occupies, so it sees a
// device waiting for a message, two transfers sharing a link, and gradient
// synchronization running beside the backward pass.
//
// The tasks, per node of the graph (the nodes the DP prices, with the same
// cost-model terms, cost_model.h):
//   compute operator   per task: forward and backward on its device's
//                      compute stream; per task and input whose shard lives
//                      on another device, a transfer (forward) and the
//                      gradient sent back (backward) on the link ports the
//                      two devices meet through;
//   parallel operator  one collective forward and one backward (a layout
//                      change with its partner as one, cost_model.h) on
//                      the link ports of every device it moves data
//                      between, waiting for every shard it reads;
//   gradient sync      DDP's buckets (CommOptions::bucket_bytes) of the
//                      weight gradients of one device group, in the order
//                      the backward pass produces them; a bucket starts
//                      when its last gradient is ready, on the sync channel
//                      of each member (beside the compute stream) and, in
//                      the background (timeline.h), the link ports its
//                      all-reduce crosses: the passes' own messages and
//                      ZeRO 3's gathers before use go first;
//   update             per device, after its backward pass and the buckets
//                      it takes part in (1/r of each weight under ZeRO);
//   weight gather      under ZeRO stage 1 or 2 (and at stage 3 for a
//                      weight below the persistence threshold), per
//                      bucket, after the updates of its members: the
//                      updated weights all-gathered on the same channel
//                      and ports; under stage 3, per compute operator that
//                      synchronizes weights it gathers for use, before its
//                      forward tasks and again before
//                      its backward tasks, on the members' gather channels
//                      (one per device, apart from the sync channel, as
//                      FSDP's all-gather stream) and the ports of its
//                      weights' groups; over the step's sequence of such
//                      gathers (forward, then backward) the (j+2)-th
//                      waits for the j-th's operator to finish, as
//                      gradient_sync.h's replay_sharded runs them (every
//                      weight its own bucket);
//   overhead           with a calibrated profile (profile.h), what running
//                      the nodes costs a step beyond kernels and messages
//                      (CostModel::step_overhead), last on every device.
// Link ports: for each link level l of the machine, each group of the
// level below (a device for the first level, a node for the second) has
// `ports` port resources (machine.h: a DGX node's eight network adapters),
// and a device reaches the level through adapter (its place in the group
// mod ports), as a GPU uses the adapter next to it; a transfer holds the
// ports of both ends at the level where they meet, a collective the ports
// of every member at every level it crosses. Transfers through one port
// run one after the other (contention).
//
// Layout nodes (source_layout.h) run no tasks, as in the DP.
//
// Pipelined graphs (Pipeline/Batch degrees: M micro-batches) run their
// pipeline schedule (pcg/pipeline_schedule.h), micro-batch by micro-batch.
// The graph is cut into chunks in model order (S stages of v chunks, chunk
// c on the devices of stage c mod S; one chunk when not staged: gradient
// accumulation). First, one micro-batch through each chunk, forward and
// backward, is simulated task by task as above (every pipelined task at
// 1/M of its step's cost, the chunk's incoming boundary transfer and its
// gradient going back included, as in the cost model's t_s): the chunk's
// bodies. Then every step of every stage's program is one task holding
// the stage's devices for its body's time, waiting for the steps it needs
// (the previous chunk's forward, the next chunk's backward of the same
// micro-batch); what runs once per step (operators reading no micro-batch)
// runs before the first and after the last step. A gradient bucket starts
// after the last micro-batch's backward of the chunks it gathers from, as
// the DP starts the buckets in the last micro-batch's backward
// (pipeline.h); updates, ZeRO's gathers and the overhead follow as above.
// Bodies of the same chunk are the same for every micro-batch, so the task
// graph grows with the schedule's 2 M S v steps, not M times the graph.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/timeline.h"

namespace pcgx::search {

// kWeightGradient: a product's weight gradient computed after its input's
// (TrainingRecipe::overlap_grad_input), while that one moves on.
// (kGatherIssue: zero-length, where a pipelined plan's stage issues a
// chunk's weight gathers under the interleaved schedule; chunk set.)
enum class SimKind : uint8_t { kForward, kBackward, kTransfer, kGradientTransfer, kCollective, kSync, kUpdate, kOverhead, kGather, kShardGather,
                               kWeightGradient, kGatherIssue };
const char* to_string(SimKind k);

// What a simulated task stands for.
struct SimTaskInfo {
  SimKind kind = SimKind::kForward;
  NodeId node = -1;     // -1: a bucket or an update
  int64_t index = -1;   // task index within the node, the bucket (sync, gather), the updating device,
                        // for a ZeRO 3 gather 0 before the node's forward, 1 before its backward,
                        // or for a collective 0 in the forward pass, 1 in the backward, 2 its
                        // re-run in the backward ahead of products beside it (overlap_grad_input)
  int64_t device = -1;  // the device of a compute task or update; -1 otherwise
  // A pipelined graph's chunk step (node -1, kind forward or backward): its
  // chunk and micro-batch (-1: the chunk's once-per-step operators).
  int64_t chunk = -1, micro_batch = -1;
  bool communication() const {
    return kind == SimKind::kTransfer || kind == SimKind::kGradientTransfer || kind == SimKind::kCollective || kind == SimKind::kSync ||
           kind == SimKind::kGather || kind == SimKind::kShardGather;
  }
};

struct DeviceSummary {
  double compute = 0;        // busy on its compute stream (forward, backward, update)
  double sync = 0;           // busy on its sync channel (the buckets it takes part in) and its gather channel (ZeRO 3)
  double idle = 0;           // iteration time not spent computing
};

struct SimulationSummary {
  double time = 0;           // the iteration: the end of the last task
  // Along the critical path (they add up to time):
  double compute = 0;        // forward, backward and update
  double update = 0;         // of compute: the optimizer update
  double overhead = 0;       // of compute: the calibrated per-step overhead
  double communication = 0;  // activations' transfers and collectives: exposed
  double sync = 0;           // gradient buckets (and ZeRO 3's gathers before use: the sync and gather channels' tasks): exposed
  double gather = 0;         // ZeRO's weight all-gathers after the update (of communication)
  double backward = 0;       // of time: the backward pass's tasks (compute, gradient transfers, its collectives)
  // Over every task:
  double communication_total = 0, sync_total = 0;
  double communication_hidden() const { return communication_total - communication; }
  double sync_hidden() const { return sync_total - sync; }
  // The last gradient bucket's end past the end of the forward and backward
  // passes' last task: what the cost model calls exposed (gradient_sync.h).
  // It differs from `sync` where the sync channels are the busiest
  // resource of the backward pass: then the critical path runs along them.
  double sync_past = 0;
  int64_t buckets = 0;
  int64_t gathered_for_use = 0;  // ZeRO 3: operators gathering their weights before each use
  int64_t tasks = 0;
  int64_t devices_used = 0;  // devices that run at least one forward task
  std::vector<DeviceSummary> devices;
  std::vector<TaskId> critical_path;
};

class Simulator {
 public:
  // Builds the task graph of `g` under `views` (one per node; as in a
  // strategy file) on the cost model's machine and simulates it. A
  // pipelined graph runs `pipeline`'s stages, virtual stages and schedule
  // (its micro-batches must be the graph's); without it, one stage
  // (gradient accumulation under 1f1b). Throws pcgx::Error when a task
  // runs on a device the machine lacks, or the graph's operators do not
  // fall into the pipeline's chunks.
  Simulator(const Graph& g, std::vector<MachineView> views, const CostModel& cost,
            std::optional<PipelineShape> pipeline = std::nullopt);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Delta simulation: node `n` runs under view `v`; rebuilds the tasks
  // whose cost that changes and re-simulates what they affect.
  void set_view(NodeId n, const MachineView& v);
  // Rebuilds and re-simulates every task (what set_view avoids).
  void rebuild();

  double time() const { return timeline_.makespan(); }
  // The pipeline the graph runs; nullopt when it has no micro-batches.
  std::optional<PipelineShape> pipeline() const;
  // Memory per device (machine_mapping.h's memory model) with, under a
  // pipeline schedule, each stage's micro-batches in flight as its program
  // holds them (pcg/pipeline_schedule.h: 1F1B's S - s, GPipe's M, spread
  // over a stage's chunks); one micro-batch otherwise.
  std::vector<double> memory() const;
  // The same by kind (weights, master, gradients, optimizer, activations, transient).
  std::vector<DeviceMemory> memory_breakdown() const;
  // What task t is, in words: "layer0.fc1 (Linear) forward 3",
  // "gradient bucket 2", "chunk 1 backward of micro-batch 5".
  std::string label(TaskId t) const;
  const Timeline& timeline() const { return timeline_; }
  const SimTaskInfo& info(TaskId t) const { return info_[static_cast<size_t>(t)]; }
  const Graph& graph() const;
  const std::vector<MachineView>& views() const;
  // "device 3", "nvlink port of device 3", "infiniband adapter 2 of devices 8-15", "sync channel of device 3",
  // "gather channel of device 3" (ZeRO 3's gathers before use).
  std::string resource_name(ResourceId r) const;
  // Resources 0 .. devices-1 are the devices' compute streams.
  int64_t devices() const;
  // Memory of one device (the machine's).
  double capacity() const;
  const TrainingRecipe& recipe() const;  // the cost model's: what memory counts
  // What a step sends between devices, as the runtime counts it
  // (Estimate::bytes): the graph's messages and collectives
  // (step_communication.h's step_bytes), what ZeRO 3's gathers before use
  // send beyond them, and what the recomputation plan's re-runs send again
  // (recompute_step_bytes; under a pipeline schedule with micro-batches in
  // flight, a re-run compute task reads the inputs it received).
  double step_bytes() const;
  SimulationSummary summary() const;
  // Tasks rebuilt by the last set_view or rebuild.
  int64_t rebuilt() const { return rebuilt_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Timeline timeline_;
  std::vector<SimTaskInfo> info_;
  int64_t rebuilt_ = 0;
};

// The simulation as the search's estimate (machine_mapping.h), for a plan
// whose views the DP did not choose: time, the critical path's compute and
// exposed communication (activations' and gradient buckets'), the buckets,
// idle time, memory per device and bytes moved; infeasible when a device's
// memory does not fit.
Estimate simulated_estimate(const Simulator& s);

}  // namespace pcgx::search
