#pragma once
// Pipeline schedules: the order in which each pipeline stage runs the
// forward and backward passes of its micro-batches (docs/design.md, "One
// schedule type"). One value, read by the simulator (search/simulator.h)
// and checked against the cost model's closed form (search/pipeline.h).
//
// A pipelined model is cut into C = S v chunks in model order, chunk c on
// stage c mod S (v = 1 without interleaving), and a step is M micro-batches.
// An interlaced pipeline (SuperScaler's, Section 3.4.2: an embedding split
// over every device while the layers run as stages) adds chunks that every
// stage runs together: C = S v + I, the staged chunks in model order
// (skipping the I interlaced ones) the k-th on stage k mod S.
// Chunk c's forward of micro-batch m needs chunk c - 1's forward of m; its
// backward needs its own forward of m and chunk c + 1's backward of m.
// Each stage runs its steps one at a time in its program's order:
//
//   gpipe        every forward (micro-batch by micro-batch, each through
//                the stage's chunks in model order), then every backward
//                (micro-batch by micro-batch, the chunks in reverse)
//                (Huang et al. 2019): M micro-batches' activations in
//                flight on every stage.
//   1f1b         S - s - 1 forwards to warm up stage s, then one forward and
//                one backward in turn, then the remaining backwards
//                (PipeDream-Flush; Narayanan et al. 2021): at most S - s
//                micro-batches in flight on stage s.
//   interleaved  Megatron-LM's interleaved 1F1B (Narayanan et al. 2021,
//                Section 2.2): a stage's forwards run micro-batches in groups
//                of S through each of its chunks in turn, its backwards the
//                same groups through its chunks in reverse; the warm-up is
//                2 (S - s - 1) + (v - 1) S forwards, then one forward and one
//                backward in turn. M must be a multiple of S.
//   explicit     each stage's order as a person wrote it (SuperScaler's
//                schedules, e.g. several forwards per backward): any order
//                that runs every step of the stage once, each chunk's
//                forwards and its backwards in ascending micro-batch order
//                (as the three above), and does not deadlock (check: the
//                cross-stage happens-before graph has no cycle; a cycle is
//                refused, printed stage by stage).
//
// All three compute the same gradients: they differ in time (the bubble)
// and in how many micro-batches' activations a stage holds at once.
//
// Interlaced chunks. A step through one is one joint step of every stage
// (each device runs its tasks of it; its collectives span the stages), in
// every stage's program, at the same place relative to the other joint
// steps. Generated schedules place them as SuperScaler's Algorithm 2 does:
// the staged programs laid out in slots of one step each, a joint forward
// goes in at the slot where the staged chunk after it needs it (or the
// one before it has just made its input), a joint backward where the
// staged chunk after it has just made its gradient (or the one before it
// needs it), each a barrier between the staged steps of every stage.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pcgx {

enum class PipelineSchedule : uint8_t { kGPipe, k1F1B, kInterleaved, kExplicit };
// The schedules generated from the shape alone (explicit ones are written).
inline constexpr PipelineSchedule kPipelineSchedules[] = {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B,
                                                          PipelineSchedule::kInterleaved};
// "gpipe", "1f1b", "interleaved", "explicit" (named only: its orders are data).
const char* name(PipelineSchedule s);
std::optional<PipelineSchedule> pipeline_schedule_named(std::string_view text);

// One step of a stage's program.
struct PipelineStep {
  bool backward = false;
  int64_t micro_batch = 0;
  int64_t chunk = 0;  // in model order, 0 .. C - 1 (on stage chunk mod S)
  bool operator==(const PipelineStep&) const = default;
};

// The shape of a pipelined step.
struct PipelineShape {
  int64_t stages = 1;          // S
  int64_t micro_batches = 1;   // M
  int64_t virtual_stages = 1;  // v: chunks per stage
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  // kExplicit: each stage's program as written (parse_pipeline_programs).
  std::vector<std::vector<PipelineStep>> programs = {};
  // The interlaced chunks (run by every stage together), ascending.
  std::vector<int64_t> interlaced = {};
  int64_t chunks() const { return stages * virtual_stages + static_cast<int64_t>(interlaced.size()); }
  bool is_interlaced(int64_t chunk) const;
  // The stage running `chunk`; -1 for an interlaced one.
  int64_t stage_of(int64_t chunk) const;
  bool runs_on(int64_t chunk, int64_t stage) const { return is_interlaced(chunk) || stage_of(chunk) == stage; }
  // Whether micro-batches are in flight at once: anything but one stage
  // of one chunk under 1f1b, which runs each micro-batch's forward and
  // backward through the whole graph before the next's (and but one
  // micro-batch).
  bool in_flight() const {
    return micro_batches > 1 && (stages > 1 || virtual_stages > 1 || schedule != PipelineSchedule::k1F1B);
  }
  // The schedule a plan with v chunks per stage runs unless told: 1f1b,
  // interleaved when v > 1.
  static PipelineSchedule default_for(int64_t virtual_stages) {
    return virtual_stages > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::k1F1B;
  }
};

// Throws pcgx::Error naming what is wrong: a count below 1, interleaved
// with v = 1 or M not a multiple of S, 1f1b with v > 1, interlaced chunks
// out of order or range, side by side, with one stage or under
// interleaved 1F1B; for an explicit
// schedule, programs not one per stage, a step run twice, on the wrong
// stage or by no stage, or a deadlock (run_order).
void check(const PipelineShape& p);

// Each stage's program: 2 M (v + I) steps per stage, in the order it runs them.
std::vector<std::vector<PipelineStep>> stage_programs(const PipelineShape& p);

// The stage programs run together: a sequence of (stage, step) in which
// every step comes after the steps it needs and after the steps before it
// in its stage's program (a topological order of the cross-stage
// happens-before graph); a joint step once, when every stage has reached
// it. Throws pcgx::Error when the programs deadlock, naming the step each
// stuck stage waits at and the step (or the stage) it waits for.
struct ScheduledStep {
  int64_t stage = 0;  // -1: a joint step (an interlaced chunk's), every stage's
  PipelineStep step;
};
std::vector<ScheduledStep> run_order(const PipelineShape& p, const std::vector<std::vector<PipelineStep>>& programs);

// How long the stages' programs take to run together (throws as run_order
// does): chunk c's forward of one micro-batch lasts forward[c], its
// backward backward[c], and the boundary between chunks c and c + 1 takes
// transfer[c] each way (activation forward, its gradient back). Each step
// starts when its stage has finished the step before it in its program
// and the step it needs has ended and crossed its boundary; a joint step
// when every stage has. With every
// stage alike and no transfer, 1f1b and gpipe take (M + S - 1)(f + b) and
// interleaved (M + (S - 1)/v)(f + b) for a stage's f + b over its chunks:
// the closed forms of search/pipeline.h; a written order takes its own.
// With `wait`, each forward step, ready at `start` (seconds after the step
// starts), first waits wait(stage, step, start) seconds (ZeRO's weights
// gathered beside the forward pass, search/param_gathers.h); called for
// every forward step, in run order (a joint step's stage: -1).
using ForwardWait = std::function<double(int64_t stage, const PipelineStep& step, double start)>;
double schedule_makespan(const PipelineShape& p, const std::vector<std::vector<PipelineStep>>& programs, std::span<const double> forward,
                         std::span<const double> backward, std::span<const double> transfer, const ForwardWait& wait = {});

// The most micro-batches whose forward a stage has run through one of its
// chunks and whose backward there it has not, counted over its chunks
// (a stage holding v chunks counts a micro-batch once per chunk it is in
// flight in): what the stage's activation memory must hold, in chunk
// activation sets. Per stage.
std::vector<int64_t> in_flight_chunks(const std::vector<std::vector<PipelineStep>>& programs);

// With interlaced chunks: throws pcgx::Error naming the stage and the step
// where a stage running two adjacent chunks (one interlaced) runs another
// micro-batch's backward through either between a backward through the
// later one and the same micro-batch's through the earlier (the CPU
// runtime keeps the gradient between them: runtime/device_executor.h).
// The generated schedules (gpipe, 1f1b) never do.
void check_paired_backwards(const PipelineShape& p, const std::vector<std::vector<PipelineStep>>& programs);

// Per stage, per chunk: the micro-batches' activation sets a device of the
// stage holds at most for the chunk, as the memory model counts them: for
// a staged chunk the stage's share per chunk of its staged steps in flight
// (in_flight_chunks of them, over v, rounded up; a device holds only its
// own stage's chunks, and the boundaries it receives), for an interlaced
// chunk the most of its own micro-batches in flight.
std::vector<std::vector<int64_t>> activation_sets_held(const PipelineShape& p, const std::vector<std::vector<PipelineStep>>& programs);

// "forward of micro-batch 3 through chunk 5".
std::string describe(const PipelineStep& s);

// Explicit stage programs as text (docs/plans.md): one line per stage,
// its steps in order separated by spaces, "F3" the forward and "B3" the
// backward of micro-batch 3 through chunk s on stage s (the stage's
// chunk without interleaving or interlaced chunks), "F3@5" through chunk 5
// (interleaved: chunk c runs on stage c mod S; with interlaced chunks,
// name every step's chunk); '#' starts a
// comment, blank lines are skipped. Throws pcgx::Error naming `source`,
// the line and the token for anything else.
std::vector<std::vector<PipelineStep>> parse_pipeline_programs(std::string_view text, const std::string& source);
// The same, written (one line per stage, "@chunk" where the chunk is not the stage's number).
std::string format_pipeline_programs(const std::vector<std::vector<PipelineStep>>& programs);

}  // namespace pcgx
