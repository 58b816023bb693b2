// Pipeline schedules' stage programs and their joint order (see
// pipeline_schedule.h).
#include "pcgx/pcg/pipeline_schedule.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include "pcgx/pcg/error.h"

#include "pcgx/pcg/named_choice.h"

namespace pcgx {

const char* name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGPipe: return "gpipe";
    case PipelineSchedule::k1F1B: return "1f1b";
    case PipelineSchedule::kInterleaved: return "interleaved";
    case PipelineSchedule::kExplicit: return "explicit";
  }
  return "?";
}

std::optional<PipelineSchedule> pipeline_schedule_named(std::string_view text) { return choice_named(text, kPipelineSchedules); }

bool PipelineShape::is_interlaced(int64_t chunk) const { return std::binary_search(interlaced.begin(), interlaced.end(), chunk); }

int64_t PipelineShape::stage_of(int64_t chunk) const {
  if (is_interlaced(chunk)) return -1;
  const auto before = std::lower_bound(interlaced.begin(), interlaced.end(), chunk) - interlaced.begin();
  return (chunk - before) % stages;
}

namespace {

// check() less an explicit schedule's programs.
void check_counts(const PipelineShape& p) {
  if (p.stages < 1) throw Error("pipeline schedule: " + std::to_string(p.stages) + " stages (at least 1)");
  if (p.micro_batches < 1) throw Error("pipeline schedule: " + std::to_string(p.micro_batches) + " micro-batches (at least 1)");
  if (p.virtual_stages < 1) throw Error("pipeline schedule: " + std::to_string(p.virtual_stages) + " virtual stages (at least 1)");
  if (p.schedule == PipelineSchedule::k1F1B && p.virtual_stages > 1)
    throw Error("pipeline schedule: 1f1b runs one chunk per stage, not " + std::to_string(p.virtual_stages) + " (use interleaved)");
  if (p.schedule == PipelineSchedule::kInterleaved && p.virtual_stages == 1)
    throw Error("pipeline schedule: interleaved runs several chunks per stage, and this pipeline has one (use 1f1b)");
  if (p.schedule == PipelineSchedule::kInterleaved && p.micro_batches % p.stages != 0)
    throw Error("pipeline schedule: interleaved runs micro-batches in groups of the " + std::to_string(p.stages) + " stages, and " +
                std::to_string(p.micro_batches) + " micro-batches are not a multiple of it");
  if (p.interlaced.empty()) return;
  if (p.stages < 2) throw Error("pipeline schedule: interlaced chunks are run by every stage together, and this pipeline has one stage");
  // (Megatron-LM's interleaved order would put another micro-batch's
  // backward between a stage's two steps beside an interlaced chunk, which
  // the runtime does not run: check_paired_backwards.)
  if (p.schedule == PipelineSchedule::kInterleaved)
    throw Error("pipeline schedule: interleaved 1F1B with interlaced chunks is not run yet (use gpipe, or write the order)");
  for (size_t k = 0; k < p.interlaced.size(); ++k) {
    const int64_t c = p.interlaced[k];
    if (c < 0 || c >= p.chunks())
      throw Error("pipeline schedule: interlaced chunk " + std::to_string(c) + " of " + std::to_string(p.chunks()) + " chunks (0 .. " +
                  std::to_string(p.chunks() - 1) + ")");
    if (k > 0 && c <= p.interlaced[k - 1]) throw Error("pipeline schedule: interlaced chunks not ascending, each once");
    // (Two side by side run on the same devices: one chunk, as its
    // operators' placement tells them apart from the staged ones only.)
    if (k > 0 && c == p.interlaced[k - 1] + 1)
      throw Error("pipeline schedule: interlaced chunks " + std::to_string(c - 1) + " and " + std::to_string(c) +
                  " are side by side: make them one interlaced chunk");
  }
}

// Chunks in model order: the staged ones' indices (the k-th on stage k mod S).
std::vector<int64_t> staged_chunks(const PipelineShape& p) {
  std::vector<int64_t> out;
  for (int64_t c = 0; c < p.chunks(); ++c)
    if (!p.is_interlaced(c)) out.push_back(c);
  return out;
}

// When each step of `programs` starts and ends (run_order's order), each
// forward lasting forward[c], each backward backward[c], each boundary
// transfer[c] each way; a joint step when every stage is free. Per stage,
// per step of its program.
struct StepTimes {
  std::vector<std::vector<double>> start, end;
};
StepTimes step_times(const PipelineShape& p, const std::vector<std::vector<PipelineStep>>& programs, std::span<const double> forward,
                     std::span<const double> backward, std::span<const double> transfer, const ForwardWait& wait = {});

// The k-th forward (or backward) of stage s in Megatron-LM's interleaved
// order: micro-batches in groups of S through each local chunk in turn
// (backwards through the chunks in reverse). With v = 1 it is micro-batch k.
PipelineStep interleaved_step(const PipelineShape& p, int64_t s, int64_t k, bool backward) {
  const int64_t S = p.stages, v = p.virtual_stages;
  const int64_t in_group = k % (S * v);
  int64_t local = in_group / S;
  if (backward) local = v - 1 - local;
  return {backward, (k / (S * v)) * S + in_group % S, local * S + s};
}

}  // namespace

void check(const PipelineShape& p) {
  check_counts(p);
  if (p.schedule != PipelineSchedule::kExplicit) return;
  if (static_cast<int64_t>(p.programs.size()) != p.stages)
    throw Error("pipeline schedule: " + std::to_string(p.programs.size()) + " stage programs for " + std::to_string(p.stages) + " stages");
  // Each chunk's forwards, and its backwards, in ascending micro-batch
  // order, as every generated schedule runs them: both ends of a stage
  // boundary pair their messages by it, and the weights' gradients add up
  // in that order whatever the schedule.
  for (size_t s = 0; s < p.programs.size(); ++s) {
    std::map<std::pair<int64_t, bool>, int64_t> last;
    for (const PipelineStep& x : p.programs[s]) {
      const auto [it, fresh] = last.emplace(std::make_pair(x.chunk, x.backward), x.micro_batch);
      if (!fresh && x.micro_batch <= it->second)
        throw Error("pipeline schedule: stage " + std::to_string(s) + " runs the " + describe(x) + " after micro-batch " +
                    std::to_string(it->second) + "'s; each chunk's " + (x.backward ? "backwards" : "forwards") +
                    " run in ascending micro-batch order");
      it->second = x.micro_batch;
    }
  }
  run_order(p, p.programs);
}

namespace {

// A generated schedule with interlaced chunks (pipeline_schedule.h,
// "Interlaced chunks"): the staged chunks' programs laid out in slots of
// one step each, every joint step put in at its slot on every stage.
std::vector<std::vector<PipelineStep>> with_joint_steps(const PipelineShape& p) {
  PipelineShape staged = p;
  staged.interlaced.clear();
  const std::vector<std::vector<PipelineStep>> base = stage_programs(staged);
  const int64_t C = staged.chunks(), M = p.micro_batches;
  const std::vector<double> one(static_cast<size_t>(C), 1.0), none(static_cast<size_t>(C), 0.0);
  const StepTimes t = step_times(staged, base, one, one, none);
  // Per staged chunk and micro-batch: when its forward and backward start and end.
  std::vector<double> f_start(static_cast<size_t>(C * M)), f_end(f_start.size()), b_start(f_start.size()), b_end(f_start.size());
  auto at = [&](int64_t c, int64_t m) { return static_cast<size_t>(c * M + m); };
  for (size_t s = 0; s < base.size(); ++s)
    for (size_t i = 0; i < base[s].size(); ++i) {
      const PipelineStep& x = base[s][i];
      (x.backward ? b_start : f_start)[at(x.chunk, x.micro_batch)] = t.start[s][i];
      (x.backward ? b_end : f_end)[at(x.chunk, x.micro_batch)] = t.end[s][i];
    }
  const std::vector<int64_t> real = staged_chunks(p);  // staged chunk k's index
  struct Joint {
    double slot;
    PipelineStep step;
  };
  std::vector<Joint> joint;
  for (const int64_t x : p.interlaced) {
    // The staged chunks just before and just after it (-1: none).
    const auto after = std::upper_bound(real.begin(), real.end(), x) - real.begin();
    const int64_t before = after - 1, next = after < C ? after : -1;
    for (int64_t m = 0; m < M; ++m) {
      joint.push_back({before >= 0 ? f_end[at(before, m)] : f_start[at(next, m)], {false, m, x}});
      joint.push_back({next >= 0 ? b_end[at(next, m)] : b_start[at(before, m)], {true, m, x}});
    }
  }
  // At one slot: the earlier micro-batch first (an older one's backward
  // before a newer one's forward frees its activations first); of one
  // micro-batch, forwards in model order (a later chunk's needs an
  // earlier's), then backwards in reverse.
  std::sort(joint.begin(), joint.end(), [](const Joint& a, const Joint& b) {
    auto key = [](const Joint& j) {
      return std::make_tuple(j.slot, j.step.micro_batch, j.step.backward, j.step.backward ? -j.step.chunk : j.step.chunk);
    };
    return key(a) < key(b);
  });
  std::vector<std::vector<PipelineStep>> out(base.size());
  for (size_t s = 0; s < base.size(); ++s) {
    size_t j = 0;
    for (size_t i = 0; i < base[s].size(); ++i) {
      for (; j < joint.size() && joint[j].slot <= t.start[s][i]; ++j) out[s].push_back(joint[j].step);
      PipelineStep x = base[s][i];
      x.chunk = real[static_cast<size_t>(x.chunk)];
      out[s].push_back(x);
    }
    for (; j < joint.size(); ++j) out[s].push_back(joint[j].step);
  }
  run_order(p, out);  // (it cannot deadlock: the slots are a run of it)
  return out;
}

}  // namespace

std::vector<std::vector<PipelineStep>> stage_programs(const PipelineShape& p) {
  check(p);
  if (p.schedule == PipelineSchedule::kExplicit) return p.programs;
  if (!p.interlaced.empty()) return with_joint_steps(p);
  const int64_t S = p.stages, total = p.micro_batches * p.virtual_stages;
  std::vector<std::vector<PipelineStep>> out(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s) {
    std::vector<PipelineStep>& prog = out[static_cast<size_t>(s)];
    prog.reserve(static_cast<size_t>(2 * total));
    // Every schedule runs a chunk's backwards in ascending micro-batch
    // order, so the gradients add up in the same order whichever runs.
    if (p.schedule == PipelineSchedule::kGPipe) {  // micro-batch by micro-batch, through the stage's chunks in turn
      const int64_t v = p.virtual_stages;
      for (int64_t m = 0; m < p.micro_batches; ++m)
        for (int64_t j = 0; j < v; ++j) prog.push_back({false, m, j * S + s});
      for (int64_t m = 0; m < p.micro_batches; ++m)
        for (int64_t j = v; j-- > 0;) prog.push_back({true, m, j * S + s});
      continue;
    }
    int64_t warmup = std::min(S - s - 1, total);  // 1f1b
    // Megatron-LM's interleaved warm-up, or every forward first when
    // M = S, as Megatron-LM runs it.
    if (p.schedule == PipelineSchedule::kInterleaved)
      warmup = p.micro_batches == S ? total : std::min(2 * (S - s - 1) + (p.virtual_stages - 1) * S, total);
    int64_t f = 0, b = 0;
    for (; f < warmup; ++f) prog.push_back(interleaved_step(p, s, f, false));
    while (f < total) {
      prog.push_back(interleaved_step(p, s, f++, false));
      prog.push_back(interleaved_step(p, s, b++, true));
    }
    for (; b < total; ++b) prog.push_back(interleaved_step(p, s, b, true));
  }
  return out;
}

std::string describe(const PipelineStep& s) {
  return std::string(s.backward ? "backward" : "forward") + " of micro-batch " + std::to_string(s.micro_batch) + " through chunk " +
         std::to_string(s.chunk);
}

std::vector<ScheduledStep> run_order(const PipelineShape& p, const std::vector<std::vector<PipelineStep>>& programs) {
  check_counts(p);
  const int64_t S = p.stages, C = p.chunks(), M = p.micro_batches;
  if (C > (int64_t{1} << 20) || M > (int64_t{1} << 20))
    throw Error("pipeline schedule: " + std::to_string(C) + " chunks and " + std::to_string(M) + " micro-batches (at most 2^20 each)");
  if (static_cast<int64_t>(programs.size()) != S)
    throw Error("pipeline schedule: " + std::to_string(programs.size()) + " stage programs for " + std::to_string(S) + " stages");
  std::vector<char> fwd(static_cast<size_t>(C * M), 0), bwd(static_cast<size_t>(C * M), 0);
  auto at = [&](int64_t c, int64_t m) { return static_cast<size_t>(c * M + m); };
  // The step s needs that has not run; nullopt when it can run.
  auto missing = [&](const PipelineStep& x) -> std::optional<PipelineStep> {
    if (!x.backward) {
      if (x.chunk > 0 && !fwd[at(x.chunk - 1, x.micro_batch)]) return PipelineStep{false, x.micro_batch, x.chunk - 1};
      return std::nullopt;
    }
    if (!fwd[at(x.chunk, x.micro_batch)]) return PipelineStep{false, x.micro_batch, x.chunk};
    if (x.chunk + 1 < C && !bwd[at(x.chunk + 1, x.micro_batch)]) return PipelineStep{true, x.micro_batch, x.chunk + 1};
    return std::nullopt;
  };
  size_t total = 0;
  for (int64_t s = 0; s < S; ++s) {
    for (const PipelineStep& x : programs[static_cast<size_t>(s)])
      if (x.chunk < 0 || x.chunk >= C || !p.runs_on(x.chunk, s) || x.micro_batch < 0 || x.micro_batch >= M)
        throw Error("pipeline schedule: stage " + std::to_string(s) + " runs the " + describe(x) + ", which is not one of its steps");
    total += programs[static_cast<size_t>(s)].size();
  }
  std::vector<size_t> next(static_cast<size_t>(S), 0);
  auto at_step = [&](int64_t s, const PipelineStep& x) {
    const auto& prog = programs[static_cast<size_t>(s)];
    const size_t i = next[static_cast<size_t>(s)];
    return i < prog.size() && prog[i] == x;
  };
  // A stage a joint step waits for: the first not at it (-1: every stage is).
  auto not_at = [&](const PipelineStep& x) {
    for (int64_t t = 0; t < S; ++t)
      if (!at_step(t, x)) return t;
    return int64_t{-1};
  };
  std::vector<ScheduledStep> out;
  out.reserve(total);
  size_t ran = 0;  // stage steps run (a joint step is one per stage)
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < S; ++s) {
      const auto& prog = programs[static_cast<size_t>(s)];
      size_t& i = next[static_cast<size_t>(s)];
      while (i < prog.size() && !missing(prog[i])) {
        const PipelineStep x = prog[i];
        const bool joint = p.is_interlaced(x.chunk);
        if (joint && not_at(x) >= 0) break;
        char& done = (x.backward ? bwd : fwd)[at(x.chunk, x.micro_batch)];
        if (done) throw Error("pipeline schedule: stage " + std::to_string(s) + " runs the " + describe(x) + " twice");
        done = 1;
        out.push_back({joint ? -1 : s, x});
        if (joint) {
          for (size_t& k : next) ++k;
          ran += static_cast<size_t>(S);
        } else {
          ++i, ++ran;
        }
        progress = true;
      }
    }
  }
  if (ran == total) {
    for (size_t k = 0; k < fwd.size(); ++k)
      if (!fwd[k] || !bwd[k])
        throw Error("pipeline schedule: the " + describe(PipelineStep{!!fwd[k], static_cast<int64_t>(k) % M, static_cast<int64_t>(k) / M}) +
                    " is in no stage's program");
    return out;
  }
  // Stuck: every unfinished stage waits, for a step of another stage or,
  // at a joint step, for another stage to reach it. Following the waits
  // from the first unfinished stage reaches either a stage that has
  // finished its program (what is waited for is in none) or a stage
  // already passed: the cycle.
  struct Wait {
    PipelineStep here;
    std::string what;  // what it waits for
    int64_t stage = 0;  // the stage it waits on
  };
  auto waits = [&](int64_t s) {
    const PipelineStep here = programs[static_cast<size_t>(s)][next[static_cast<size_t>(s)]];
    if (const auto need = missing(here)) {
      int64_t t = p.stage_of(need->chunk);
      if (t < 0) t = std::max<int64_t>(not_at(*need), 0);  // a joint step waits for the stages not at it
      return Wait{here, "the " + describe(*need), t};
    }
    const int64_t t = not_at(here);  // a joint step every stage runs
    return Wait{here, "stage " + std::to_string(t) + " to run it too", t};
  };
  int64_t s = 0;
  while (next[static_cast<size_t>(s)] == programs[static_cast<size_t>(s)].size()) ++s;
  std::vector<int64_t> path;
  std::vector<char> seen(static_cast<size_t>(S), 0);
  while (!seen[static_cast<size_t>(s)]) {
    seen[static_cast<size_t>(s)] = 1;
    path.push_back(s);
    const Wait w = waits(s);
    const int64_t t = w.stage;
    if (next[static_cast<size_t>(t)] == programs[static_cast<size_t>(t)].size())
      throw Error("pipeline schedule: stage " + std::to_string(s) + " waits at the " + describe(w.here) + " for " + w.what + ", which stage " +
                  std::to_string(t) + " never runs");
    s = t;
  }
  std::string cycle;
  for (size_t k = static_cast<size_t>(std::find(path.begin(), path.end(), s) - path.begin()); k < path.size(); ++k) {
    const Wait w = waits(path[k]);
    cycle += "stage " + std::to_string(path[k]) + " waits at the " + describe(w.here) + " for " + w.what + " -> ";
  }
  throw Error("pipeline schedule deadlocks: " + cycle + "stage " + std::to_string(s));
}

void check_paired_backwards(const PipelineShape& p, const std::vector<std::vector<PipelineStep>>& programs) {
  if (p.interlaced.empty()) return;
  for (int64_t s = 0; s < p.stages && s < static_cast<int64_t>(programs.size()); ++s)
    for (int64_t a = 0; a + 1 < p.chunks(); ++a) {
      if (!p.runs_on(a, s) || !p.runs_on(a + 1, s)) continue;
      const PipelineStep* open = nullptr;  // a backward through a + 1 whose one through a has not run
      for (const PipelineStep& x : programs[static_cast<size_t>(s)]) {
        if (!x.backward || (x.chunk != a && x.chunk != a + 1)) continue;
        const bool pairs = open ? x.chunk == a && x.micro_batch == open->micro_batch : x.chunk == a + 1;
        if (!pairs)
          throw Error("pipeline: stage " + std::to_string(s) + " runs the " + describe(x) + (open ? " after the " + describe(*open) : std::string()) +
                      "; the runtime runs a backward through chunk " + std::to_string(a) + " right after the same micro-batch's through chunk " +
                      std::to_string(a + 1) + " on a stage running both (no other backward through either between)");
        open = open ? nullptr : &x;
      }
    }
}

std::vector<std::vector<int64_t>> activation_sets_held(const PipelineShape& p, const std::vector<std::vector<PipelineStep>>& programs) {
  std::vector<std::vector<int64_t>> out(programs.size(), std::vector<int64_t>(static_cast<size_t>(p.chunks()), 0));
  for (size_t s = 0; s < programs.size(); ++s) {
    int64_t now = 0, most = 0;
    std::vector<int64_t> own(static_cast<size_t>(p.chunks()), 0);
    for (const PipelineStep& x : programs[s]) {
      int64_t& o = own[static_cast<size_t>(x.chunk)];
      o += x.backward ? -1 : 1;
      int64_t& held = out[s][static_cast<size_t>(x.chunk)];
      if (p.is_interlaced(x.chunk)) held = std::max(held, o);
      else most = std::max(most, now += x.backward ? -1 : 1);
    }
    for (int64_t c = 0; c < p.chunks(); ++c)
      if (!p.is_interlaced(c)) out[s][static_cast<size_t>(c)] = (most + p.virtual_stages - 1) / p.virtual_stages;
  }
  return out;
}

std::vector<int64_t> in_flight_chunks(const std::vector<std::vector<PipelineStep>>& programs) {
  std::vector<int64_t> out;
  out.reserve(programs.size());
  for (const auto& prog : programs) {
    int64_t now = 0, most = 0;
    for (const PipelineStep& x : prog) most = std::max(most, now += x.backward ? -1 : 1);
    out.push_back(most);
  }
  return out;
}

std::vector<std::vector<PipelineStep>> parse_pipeline_programs(std::string_view text, const std::string& source) {
  std::vector<std::vector<PipelineStep>> out;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<PipelineStep> prog;
    const int64_t stage = static_cast<int64_t>(out.size());
    size_t at = 0;
    while (at < line.size()) {
      if (std::isspace(static_cast<unsigned char>(line[at]))) {
        ++at;
        continue;
      }
      size_t stop = at;
      while (stop < line.size() && !std::isspace(static_cast<unsigned char>(line[stop]))) ++stop;
      const std::string token(line.substr(at, stop - at));
      at = stop;
      auto bad = [&](const std::string& why) {
        return Error(source + ": line " + std::to_string(line_no) + ": '" + token + "': " + why);
      };
      if (token[0] != 'F' && token[0] != 'B') throw bad("expected F<micro-batch> or B<micro-batch>, optionally @<chunk>");
      auto number = [&](std::string_view digits) {
        if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
          throw bad("expected F<micro-batch> or B<micro-batch>, optionally @<chunk>");
        return static_cast<int64_t>(std::stoll(std::string(digits)));
      };
      const std::string_view body = std::string_view(token).substr(1);
      const size_t chunk_at = body.find('@');
      PipelineStep step;
      step.backward = token[0] == 'B';
      step.micro_batch = number(body.substr(0, chunk_at));
      step.chunk = chunk_at == std::string_view::npos ? stage : number(body.substr(chunk_at + 1));
      prog.push_back(step);
    }
    if (!prog.empty()) out.push_back(std::move(prog));
  }
  if (out.empty()) throw Error(source + ": no stage program (one line of steps per stage, e.g. \"F0 F1 B0 B1\")");
  return out;
}

namespace {

StepTimes step_times(const PipelineShape& p, const std::vector<std::vector<PipelineStep>>& programs, std::span<const double> forward,
                     std::span<const double> backward, std::span<const double> transfer, const ForwardWait& wait) {
  const std::vector<ScheduledStep> order = run_order(p, programs);
  const int64_t C = p.chunks(), M = p.micro_batches;
  if (static_cast<int64_t>(forward.size()) != C || static_cast<int64_t>(backward.size()) != C ||
      static_cast<int64_t>(transfer.size()) < C - 1)
    throw Error("pipeline schedule: step times for " + std::to_string(forward.size()) + " chunks, where the schedule has " + std::to_string(C));
  std::vector<double> fwd_end(static_cast<size_t>(C * M), 0.0), bwd_end(static_cast<size_t>(C * M), 0.0);
  std::vector<double> stage_free(static_cast<size_t>(p.stages), 0.0);
  auto at = [&](int64_t c, int64_t m) { return static_cast<size_t>(c * M + m); };
  StepTimes out;
  for (const auto& prog : programs) out.start.emplace_back(prog.size(), 0.0), out.end.emplace_back(prog.size(), 0.0);
  std::vector<size_t> next(programs.size(), 0);
  for (const ScheduledStep& s : order) {
    const PipelineStep& x = s.step;
    const auto c = static_cast<size_t>(x.chunk);
    const auto first = static_cast<size_t>(std::max<int64_t>(s.stage, 0)), last = s.stage < 0 ? programs.size() : first + 1;
    double ready = 0;
    for (size_t k = first; k < last; ++k) ready = std::max(ready, stage_free[k]);
    if (!x.backward && x.chunk > 0) ready = std::max(ready, fwd_end[at(x.chunk - 1, x.micro_batch)] + transfer[c - 1]);
    if (x.backward) {
      ready = std::max(ready, fwd_end[at(x.chunk, x.micro_batch)]);
      if (x.chunk + 1 < C) ready = std::max(ready, bwd_end[at(x.chunk + 1, x.micro_batch)] + transfer[c]);
    }
    // (A forward may first wait, as told.)
    if (!x.backward && wait) ready += wait(s.stage, x, ready);
    const double end = ready + (x.backward ? backward[c] : forward[c]);
    (x.backward ? bwd_end : fwd_end)[at(x.chunk, x.micro_batch)] = end;
    for (size_t k = first; k < last; ++k) {
      stage_free[k] = end;
      out.start[k][next[k]] = ready, out.end[k][next[k]] = end;
      ++next[k];
    }
  }
  return out;
}

}  // namespace

double schedule_makespan(const PipelineShape& p, const std::vector<std::vector<PipelineStep>>& programs, std::span<const double> forward,
                         std::span<const double> backward, std::span<const double> transfer, const ForwardWait& wait) {
  const StepTimes t = step_times(p, programs, forward, backward, transfer, wait);
  double makespan = 0;
  for (const auto& ends : t.end)
    for (const double e : ends) makespan = std::max(makespan, e);
  return makespan;
}

std::string format_pipeline_programs(const std::vector<std::vector<PipelineStep>>& programs) {
  std::string out;
  for (size_t s = 0; s < programs.size(); ++s) {
    for (size_t k = 0; k < programs[s].size(); ++k) {
      const PipelineStep& x = programs[s][k];
      out += (k ? " " : "") + std::string(x.backward ? "B" : "F") + std::to_string(x.micro_batch);
      if (x.chunk != static_cast<int64_t>(s)) out += "@" + std::to_string(x.chunk);
    }
    out += "\n";
  }
  return out;
}

}  // namespace pcgx
