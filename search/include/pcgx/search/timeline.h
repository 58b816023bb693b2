#pragma once
// A task graph and its timeline (FlexFlow, Jia et al. 2019, Section 5):
// tasks with a duration, the resources they hold while running (a device's
// compute stream, a link port, a communication channel) and the tasks they
// wait for. Knows nothing of PCGs; simulator.h builds the tasks of one.
//
// Semantics. Every task has a distinct `order`, a topological order of its
// dependencies (a task's predecessors come earlier). Each resource runs its
// tasks one at a time in that order, so
//     start(t) = max(end of every predecessor,
//                    end of the task before t on each of its resources)
//     end(t)   = start(t) + duration(t).
// A fixed order per resource is what a runtime does (kernels and NCCL calls
// are issued to streams in program order), and it makes the timeline a
// function of the task graph alone: the full simulation and the delta
// simulation below give the same start and end for every task, bit for bit.
//
// Full simulation (FlexFlow's Algorithm 1) visits every task in order.
// Delta simulation (their Algorithm 2) visits only the tasks whose
// duration or resources changed, those added, the ones that lost a
// resource predecessor, and then whatever they delay or advance: a task is
// recomputed when something it waits for changed, and what follows it only
// when its own times changed.
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace pcgx::search {

using TaskId = int32_t;
using ResourceId = int32_t;

struct TimedTask {
  uint64_t order = 0;
  double duration = 0;
  std::vector<ResourceId> resources;  // distinct
  std::vector<TaskId> preds;
  double start = 0, end = 0;          // the timeline, after simulate()
};

class Timeline {
 public:
  explicit Timeline(int32_t resources = 0) : on_(static_cast<size_t>(resources)) {}

  // A new task waiting for `preds` (earlier tasks with a smaller order).
  // Throws pcgx::Error when the order is taken or a predecessor does not
  // come before it.
  TaskId add(uint64_t order, std::vector<TaskId> preds, double duration, std::vector<ResourceId> resources);
  // Changes a task's cost; the next delta simulation recomputes it when it
  // differs.
  void set_cost(TaskId t, double duration, std::vector<ResourceId> resources);
  // Drops every task with id >= first (the tail a builder rebuilds).
  void truncate(TaskId first);

  // Recomputes every task.
  void simulate_full();
  // Recomputes what changed since the last simulation (see above); the
  // first call is a full simulation.
  void simulate_delta();

  size_t size() const { return tasks_.size(); }
  int32_t resources() const { return static_cast<int32_t>(on_.size()); }
  const TimedTask& task(TaskId t) const { return tasks_[static_cast<size_t>(t)]; }
  std::span<const TimedTask> tasks() const { return tasks_; }
  // The end of the last task (0 when empty).
  double makespan() const;
  // The task `t` waited for: the predecessor or resource predecessor that
  // ended when it started (the latest of them); -1 when it started at 0.
  TaskId binding(TaskId t) const;
  // From the task that ends last back to time 0 along binding(): the
  // critical path, first task first.
  std::vector<TaskId> critical_path() const;
  // Tasks the last simulation recomputed.
  int64_t recomputed() const { return recomputed_; }

 private:
  using Slot = std::pair<uint64_t, TaskId>;
  TaskId resource_prev(TaskId t, ResourceId r) const;
  void mark(TaskId t);
  void leave(TaskId t);  // takes t off its resources, marking who followed it
  void join(TaskId t);
  void compute(TaskId t, double& start) const;

  // The neighbours of task t on its i-th resource (-1: none), kept with the
  // sets so that a simulation finds them without a search.
  struct Link {
    TaskId prev = -1, next = -1;
  };
  Link& link(TaskId t, ResourceId r);

  std::vector<TimedTask> tasks_;
  std::vector<std::vector<Link>> links_;    // per task, per resource of it
  std::vector<std::vector<TaskId>> succs_;  // ascending ids
  std::vector<std::set<Slot>> on_;          // per resource, its tasks by order
  std::map<uint64_t, TaskId> by_order_;
  std::vector<TaskId> dirty_;
  std::vector<char> is_dirty_;
  bool simulated_ = false;
  int64_t recomputed_ = 0;
};

}  // namespace pcgx::search
