// Full and delta simulation of a task graph (see timeline.h).
#include "pcgx/search/timeline.h"

#include <algorithm>
#include <queue>
#include <string>

#include "pcgx/pcg/error.h"

namespace pcgx::search {

TaskId Timeline::add(uint64_t order, std::vector<TaskId> preds, double duration, std::vector<ResourceId> resources) {
  const auto id = static_cast<TaskId>(tasks_.size());
  if (!by_order_.emplace(order, id).second) throw Error("timeline: two tasks with order " + std::to_string(order));
  for (TaskId p : preds)
    if (p < 0 || p >= id || tasks_[static_cast<size_t>(p)].order >= order) {
      by_order_.erase(order);
      throw Error("timeline: task " + std::to_string(id) + " waits for task " + std::to_string(p) + ", which does not come before it");
    }
  std::sort(preds.begin(), preds.end());
  preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
  for (TaskId p : preds) succs_[static_cast<size_t>(p)].push_back(id);
  TimedTask t;
  t.order = order, t.duration = duration, t.resources = std::move(resources), t.preds = std::move(preds);
  tasks_.push_back(std::move(t));
  links_.emplace_back();
  succs_.emplace_back();
  is_dirty_.push_back(0);
  join(id);
  mark(id);
  return id;
}

void Timeline::mark(TaskId t) {
  if (is_dirty_[static_cast<size_t>(t)]) return;
  is_dirty_[static_cast<size_t>(t)] = 1;
  dirty_.push_back(t);
}

Timeline::Link& Timeline::link(TaskId t, ResourceId r) {
  const auto& res = tasks_[static_cast<size_t>(t)].resources;
  const auto i = static_cast<size_t>(std::find(res.begin(), res.end(), r) - res.begin());
  return links_[static_cast<size_t>(t)][i];
}

void Timeline::join(TaskId t) {
  const TimedTask& x = tasks_[static_cast<size_t>(t)];
  links_[static_cast<size_t>(t)].assign(x.resources.size(), Link{});
  for (size_t i = 0; i < x.resources.size(); ++i) {
    const ResourceId r = x.resources[i];
    if (r < 0) throw Error("timeline: negative resource id");
    if (static_cast<size_t>(r) >= on_.size()) on_.resize(static_cast<size_t>(r) + 1);
    auto& set = on_[static_cast<size_t>(r)];
    const auto it = set.emplace(x.order, t).first;
    Link& me = links_[static_cast<size_t>(t)][i];
    if (it != set.begin()) me.prev = std::prev(it)->second, link(me.prev, r).next = t;
    if (auto after = std::next(it); after != set.end()) {
      me.next = after->second, link(me.next, r).prev = t;
      mark(me.next);  // it has a new predecessor on r
    }
  }
}

void Timeline::leave(TaskId t) {
  const TimedTask& x = tasks_[static_cast<size_t>(t)];
  for (size_t i = 0; i < x.resources.size(); ++i) {
    const ResourceId r = x.resources[i];
    const Link me = links_[static_cast<size_t>(t)][i];
    if (me.prev >= 0) link(me.prev, r).next = me.next;
    if (me.next >= 0) link(me.next, r).prev = me.prev, mark(me.next);
    on_[static_cast<size_t>(r)].erase({x.order, t});
  }
  links_[static_cast<size_t>(t)].clear();
}

void Timeline::set_cost(TaskId t, double duration, std::vector<ResourceId> resources) {
  TimedTask& x = tasks_[static_cast<size_t>(t)];
  if (x.duration == duration && x.resources == resources) return;
  if (x.resources != resources) {
    leave(t);
    x.resources = std::move(resources);
    join(t);
  }
  x.duration = duration;
  mark(t);
}

void Timeline::truncate(TaskId first) {
  for (auto t = static_cast<TaskId>(tasks_.size()); t-- > first;) {
    leave(t);
    by_order_.erase(tasks_[static_cast<size_t>(t)].order);
    for (TaskId p : tasks_[static_cast<size_t>(t)].preds) {
      auto& s = succs_[static_cast<size_t>(p)];
      while (!s.empty() && s.back() >= first) s.pop_back();
    }
  }
  tasks_.resize(static_cast<size_t>(first));
  links_.resize(static_cast<size_t>(first));
  succs_.resize(static_cast<size_t>(first));
  is_dirty_.resize(static_cast<size_t>(first));
  std::erase_if(dirty_, [&](TaskId t) { return t >= first; });
}

TaskId Timeline::resource_prev(TaskId t, ResourceId r) const {
  const auto& res = tasks_[static_cast<size_t>(t)].resources;
  return links_[static_cast<size_t>(t)][static_cast<size_t>(std::find(res.begin(), res.end(), r) - res.begin())].prev;
}

void Timeline::compute(TaskId t, double& start) const {
  const TimedTask& x = tasks_[static_cast<size_t>(t)];
  start = 0;
  for (TaskId p : x.preds) start = std::max(start, tasks_[static_cast<size_t>(p)].end);
  for (const Link& l : links_[static_cast<size_t>(t)])
    if (l.prev >= 0) start = std::max(start, tasks_[static_cast<size_t>(l.prev)].end);
}

void Timeline::simulate_full() {
  // In order, the task before t on a resource is the last one seen there.
  std::vector<double> free(on_.size(), 0.0);
  for (const auto& [order, t] : by_order_) {
    TimedTask& x = tasks_[static_cast<size_t>(t)];
    double start = 0;
    for (TaskId p : x.preds) start = std::max(start, tasks_[static_cast<size_t>(p)].end);
    for (ResourceId r : x.resources) start = std::max(start, free[static_cast<size_t>(r)]);
    x.start = start, x.end = start + x.duration;
    for (ResourceId r : x.resources) free[static_cast<size_t>(r)] = x.end;
  }
  for (TaskId t : dirty_) is_dirty_[static_cast<size_t>(t)] = 0;
  dirty_.clear();
  recomputed_ = static_cast<int64_t>(tasks_.size());
  simulated_ = true;
}

void Timeline::simulate_delta() {
  if (!simulated_) return simulate_full();
  using Entry = std::pair<uint64_t, TaskId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  std::vector<char> queued(tasks_.size(), 0);
  auto push = [&](TaskId t) {
    if (!queued[static_cast<size_t>(t)]) queued[static_cast<size_t>(t)] = 1, queue.emplace(tasks_[static_cast<size_t>(t)].order, t);
  };
  for (TaskId t : dirty_) push(t);
  recomputed_ = 0;
  // Orders are a topological order of predecessors and of resource
  // predecessors, so a task is taken after everything it waits for.
  while (!queue.empty()) {
    const TaskId t = queue.top().second;
    queue.pop();
    TimedTask& x = tasks_[static_cast<size_t>(t)];
    double start = 0;
    compute(t, start);
    ++recomputed_;
    const bool changed = start != x.start || start + x.duration != x.end;
    x.start = start, x.end = start + x.duration;
    if (!changed && !is_dirty_[static_cast<size_t>(t)]) continue;
    for (TaskId s : succs_[static_cast<size_t>(t)]) push(s);
    for (const Link& l : links_[static_cast<size_t>(t)])
      if (l.next >= 0) push(l.next);
  }
  for (TaskId t : dirty_) is_dirty_[static_cast<size_t>(t)] = 0;
  dirty_.clear();
}

double Timeline::makespan() const {
  double m = 0;
  for (const TimedTask& t : tasks_) m = std::max(m, t.end);
  return m;
}

TaskId Timeline::binding(TaskId t) const {
  const TimedTask& x = tasks_[static_cast<size_t>(t)];
  if (x.start <= 0) return -1;
  TaskId best = -1;
  auto consider = [&](TaskId p) {
    if (p >= 0 && tasks_[static_cast<size_t>(p)].end == x.start && (best < 0 || tasks_[static_cast<size_t>(p)].order > tasks_[static_cast<size_t>(best)].order)) best = p;
  };
  for (TaskId p : x.preds) consider(p);
  for (ResourceId r : x.resources) consider(resource_prev(t, r));
  return best;
}

std::vector<TaskId> Timeline::critical_path() const {
  std::vector<TaskId> path;
  TaskId last = -1;
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (last < 0 || tasks_[i].end > tasks_[static_cast<size_t>(last)].end) last = static_cast<TaskId>(i);
  for (TaskId t = last; t >= 0; t = binding(t)) path.push_back(t);
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace pcgx::search
