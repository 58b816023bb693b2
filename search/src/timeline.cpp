// Full and delta simulation of a task graph (see timeline.h).
#include "pcgx/search/timeline.h"

#include <algorithm>
#include <limits>
#include <string>

#include "pcgx/pcg/error.h"

namespace pcgx::search {

TaskId Timeline::add(uint64_t order, std::vector<TaskId> preds, double duration, std::vector<ResourceId> resources,
                     std::vector<ResourceId> background) {
  if (tasks_.size() >= max_tasks_) too_many();
  const auto id = static_cast<TaskId>(tasks_.size());
  for (ResourceId r : background)
    if (std::find(resources.begin(), resources.end(), r) != resources.end())
      throw Error("timeline: resource " + std::to_string(r) + " held both in the foreground and in the background");
  // (Built in order mostly: appended at the end without a walk down the tree.)
  const bool last = by_order_.empty() || by_order_.rbegin()->first < order;
  if (!(last ? (by_order_.emplace_hint(by_order_.end(), order, id), true) : by_order_.emplace(order, id).second))
    throw Error("timeline: two tasks with order " + std::to_string(order));
  for (TaskId p : preds)
    if (p < 0 || p >= id || tasks_[static_cast<size_t>(p)].order >= order) {
      by_order_.erase(order);
      throw Error("timeline: task " + std::to_string(id) + " waits for task " + std::to_string(p) + ", which does not come before it");
    }
  std::sort(preds.begin(), preds.end());
  preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
  for (TaskId p : preds) succs_[static_cast<size_t>(p)].push_back(id);
  TimedTask t;
  t.order = order, t.duration = duration, t.resources = std::move(resources), t.background = std::move(background);
  t.preds = std::move(preds);
  tasks_.push_back(std::move(t));
  links_.emplace_back();
  succs_.emplace_back();
  is_dirty_.push_back(0);
  free_.push_back(0);
  join(id);
  mark(id);
  return id;
}

void Timeline::too_many() const {
  throw TooManyTasks("simulate: more than " + std::to_string(max_tasks_) +
                     " tasks, too many to simulate task by task here (the cost model's prediction stands alone)");
}

void Timeline::refuse_past_limit(size_t tasks) const {
  if (tasks > max_tasks_ - std::min(max_tasks_, tasks_.size())) too_many();
}

void Timeline::reserve(size_t tasks) {
  tasks_.reserve(tasks), links_.reserve(tasks), succs_.reserve(tasks), is_dirty_.reserve(tasks), free_.reserve(tasks);
}

void Timeline::mark(TaskId t) {
  if (is_dirty_[static_cast<size_t>(t)]) return;
  is_dirty_[static_cast<size_t>(t)] = 1;
  dirty_.push_back(t);
}

Timeline::Link& Timeline::link(TaskId t, ResourceId r, bool background) {
  const TimedTask& x = tasks_[static_cast<size_t>(t)];
  const auto& res = background ? x.background : x.resources;
  const size_t i = static_cast<size_t>(std::find(res.begin(), res.end(), r) - res.begin()) + (background ? x.resources.size() : 0);
  return links_[static_cast<size_t>(t)][i];
}

void Timeline::join(TaskId t) {
  const TimedTask& x = tasks_[static_cast<size_t>(t)];
  const size_t fg = x.resources.size();
  links_[static_cast<size_t>(t)].assign(fg + x.background.size(), Link{});
  for (size_t i = 0; i < fg + x.background.size(); ++i) {
    const bool bg = i >= fg;
    const ResourceId r = bg ? x.background[i - fg] : x.resources[i];
    if (r < 0) throw Error("timeline: negative resource id");
    if (static_cast<size_t>(r) >= on_.size()) on_.resize(static_cast<size_t>(r) + 1);
    if (static_cast<size_t>(r) >= behind_.size()) behind_.resize(static_cast<size_t>(r) + 1);
    auto& set = bg ? behind_[static_cast<size_t>(r)] : on_[static_cast<size_t>(r)];
    const Slot slot{x.order, t};
    const auto it = set.empty() || *set.rbegin() < slot ? set.emplace_hint(set.end(), slot) : set.emplace(slot).first;
    Link& me = links_[static_cast<size_t>(t)][i];
    if (it != set.begin()) me.prev = std::prev(it)->second, link(me.prev, r, bg).next = t;
    if (auto after = std::next(it); after != set.end()) {
      me.next = after->second, link(me.next, r, bg).prev = t;
      mark(me.next);  // it has a new predecessor on r
    }
  }
}

void Timeline::leave(TaskId t) {
  const TimedTask& x = tasks_[static_cast<size_t>(t)];
  const size_t fg = x.resources.size();
  for (size_t i = 0; i < fg + x.background.size(); ++i) {
    const bool bg = i >= fg;
    const ResourceId r = bg ? x.background[i - fg] : x.resources[i];
    const Link me = links_[static_cast<size_t>(t)][i];
    if (me.prev >= 0) link(me.prev, r, bg).next = me.next;
    if (me.next >= 0) link(me.next, r, bg).prev = me.prev, mark(me.next);
    (bg ? behind_ : on_)[static_cast<size_t>(r)].erase({x.order, t});
  }
  links_[static_cast<size_t>(t)].clear();
}

void Timeline::set_cost(TaskId t, double duration, std::vector<ResourceId> resources, std::vector<ResourceId> background) {
  TimedTask& x = tasks_[static_cast<size_t>(t)];
  if (x.duration == duration && x.resources == resources && x.background == background) return;
  if (x.resources != resources || x.background != background) {
    for (ResourceId r : background)
      if (std::find(resources.begin(), resources.end(), r) != resources.end())
        throw Error("timeline: resource " + std::to_string(r) + " held both in the foreground and in the background");
    leave(t);
    x.resources = std::move(resources), x.background = std::move(background);
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
  free_.resize(static_cast<size_t>(first));
  std::erase_if(dirty_, [&](TaskId t) { return t >= first; });
}

void Timeline::collect_busy() {
  busy_.resize(on_.size());
  for (size_t r = 0; r < on_.size(); ++r) {
    busy_[r].clear();
    if (r >= behind_.size() || behind_[r].empty()) continue;
    for (const auto& [order, t] : on_[r]) {
      const TimedTask& x = tasks_[static_cast<size_t>(t)];
      if (free_[static_cast<size_t>(t)] && x.end > x.start) busy_[r].emplace_back(x.start, x.end);
    }
  }
}

void Timeline::compute(TaskId t, double& start, double& end) const {
  const TimedTask& x = tasks_[static_cast<size_t>(t)];
  start = 0;
  for (TaskId p : x.preds) start = std::max(start, tasks_[static_cast<size_t>(p)].end);
  for (const Link& l : links_[static_cast<size_t>(t)])  // foreground and background predecessors
    if (l.prev >= 0) start = std::max(start, tasks_[static_cast<size_t>(l.prev)].end);
  end = start + x.duration;
  if (x.background.empty() || x.duration <= 0) return;
  // Run in the gaps the free holders of its background resources leave:
  // walk their busy intervals (each list ascending) from `start`.
  static const std::vector<std::pair<double, double>> kNone;
  auto busy = [&](size_t i) -> const std::vector<std::pair<double, double>>& {
    const auto r = static_cast<size_t>(x.background[i]);
    return r < busy_.size() ? busy_[r] : kNone;
  };
  std::vector<size_t> at(x.background.size());
  for (size_t i = 0; i < x.background.size(); ++i) {
    const auto& b = busy(i);
    at[i] = static_cast<size_t>(std::upper_bound(b.begin(), b.end(), start, [](double s, const auto& iv) { return s < iv.second; }) - b.begin());
  }
  double now = start, left = x.duration;
  for (;;) {
    // The next interval still ending after `now`, on any of them.
    double next_start = std::numeric_limits<double>::infinity(), next_end = 0;
    size_t which = 0;
    for (size_t i = 0; i < x.background.size(); ++i) {
      const auto& b = busy(i);
      while (at[i] < b.size() && b[at[i]].second <= now) ++at[i];
      if (at[i] < b.size() && b[at[i]].first < next_start) next_start = b[at[i]].first, next_end = b[at[i]].second, which = i;
    }
    if (next_start - now >= left) break;  // the gap before it (or all the time after `now`) suffices
    if (next_start > now) left -= next_start - now;
    now = std::max(now, next_end);
    ++at[which];
  }
  end = now + left;
}

void Timeline::simulate(bool full) {
  std::vector<char> queued(tasks_.size(), 0);
  Queue now, later;  // this pass's (a heap) and, in the first, the second pass's tasks
  auto enqueue = [&](TaskId t) {
    if (queued[static_cast<size_t>(t)]) return;
    queued[static_cast<size_t>(t)] = 1;
    now.emplace_back(tasks_[static_cast<size_t>(t)].order, t);
    std::push_heap(now.begin(), now.end(), std::greater<>());
  };
  auto enqueue_next = [&](TaskId t) {
    for (TaskId s : succs_[static_cast<size_t>(t)]) enqueue(s);
    for (const Link& l : links_[static_cast<size_t>(t)])
      if (l.next >= 0) enqueue(l.next);
  };
  if (full)
    for (const auto& [order, t] : by_order_) enqueue(t);
  else
    for (TaskId t : dirty_) enqueue(t);
  recomputed_ = 0;
  // Orders are a topological order of predecessors and of resource
  // predecessors, so a task is taken after everything it waits for. The
  // first pass decides which tasks are free (in order, so from final
  // flags) and times the free ones; the second times the rest against the
  // free tasks' busy intervals.
  auto run = [&](bool first) {
    while (!now.empty()) {
      std::pop_heap(now.begin(), now.end(), std::greater<>());
      const TaskId t = now.back().second;
      now.pop_back();
      TimedTask& x = tasks_[static_cast<size_t>(t)];
      if (first) {
        bool is_free = x.background.empty();
        for (TaskId p : x.preds) is_free = is_free && free_[static_cast<size_t>(p)];
        for (const Link& l : links_[static_cast<size_t>(t)]) is_free = is_free && (l.prev < 0 || free_[static_cast<size_t>(l.prev)]);
        if (static_cast<bool>(free_[static_cast<size_t>(t)]) != is_free) {
          free_[static_cast<size_t>(t)] = is_free;
          enqueue_next(t);  // they may change sides too
        }
        if (!is_free) {
          later.emplace_back(x.order, t);
          continue;
        }
      }
      double start = 0, end = 0;
      compute(t, start, end);
      ++recomputed_;
      const bool changed = start != x.start || end != x.end;
      x.start = start, x.end = end;
      if (changed || is_dirty_[static_cast<size_t>(t)]) enqueue_next(t);
    }
  };
  run(true);
  // The second pass: what the first set aside, the background holders of
  // a resource whose free intervals changed, and whatever they delay.
  now = std::move(later);
  std::make_heap(now.begin(), now.end(), std::greater<>());
  std::vector<std::vector<std::pair<double, double>>> before;
  before.swap(busy_);
  collect_busy();
  for (size_t r = 0; r < busy_.size(); ++r)
    if (r < behind_.size() && !behind_[r].empty() && (r >= before.size() || before[r] != busy_[r]))
      for (const auto& [order, b] : behind_[r]) {
        if (queued[static_cast<size_t>(b)]) continue;  // set aside already
        queued[static_cast<size_t>(b)] = 1;
        now.emplace_back(order, b);
        std::push_heap(now.begin(), now.end(), std::greater<>());
      }
  run(false);
  for (TaskId t : dirty_) is_dirty_[static_cast<size_t>(t)] = 0;
  dirty_.clear();
}

void Timeline::simulate_full() {
  simulate(true);
  simulated_ = true;
}

void Timeline::simulate_delta() {
  if (!simulated_) return simulate_full();
  simulate(false);
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
  for (const Link& l : links_[static_cast<size_t>(t)]) consider(l.prev);
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
