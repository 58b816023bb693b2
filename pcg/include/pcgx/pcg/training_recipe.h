#pragma once
// How a plan trains beyond its graph (docs/training.md): the precision it
// computes in, which activations its backward pass recomputes instead of
// keeping, what data-parallel replicas shard instead of each keeping
// (ZeRO), and the optimizer whose state they keep. All are part of the strategy: saved with it, priced by the cost
// model and the simulator, counted by the memory model, chosen by the
// search.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pcgx/pcg/cross_entropy_kernel.h"
#include "pcgx/pcg/dropout_add_kernel.h"
#include "pcgx/pcg/precision.h"

namespace pcgx {

// Activation recomputation (activation checkpointing), in Megatron-LM's
// vocabulary:
//
//   none       every operator's outputs are kept for the backward pass.
//   gathers    only the activations all-gathered for compute operators
//              (sequence parallelism's gather of a norm's output before a
//              tensor-parallel Linear) are not kept: each is gathered
//              again in backward from its split input, which is kept.
//              What Megatron-LM's sequence parallelism always does, with
//              or without recomputation (its Linear saves the sequence
//              split input and all-gathers it again before the weight
//              gradient's product: Korthikanti et al. 2022, Section
//              4.2.2); without sequence parallelism, none's plan.
//   selective  the products of two activations that grow them (attention's
//              scores q k^T, [b, a, s, s] from [b, a, s, d]) and the
//              same-sized operators after them (scale, softmax, dropout)
//              are recomputed in backward, up to the product that reads
//              them (the attention-weighted sum): the sequence-quadratic
//              memory, cheap to recompute (Korthikanti et al. 2022,
//              "Reducing Activation Recomputation in Large Transformer
//              Models", Section 5); and an activation all-gathered for
//              compute operators (sequence parallelism's gather before a
//              tensor-parallel Linear) is gathered again in backward, its
//              split input kept instead of the gathered copy (their
//              Section 4.2.2).
//   full       each layer's input is kept and the layer re-runs its
//              forward in backward, collectives included, from it
//              (Megatron-LM's): of the tensors at the graph's single-tensor
//              cuts, those where the repeating unit of the gaps between
//              cuts starts (a transformer layer spans two gaps, attention
//              and feed-forward), and an activation the graph outputs (a
//              pipeline stage's boundary). What precedes the first cut
//              (embeddings) and follows the last (the loss) is kept
//              (pcg/recompute_plan.h).
//
// Under full, a plan may recompute only some layers (Megatron-LM's
// --recompute-method block --recompute-num-layers N): the first N layers of
// the model re-run in backward (under pipeline stages the first N of each
// chunk, as Megatron-LM counts them per stage's model chunk), the later
// ones keep their activations; a segment
// whose re-run would free nothing (GPT's position embedding) is counted
// last (recompute_plan.h). Recomputing
// fewer layers keeps more memory and re-runs less compute, so the fewest
// that fit is the fastest plan that fits (what `optimize` chooses).
//
//   full+selective  full recomputation of the first N layers (the same N,
//              recompute_layers, required), selective in the others: the
//              layers left whole still drop their attention scores, so
//              fewer layers need re-running whole to fit
//              (recompute_plan.h).
//   full+gathers  full recomputation of the first N layers (recompute_layers;
//              every layer when not given), and in the layers left whole,
//              and outside the layers, what gathers re-runs: each
//              sequence-parallel gather again in backward, its gathered
//              copy not kept. Megatron-LM's sequence parallelism with
//              --recompute-num-layers N, which gathers again in backward
//              whatever the recomputation (runner/optimize.h).
//   operators  the operators the recipe names (recompute_operators), each
//              recomputed in backward instead of kept, whatever they are:
//              a choice per operator, as a plan states it (nnScaler's
//              per-operator recompute). Named operators that read one
//              another re-run together, with the parallel operators
//              carrying data only between them (recompute_plan.h).
enum class Recompute : uint8_t { kNone, kSelective, kFull, kFullSelective, kOperators, kGathers, kFullGathers };
// The policies a recipe search tries in turn (optimize: none, then
// selective, then full; full+selective is tried as a count of full layers,
// as fewer full layers are). Megatron-LM's plan with sequence parallelism
// starts from gathers instead of none, and its full recomputation is
// full+gathers (runner/optimize.h).
inline constexpr Recompute kRecomputes[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
// Every policy, by name.
inline constexpr Recompute kRecomputePolicies[] = {Recompute::kNone,          Recompute::kGathers,     Recompute::kSelective,   Recompute::kFull,
                                                   Recompute::kFullSelective, Recompute::kFullGathers, Recompute::kOperators};

// none, gathers, selective, full, full+selective, full+gathers, operators.
const char* name(Recompute r);
std::optional<Recompute> recompute_named(std::string_view text);
// Whether the policy takes a count of fully recomputed layers.
inline bool recomputes_layers(Recompute r) { return r == Recompute::kFull || r == Recompute::kFullSelective || r == Recompute::kFullGathers; }
// Whether the policy gathers each sequence-parallel gather again in
// backward outside what it recomputes (gathers, full+gathers; selective
// and full+selective do too, with their own re-runs).
inline bool regathers(Recompute r) { return r == Recompute::kGathers || r == Recompute::kFullGathers; }
// The policy without its gathers again: gathers' none, full+gathers' full;
// any other itself.
inline Recompute without_regathers(Recompute r) {
  return r == Recompute::kGathers ? Recompute::kNone : r == Recompute::kFullGathers ? Recompute::kFull : r;
}
// The policy with them: none's gathers, full's full+gathers; any other
// itself.
inline Recompute with_regathers(Recompute r) { return r == Recompute::kNone ? Recompute::kGathers : r == Recompute::kFull ? Recompute::kFullGathers : r; }
// Why operators stated without its operators is refused (each reader
// names its own field).
inline constexpr const char* kOperatorsNeedNames =
    "required with recompute operators: the names of the operators to recompute (a plan's \"recompute_operators\", "
    "optimize's --recompute-operators)";
// Why full+selective stated without its count is refused (each reader of
// a request or file names its own field).
inline constexpr const char* kFullSelectiveNeedsLayers =
    "required with full+selective (how many layers re-run whole; every layer is full)";

// Sharded data parallelism (ZeRO: Rajbhandari et al. 2020, "ZeRO: Memory
// Optimizations Toward Training Trillion Parameter Models"), by stage. The
// devices holding the same block of a weight (its data-parallel group, r of
// them) split what the stage names into r shards, one each:
//
//   0  nothing: every replica keeps all of its state, gradients are
//      all-reduced and every replica updates the whole block (PyTorch DDP).
//   1  the optimizer state (FP32 master weights, Adam's two moments):
//      gradients are reduce-scattered (in DDP's buckets, behind the backward
//      pass), each device updates its 1/r, then the updated weights are
//      all-gathered in compute precision after the update (DeepSpeed ZeRO-1,
//      Megatron-LM's distributed optimizer without overlap-param-gather).
//   2  the gradients too: a device keeps only the reduced 1/r it updates
//      (DeepSpeed ZeRO-2); the collectives are stage 1's.
//   3  the weights too (DeepSpeed ZeRO-3, PyTorch FSDP's FULL_SHARD): a
//      device keeps 1/r of every weight between uses; each operator that
//      reads a weight all-gathers it (in compute precision) just before
//      its forward and again before its backward, and frees it after; the
//      gradients are reduce-scattered weight by weight, and nothing is
//      gathered after the update. The next operator's gather runs while
//      this one computes (FSDP's prefetch), so at most two operators'
//      gathered weights are held at once.
enum class ZeroStage : uint8_t { k0, k1, k2, k3 };
inline constexpr ZeroStage kZeroStages[] = {ZeroStage::k0, ZeroStage::k1, ZeroStage::k2, ZeroStage::k3};

// "0", "1", "2", "3".
const char* name(ZeroStage z);
std::optional<ZeroStage> zero_named(std::string_view text);
// Whether the stage shards the optimizer state (>= 1) / the gradients (>= 2)
// / the weights (3).
inline bool shards_optimizer(ZeroStage z) { return z >= ZeroStage::k1; }
inline bool shards_gradients(ZeroStage z) { return z >= ZeroStage::k2; }
inline bool shards_weights(ZeroStage z) { return z >= ZeroStage::k3; }
// Whether a step over micro-batches synchronizes each micro-batch's
// gradients as its backward pass produces them (stages 2 and 3: a device
// keeps only the reduced 1/r it updates, so no whole gradient outlives its
// micro-batch; DeepSpeed's ZeRO-2 reduces at every micro-step, FSDP
// without no_sync too, and at stage 3 every micro-batch gathers the
// weights again) rather than summing them whole over the step and
// synchronizing once after the last (stages 0 and 1).
inline bool syncs_every_micro_batch(ZeroStage z) { return shards_gradients(z); }

// A ZeRO stage per weight group (PyTorch FSDP wraps each module with its
// own sharding strategy: FULL_SHARD, SHARD_GRAD_OP): the weights named
// here, by their Weight operators' names, train at their own stage; every
// other weight at the plan's (TrainingRecipe::zero). Stages 1, 2 and 3 mix
// freely: they run the same collectives on a bucket (reduce-scatter, a
// block's update, an all-gather) and differ in what a device keeps
// between uses (its gradient block only from 2, its weight block only at
// 3) and in when (from 2, every micro-batch's gradients are synchronized
// beside its backward pass; at 3 the weights are gathered before each
// use). Stage 0 beside a sharded stage is refused (zero_weights_problem):
// it would all-reduce and update whole where the others reduce-scatter,
// while stage 1 moves the same bytes (a reduce-scatter and an all-gather
// are an all-reduce's two halves) and keeps less. A weight layout computed
// from several weights (a Concat a rewrite made) trains at the lowest of
// their stages, and so do they (source_layout.h's zero_of and
// weight_zero_stages).
struct WeightZero {
  std::string weight;  // a Weight operator's name
  ZeroStage stage = ZeroStage::k1;
  bool operator==(const WeightZero&) const = default;
};
// Sorted by weight name, each once.
using ZeroWeights = std::vector<WeightZero>;

// The stage of the weight named `weight` under a plan stage and its groups.
ZeroStage zero_of(ZeroStage plan, const ZeroWeights& groups, std::string_view weight);
// The highest stage any weight trains at (what a plan-wide limit checks:
// pipeline stages shard at most the optimizer state).
ZeroStage highest_zero(ZeroStage plan, const ZeroWeights& groups);
// Why a plan stage and groups cannot train together (stage 0 beside a
// sharded stage), or nullopt; with the plan's stage open (nullopt), why
// the groups cannot train together whatever it is (groups at 0 beside
// sharded ones).
std::optional<std::string> zero_weights_problem(ZeroStage plan, const ZeroWeights& groups);
std::optional<std::string> zero_weights_problem(std::optional<ZeroStage> plan, const ZeroWeights& groups);
// Sorts groups by weight name, as zero_of looks them up.
void sort_zero_weights(ZeroWeights& groups);
// "stage 2: 16 weights (block0.attn.key.W, block0.attn.key.b, ...); stage
// 3: 1 weight (wte.table)": the weights whose stage differs from the
// plan's, per stage, as a report lists them ("" where none does).
std::string describe_zero_weights(ZeroStage plan, const ZeroWeights& groups);

// The attention kernel a plan's runs use, in the vocabulary of Hugging
// Face Transformers' attn_implementation:
//
//   eager  each operator of attention its own kernel (q k^T, scale,
//          softmax, dropout, the attention-weighted sum), every
//          [b, a, s, s] tensor between them written and read again: what
//          the reference interpreter and the CPU runtime compute.
//   flash  FlashAttention (Dao et al. 2022; FlashAttention-2, Dao 2023):
//          from q k^T to the weighted sum one kernel that never writes the
//          scores. It reads q, k and v and writes the output; its backward
//          recomputes the scores block by block from q and k; under a
//          causal mask it skips the blocks above the diagonal. The values
//          are the same: the cost model prices the kernel
//          (attention_kernels.h), the memory model keeps none of the
//          scores, and the CPU runtime, which runs eager kernels, re-runs
//          them in backward as the kernel does (recompute_plan.h).
//   fused  eager, but the scale and the (causally masked) softmax after it
//          one kernel, as Megatron-LM runs them (FusedScaleMaskSoftmax,
//          its masked-softmax fusion): the scores are read once and the
//          probabilities written once, no scaled copy between. Priced by
//          the softmax's own pass (attention_kernels.h's
//          fused_softmax_kernels); kept and recomputed as eager.
enum class AttentionKernel : uint8_t { kEager, kFlash, kFused };
inline constexpr AttentionKernel kAttentionKernels[] = {AttentionKernel::kEager, AttentionKernel::kFlash, AttentionKernel::kFused};
// "eager", "flash", "fused".
const char* name(AttentionKernel a);
std::optional<AttentionKernel> attention_named(std::string_view text);

inline constexpr int32_t kAllLayers = -1;

// A policy's name, or "full, first N layers" (`layers` >= 0
// under full), "... of each chunk" with `per_chunk` (a pipeline's).
std::string describe_recompute(Recompute r, int32_t layers, bool per_chunk = false);

struct TrainingRecipe {
  Precision precision = kDefaultPrecision;
  Recompute recompute = Recompute::kNone;
  ZeroStage zero = ZeroStage::k0;
  // Under full (and full+selective), how many layers of each graph
  // recompute whole (the first ones, above); kAllLayers: every layer.
  int32_t recompute_layers = kAllLayers;
  // What the update keeps and streams per parameter (optimizer_state.h).
  OptimizerState optimizer = kDefaultOptimizer;
  // Under ZeRO stage 3, which weights it shards (DeepSpeed's
  // stage3_param_persistence_threshold): a weight block (what one device
  // holds of a weight before sharding, tensor-parallel splits applied) of
  // fewer parameters than this stays whole on every device of its group
  // and is gathered once after the update, as at stage 2, instead of
  // before each use; its gradients and optimizer state stay sharded. Small
  // blocks (norms, biases) cost a gather's latency twice per step for
  // almost no memory. 0: every block is sharded (PyTorch FSDP's
  // FULL_SHARD).
  int64_t zero_persistence_threshold = 0;
  // The weights training at another stage than `zero` (ZeroWeights above;
  // empty: every weight at `zero`).
  ZeroWeights zero_weights;
  // Under recompute operators: the names of the operators recomputed,
  // sorted, each once (names a graph does not have are ignored: a piece
  // of a split graph holds some of them).
  std::vector<std::string> recompute_operators;
  AttentionKernel attention = AttentionKernel::kEager;
  // How the cross-entropy over the logits runs: one fused kernel, or
  // eager FP32 passes keeping the FP32 probabilities (cross_entropy_kernel.h).
  CrossEntropyKernel cross_entropy = CrossEntropyKernel::kFused;
  // Whether a dropout and the residual sum reading it run as one kernel
  // (Megatron-LM's bias-dropout-add fusion) or two (dropout_add_kernel.h).
  DropoutAddKernel dropout_add = DropoutAddKernel::kEager;
  // Each product reading a weight (a Linear) computes its input's gradient
  // first and sends it on (the collective its input's layout change runs
  // backward: a tensor-parallel all-reduce, or sequence parallelism's
  // reduce-scatter) while it computes its weight's gradient, as Megatron-LM
  // does since late 2021 (--async-tensor-model-parallel-allreduce, on by
  // default from 2022; with --sequence-parallel its reduce-scatter beside
  // the weight's product). Only the time changes: the cost model hides the
  // collective behind the weight's product, the simulator runs the two
  // side by side, on machines whose devices overlap communication. Off:
  // each operator's backward ends before its gradient moves (PyTorch
  // autograd, pcgx's runtimes).
  bool overlap_grad_input = false;
  // Under ZeRO 1 and 2 (and 3's blocks kept whole), each bucket's updated
  // weights are all-gathered beside the next step's forward pass instead
  // of after the update, as Megatron-LM's distributed optimizer does with
  // --overlap-param-gather: the first bucket's gather issued as the step
  // begins, each next one as the first operator reading the one before it
  // starts, and each operator's first forward waiting for its bucket's.
  // Only the time changes, on machines whose devices overlap
  // communication. Off: the gathers run after the update, exposed
  // (DeepSpeed's ZeRO 1 and 2, pcgx's runtimes).
  bool overlap_param_gather = false;
  // Whether the data-parallel gradient buckets are reduced beside the
  // backward pass, each as soon as its last gradient is ready (PyTorch
  // DDP; Megatron-LM's --overlap-grad-reduce), or after it, the devices
  // waiting for them: Megatron-LM's default until Megatron-Core's DDP
  // (2023), whose local DDP all-reduced its gradient buffer after the
  // last micro-batch's backward, and DeepSpeed's pipeline engine, which
  // reduces after the flush. Only the time changes, on machines whose
  // devices overlap communication (the others always reduce after). A
  // step that gathers any weight before use (ZeRO 3) runs every bucket
  // beside the backward pass either way, as FSDP and DeepSpeed stage 3
  // issue their reduce-scatters (gradient_sync.h's replay_sharded),
  // blocks kept whole and weights at other stages included.
  bool overlap_grad_reduce = true;
  // What gradients are accumulated and reduced in (precision.h): the bytes
  // each device keeps and each bucket moves. The runtimes keep FP32.
  GradPrecision grad_precision = GradPrecision::kFp32;
  // Whether ZeRO stage 1 reduce-scatters the data-parallel gradients, each
  // device receiving the sum of the shard it updates (Megatron-LM's
  // distributed optimizer; DeepSpeed's ZeRO with "reduce_scatter": true),
  // or all-reduces them whole and each device updates its shard of the
  // sum: DeepSpeed's BF16 optimizer, which its pipeline engine runs at
  // stage 1 with BF16 (BLOOM, MT-NLG: buffered_allreduce_fallback over
  // the FP32 gradients), and "reduce_scatter": false. Twice a ring's
  // bytes for the gradients, the weights' all-gather after the update the
  // same; a device keeps whole gradients at stage 1 either way, so the
  // memory is the same. Off applies where every weight trains at stage 1
  // (zero1_all_reduces): stage 0 all-reduces anyway, stages 2 and 3 shard
  // the gradients and reduce-scatter them, and a plan mixing 1 with them
  // reduce-scatters every bucket.
  bool reduce_scatter = true;
  bool operator==(const TrainingRecipe&) const = default;
};

// Whether a weight block of `block_elements` parameters is sharded between
// uses (ZeRO stage 3, at or above the persistence threshold): gathered
// before each forward and backward that reads it.
inline bool gathers_for_use(ZeroStage zero, int64_t persistence_threshold, int64_t block_elements) {
  return shards_weights(zero) && block_elements >= persistence_threshold;
}

// The stage of the weight named `weight`, and the highest any weight trains at.
inline ZeroStage zero_of(const TrainingRecipe& r, std::string_view weight) { return zero_of(r.zero, r.zero_weights, weight); }
inline ZeroStage highest_zero(const TrainingRecipe& r) { return highest_zero(r.zero, r.zero_weights); }

// Whether the gradients are all-reduced whole under ZeRO 1
// (reduce_scatter off and every weight at stage 1); else every sharded
// stage reduce-scatters them.
inline bool zero1_all_reduces(const TrainingRecipe& r) { return !r.reduce_scatter && highest_zero(r) == ZeroStage::k1; }

}  // namespace pcgx
