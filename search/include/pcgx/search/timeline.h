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
// A task may also hold resources in the background: a link that a gradient
// bucket shares with the collectives of the backward pass it runs beside
// (two NCCL streams on one NVLink, the backward's own going first). Call a
// task *free* when it holds nothing in the background and waits, through
// its predecessors and the tasks before it on its resources, for no task
// that does. Free tasks ignore background holders. A background task uses
// its background resources only while no free task holds them, so
//     start(t) = max(end of every predecessor, of the task before t on each
//                    of its foreground resources, and of the background
//                    task before t on each of its background resources)
//     end(t)   = the time at which t has run `duration` while no free task
//                held any of its background resources.
// (A task that waits for a background task, such as a weight all-gather
// after the optimizer update, is not yielded to: that contention is not
// modelled.) Free tasks never depend on the others, so a simulation times
// the free tasks first and then the rest, each in order.
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

#include "pcgx/pcg/error.h"

namespace pcgx::search {

using TaskId = int32_t;
using ResourceId = int32_t;

struct TimedTask {
  uint64_t order = 0;
  double duration = 0;
  std::vector<ResourceId> resources;  // distinct
  std::vector<ResourceId> background; // distinct, none of `resources`: used only where nothing holds them (above)
  std::vector<TaskId> preds;
  double start = 0, end = 0;          // the timeline, after simulate()
};

// The most tasks one timeline holds (about 480 bytes each with what a
// simulation keeps beside them: some 5 GB): add() past it throws
// TooManyTasks (a pcgx::Error) saying so, instead of exhausting the machine's memory on a
// plan too large to run task by task (LLaMA-65B at ZeRO 3 on 2,048
// devices, every micro-batch's backward pass expanded, is ~90 million).
inline constexpr size_t kMaxTimelineTasks = 10'000'000;
class TooManyTasks : public Error {
 public:
  using Error::Error;
};

class Timeline {
 public:
  explicit Timeline(int32_t resources = 0, size_t max_tasks = kMaxTimelineTasks)
      : max_tasks_(max_tasks), on_(static_cast<size_t>(resources)) {}

  // A new task waiting for `preds` (earlier tasks with a smaller order).
  // Throws pcgx::Error when the order is taken or a predecessor does not
  // come before it.
  TaskId add(uint64_t order, std::vector<TaskId> preds, double duration, std::vector<ResourceId> resources,
             std::vector<ResourceId> background = {});
  // Changes a task's cost; the next delta simulation recomputes it when it
  // differs.
  void set_cost(TaskId t, double duration, std::vector<ResourceId> resources, std::vector<ResourceId> background = {});
  // Drops every task with id >= first (the tail a builder rebuilds).
  void truncate(TaskId first);
  // Room for `tasks` tasks in all, so that a builder adding millions of
  // them does not move its arrays (and touch fresh memory) again and again.
  void reserve(size_t tasks);
  // Throws TooManyTasks, as add() would, when a builder knows it will add
  // at least `tasks` more: a plan past the limit is refused before
  // millions of its tasks are built for nothing (seconds at 3,072 devices).
  void refuse_past_limit(size_t tasks) const;

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
  // A background task's time past start + duration went to the foreground
  // tasks on its background resources.
  TaskId binding(TaskId t) const;
  // From the task that ends last back to time 0 along binding(): the
  // critical path, first task first.
  std::vector<TaskId> critical_path() const;
  // Tasks the last simulation recomputed.
  int64_t recomputed() const { return recomputed_; }

 private:
  using Slot = std::pair<uint64_t, TaskId>;
  [[noreturn]] void too_many() const;
  void mark(TaskId t);
  void leave(TaskId t);  // takes t off its resources, marking who followed it
  void join(TaskId t);
  // t's start and end from what it waits for (a background task's end from
  // busy_, the foreground intervals of its background resources).
  void compute(TaskId t, double& start, double& end) const;
  using Queue = std::vector<std::pair<uint64_t, TaskId>>;  // a min-heap by order
  // busy_ from the free tasks' times.
  void collect_busy();
  // Every task (full) or the dirty ones and whatever they delay or advance.
  void simulate(bool full);

  // The neighbours of task t on its i-th resource (-1: none), kept with the
  // sets so that a simulation finds them without a search; its foreground
  // resources first, then its background ones.
  struct Link {
    TaskId prev = -1, next = -1;
  };
  Link& link(TaskId t, ResourceId r, bool background);

  std::vector<TimedTask> tasks_;
  std::vector<std::vector<Link>> links_;    // per task, per resource of it
  std::vector<std::vector<TaskId>> succs_;  // ascending ids
  size_t max_tasks_ = kMaxTimelineTasks;
  std::vector<std::set<Slot>> on_;          // per resource, its foreground tasks by order
  std::vector<std::set<Slot>> behind_;      // per resource, its background tasks by order
  std::vector<char> free_;                  // per task (above), as of the last simulation
  // Per resource held in the background: its free tasks' (start, end),
  // ascending (they run one at a time in order).
  std::vector<std::vector<std::pair<double, double>>> busy_;
  std::map<uint64_t, TaskId> by_order_;
  std::vector<TaskId> dirty_;
  std::vector<char> is_dirty_;
  bool simulated_ = false;
  int64_t recomputed_ = 0;
};

}  // namespace pcgx::search
