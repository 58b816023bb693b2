#pragma once
// Pipeline parallelism (Unity, Section 5.4; docs/design.md "Search"): the model
// cut into S sequential stages, each on its own D/S devices, every operator
// staged, and each mini-batch processed as M micro-batches under the 1F1B
// schedule (one forward, one backward, alternating once the pipeline is
// full) with a flush at the end of the iteration: the micro-batches'
// gradients are summed before the one optimizer step, so a pipelined run
// computes exactly what an unpipelined one does (no stale weights, unlike
// PipeDream-2BW, which Unity follows; we pay for the flush in the bubble).
//
// Stages. As in Unity, a stage talks only to the next one: stage boundaries
// are cuts where exactly one tensor crosses (graph_splitting.h), chosen by
// a DP over those cuts that minimizes the largest stage's single-device
// forward + backward time. Each stage is searched as a graph of its own on
// D/S devices with options.algorithm (`unity` by default; identical stages
// are searched once), with its boundary tensors split along samples by D/S
// where a micro-batch (of the most tried) takes that, else by the largest
// power-of-two share of D/S it takes, the rest of D/S splitting the
// second dimension (a transformer's sequence), else the last
// (Megatron-LM's scatter-gather). It is searched pipelined: a Pipeline(0, M) after
// each of its inputs, so every operator runs M times on micro-batch slices
// (cost_model.h costs each slice) and a plan found splits a micro-batch's
// samples, not the whole batch's; once per micro-batch count tried. Its
// memory counts the micro-batches the first stage's chunks hold at once,
// on 1/v of the devices' memory (a device holds its stage's v chunks); a
// chunk that fits nothing so is searched again holding what its own stage
// holds, and the exact memory of each stage is checked after. Stated plans (Megatron-LM's,
// a written one) are lowered unpipelined and pipelined afterwards; where a
// written plan states devices (numbered within each stage), its chunks
// keep the views its lowering gave (the stated devices, the rest mapped)
// and are priced by simulation, as the whole plan then is. An
// operator that cannot process its samples in slices (BatchNorm, whose
// statistics span the whole batch) makes the model unpipelinable.
//
// Stage boundaries are tried twice where the model has repeating layers
// that the chunks divide: balanced as above, and Megatron-LM's even
// layers (below); the faster plan wins.
//
// Time per iteration (1F1B with flush). With t_s the time of one
// micro-batch's forward and backward on stage s, including receiving its
// boundary tensor from stage s - 1 and sending back its gradient, and u_s
// stage s's optimizer update and weight-gradient synchronization:
//     T = (M + S - 1) * max_s t_s + max_s u_s
// M slots of the slowest stage in the steady state, S - 1 more to fill and
// drain the pipeline (the bubble). That is the time with every stage
// alike; the plan is priced by the schedule's steps run together, each
// step holding its stage for its chunk's forward or backward and the
// boundary it receives or sends back (pipeline_timing.h, pcg's
// schedule_makespan), which comes to the formula then and, with one chunk
// per stage, to less where the stages differ (the other stages' fill and
// drain steps are shorter than the slowest's). Memory: stage s keeps the activations of
// at most min(S - s, M) micro-batches (s from 0), a fraction
// min(S - s, M) / M of the whole mini-batch's.
//
// Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's virtual pipeline
// stages): with v virtual stages per device the model is cut into S v
// chunks, chunk j on the devices of stage j mod S, so each device holds v
// chunks a micro-batch passes through in turn. With t_s now the time of
// one micro-batch through all of stage s's chunks (each receiving its
// boundary and sending back its gradient):
//     T = (M + (S - 1) / v) * max_s t_s + max_s u_s
// (with every stage alike; priced by its steps as above) the bubble v times smaller, for v times the boundary messages; M must be
// a multiple of S (as Megatron-LM requires). Memory: device s keeps the
// chunk activations of Megatron-LM's warm-up, 2 (S - s - 1) + (v - 1) S
// micro-batch chunks, and one more, spread over its v chunks.
//
// Megatron-LM's plan (options.algorithm megatron) cuts the stages
// differently: the model's layers split evenly over the S v chunks, the
// embeddings in the first and the head in the last, as Megatron-LM
// assigns them (not balanced by time); each stage is the expert's plan at
// the stated tensor-parallel degree.
//
// A written plan may state where its chunks end (PipelineOptions::
// boundaries); then only those cuts are tried.
//
// An interlaced pipeline (a written plan's, PipelineOptions::interlaced)
// lowers each interlaced chunk on every device and each staged chunk on
// its stage's; every stage holds the interlaced chunks' share of their
// devices beside its own chunks, and the schedule's makespan (a joint
// step holds every stage) has no closed form.
//
// Unless given, S is tried at 2, 4 and 8 (dividing the devices, at most
// one more than the cuts) and M at S, 2S, 4S and 8S; the fastest plan wins.
//
// One stage (S = 1) is gradient accumulation: the whole model on every
// device, M micro-batches one after the other, T = M t + u, the
// activations of one micro-batch kept at a time.
//
// In either, the weight gradients are synchronized once per iteration,
// during the last micro-batch's backward pass (PyTorch DDP's no_sync on the
// others; Megatron-LM's gradient reduction after the last micro-batch), so
// only that backward can hide the buckets (gradient_sync.h); except, with
// one stage, under ZeRO 2 and 3, which reduce-scatter every micro-batch's
// gradients in its own backward pass (and at 3 gather its weights again:
// training_recipe.h's syncs_every_micro_batch; SyncGroup::rounds).
//
// The result is one PCG, the stages' PCGs joined (the layout change between
// two stages runs on the receiving stage), with machine views offset to each
// stage's devices: the runtime runs it like any strategy.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/search/pipeline_timing.h"
#include "pcgx/search/search.h"

namespace pcgx::search {

struct PipelineOptions {
  int64_t stages = 0;         // 0: try 2, 4, 8; 1: gradient accumulation
  int64_t micro_batches = 0;  // 0: try S, 2S, 4S, 8S
  // v: chunks per device (interleaved 1F1B when > 1); 0: 1, 2 and 4 tried
  // with each stage count (searched plans, chunks not stated)
  int64_t virtual_stages = 1;
  // The schedule the stages run (a plan's); unset: 1F1B, interleaved with
  // v > 1. Its micro-batches in flight are what memory counts, and its
  // steps' makespan is the time (pipeline_timing.h).
  std::optional<PipelineSchedule> schedule;
  std::vector<std::vector<PipelineStep>> programs;  // with schedule explicit
  // Where the chunks end (a written plan's "boundaries"): the names of the
  // S v - 1 operators that end every chunk but the last, in model order,
  // each at a single-tensor cut; the stages are cut there instead of at the
  // balanced or even-layer cuts. Empty: chosen as above.
  std::vector<std::string> boundaries;
  // With micro_batches 0: only the counts below it are tried (0: all).
  int64_t fewer_than = 0;
  // Interlaced chunks (SuperScaler's interlaced pipeline,
  // pcg/pipeline_schedule.h): by index in model order, each run on every
  // device by every stage together; the chunks are then S v + I, the
  // staged ones the model's layers (evenly, Megatron-LM's way) and an
  // interlaced first or last chunk what precedes the first layer or
  // follows the last, unless `boundaries` says where they end. Written
  // plans only (options.algorithm plan).
  std::vector<int64_t> interlaced;
  // Megatron-LM's uneven pipeline (--decoder-first-pipeline-num-layers,
  // --decoder-last-pipeline-num-layers; DeepSpeed's pipelines split a
  // model so where its embeddings and head count as layers): the first
  // (last) stage holds this many of the model's layers, what precedes
  // (follows) them included, and the layers left split evenly over the
  // stages between; with virtual stages, each stage's layers evenly over
  // its chunks. 0: not stated (even layers, or searched). Stated stages
  // only; the cuts are then these, under any search.
  int64_t first_stage_layers = 0, last_stage_layers = 0;
  // Megatron-LM's --account-for-embedding-in-pipeline-split and
  // --account-for-loss-in-pipeline-split (DeepSpeed's pipelines split so
  // too): the embeddings (the loss, with the head) count as a layer, the
  // layers and they split evenly over the chunks, so the first (last)
  // chunk holds one layer fewer than the others. Not with the two above.
  bool embedding_as_layer = false, loss_as_layer = false;
  // Megatron-LM's pipeline layout (pipeline_layout.h): the layers of each
  // chunk in model order (chunk c on stage c mod S), the embeddings in the
  // first, the head and loss in the last; as many as the stages x virtual
  // stages, summing to the model's layers. Empty: not stated. The cuts are
  // then these, under any search.
  std::vector<int64_t> layout;
};

struct PipelineResult {
  SearchResult search;        // the joined strategy (estimate.bubble set), rules, counts, time
  int64_t stages = 0;
  int64_t micro_batches = 0;
  int64_t virtual_stages = 1;
  std::vector<int64_t> interlaced;   // PipelineOptions::interlaced
  std::vector<PipelineStage> stage;  // every chunk, in model order (stages x virtual_stages + interlaced)
  // The estimate is the joined plan's simulation (a plan stating devices),
  // not scheduled_time of `stage` (pipeline_timing.h).
  bool simulated = false;
};

// Searches pipelined strategies for `model` (unpartitioned) on every
// device of `cost`'s machine. Throws pcgx::Error naming the option when
// the stages or micro-batches asked for are impossible, or why no
// pipelined strategy exists.
PipelineResult optimize_pipeline(const Graph& model, const RuleLibrary& rules, const CostModel& cost,
                                 const SearchOptions& options, const PipelineOptions& pipeline);

// Checks `pipeline.boundaries` against `model` (before any search):
// throws FieldError on PipelineOptions.boundaries naming the operator that
// ends no single-tensor cut, is not in the model or comes out of order, or
// the count that is not one per chunk but the last; and the stated first
// and last stages' layers (FieldError on PipelineOptions.first_stage_layers
// or last_stage_layers) where the rest do not split evenly (over the
// stages, and each stage's over its virtual stages), or beside boundaries,
// interlaced chunks or unstated stages; and the layout (FieldError on
// PipelineOptions.layout) likewise, and where its chunks are not the
// stages x virtual stages or its layers not the model's.
void check_boundaries(const Graph& model, const PipelineOptions& pipeline);

// Checks `pipeline.interlaced` (before any search): throws naming what is
// wrong: interlaced chunks with an `algorithm` other than plan (they are
// a written plan's, not searched), one stage, a shape pcg's check refuses,
// an order the runtime cannot run (check_paired_backwards), or, without
// boundaries, a chunk neither first nor last.
void check_interlaced(const PipelineOptions& pipeline, Algorithm algorithm);

// `g` with a Pipeline(0, m) after every Input of rank >= 1 and, when
// `last`, a Batch before every output still pipelined. Throws pcgx::Error
// (naming the operator) when some operator cannot process slices.
// `image`, when given, receives per node of `g` the node it became.
Graph pipelined(const Graph& g, int64_t m, bool last, std::vector<NodeId>* image = nullptr);


// The stage boundaries: stages - 1 cuts (position in graph order of the
// non-source nodes after which the cut falls, and the one tensor crossing
// it) that minimize the largest stage's sum of per-node `weight` (indexed
// by node id). Empty when the graph has too few single-tensor cuts.
std::vector<std::pair<size_t, TensorRef>> balanced_cuts(const Graph& g, const std::vector<double>& weight, int64_t stages);

}  // namespace pcgx::search
