#pragma once
// Parallelization plans a person writes (SuperScaler, nnScaler; the
// format: docs/plans.md). A plan selects compute operators (by name
// pattern, operator type, layer index range) and says how each runs: for
// each of its parallel kinds (the registry's ParallelKind names, "batch0",
// "out", "reduce", "heads", ...) a degree, or "samples" for whichever kind
// splits its samples. Lowered, it is an ordinary PCG: every selected
// operator runs as stated and the communication between consecutive
// operators is derived, not written (baselines.h's parallelize inserts the
// layout changes: all-reduce, reduce-scatter, all-gather, all-to-all, which
// the cost model prices), so `pcgx simulate`, `pcgx run` and the rest take
// it unchanged, and it computes what the model computes (it inserts only
// identities).
//
// The operators no rule selects run as one task, or, with "unstated":
// "search", as unity finds best with the stated operators fixed
// (SearchOptions::algorithm unity with a plan: unity_search.h's
// plan_search).
//
// A rule may also place its operators (`devices`): those operators run on
// the devices stated, the rest where the machine-mapping DP puts them, and
// the plan is then priced by simulation (the DP's estimate is for the
// views it chose).
//
// A device named for several tasks runs them one after another
// (SuperScaler's co-shard: the partitions' shards side by side in its
// memory, as the memory model counts them).
//
// Not yet: devices stated in a pipelined plan (each stage's operators are
// mapped by the DP on the stage's devices) or in one whose unstated
// operators are searched.
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine_view.h"
#include "pcgx/pcg/pipeline_schedule.h"
#include "pcgx/pcg/precision.h"
#include "pcgx/pcg/training_recipe.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/search/baselines.h"

namespace pcgx::search {

// Which compute operators a rule applies to: all of the given conditions.
struct PlanSelector {
  std::string name;  // glob over node names: '*' any run, '?' one character; empty: any
  std::string op;    // registry operator name (Linear, Softmax, ...); empty: any
  // The layer index, inclusive: the number ending the first dot-separated
  // part of a node's name that ends in one ("block3.attn.query" is in
  // layer 3); operators outside any layer are not selected.
  std::optional<std::pair<int64_t, int64_t>> layers;
  // true: operators that read a weight (a Weight, or what is computed
  // from weights alone: a tied head reads the embedding's transpose);
  // false: operators that read none; unset: either. What is computed from
  // weights alone (that transpose: the weight's stored layout,
  // pcg/source_layout.h) is selected by neither.
  std::optional<bool> weights;
};

// An algebraic rewrite the plan makes before its rules partition the
// model (a fusion: two Linears reading one input as one Linear over the
// concatenated weights): a rule of the rulesets, by its id, applied where
// its source's compute operators are the ones named, in the rule's order
// (applied_rule.h's form, as pcgx plan show writes what a search applied).
// What the rule makes is named as the search names it (an operator keeps
// its name where it is the only one of its kind on both sides) and can be
// selected by that name; what it leaves unnamed runs as the rules without a
// name selector say.
struct PlanRewrite {
  std::string rule;             // "unity-c01643~", as a rule library names it
  std::vector<std::string> at;  // the model operators its source matches
  // The rule itself, from the rulesets (resolve_plan_rewrites); a plan
  // with rewrites is lowered only once they are resolved.
  std::shared_ptr<const Rule> resolved;
};

// The pseudo-kind naming whichever kind splits an operator's samples
// (sample_kind); an operator without one runs unsplit by it.
inline constexpr const char* kSamplesKind = "samples";

struct PlanRule {
  PlanSelector select;
  NodePlan partition;  // kind name (or kSamplesKind) -> degree; empty: one task
  // The device of each task of an operator it selects, in task order
  // (row-major over the operator's task grid, degree_inference.h: replica
  // slots, then the partial-sum kinds, then the kinds splitting the
  // output); empty: the machine mapping places them.
  std::vector<int64_t> devices;
};

// What runs the operators no rule selects.
enum class Unstated : uint8_t {
  kOneTask,  // one task each, its inputs gathered whole onto it
  kSearch,   // unity searches them, the stated operators fixed
};

struct UserPlan {
  std::string source;  // the file it came from, for messages
  std::string description;
  Unstated unstated = Unstated::kOneTask;
  // The recipe it trains with (training_recipe.h); unset: the caller's
  // (pcgx optimize's flags, and their defaults).
  std::optional<Precision> precision;
  std::optional<Recompute> recompute;
  std::optional<int32_t> recompute_layers;  // with recompute full: that many layers only
  // With recompute operators: the operators recomputed, by name or name
  // pattern ('*' any run, '?' one character): recompute_operator_names.
  std::vector<std::string> recompute_operators;
  std::optional<ZeroStage> zero;
  std::optional<int64_t> zero_persistence_threshold;  // with zero 3: blocks of fewer parameters kept whole
  ZeroWeights zero_weights;  // weights by name or pattern at their own stage (zero_weight_stages)
  std::optional<OptimizerState> optimizer;  // sgd, momentum, adam: its state and update priced (optimizer_state.h)
  std::optional<AttentionKernel> attention;  // eager, flash, fused (training_recipe.h)
  std::optional<CrossEntropyKernel> cross_entropy;  // fused, eager (cross_entropy_kernel.h)
  std::optional<DropoutAddKernel> dropout_add;      // eager, fused (dropout_add_kernel.h)
  std::optional<bool> overlap_grad_input;    // TrainingRecipe::overlap_grad_input
  std::optional<bool> overlap_param_gather;  // TrainingRecipe::overlap_param_gather
  std::optional<bool> overlap_grad_reduce;   // TrainingRecipe::overlap_grad_reduce
  std::optional<bool> reduce_scatter;        // TrainingRecipe::reduce_scatter (false: ZeRO 1 all-reduces)
  std::optional<GradPrecision> grad_precision;  // fp32, compute (precision.h)
  // Pipeline stages (the layers split evenly over them, as Megatron-LM
  // splits them, or cut after the operators `boundaries` names: one per
  // chunk but the last) and micro-batches, each stage on its devices /
  // stages devices, the rules applied to each stage's operators; unset:
  // none, or what the caller's options say.
  // Its schedule: gpipe, 1f1b, interleaved, or each stage's order of
  // forward and backward steps written out (explicit, `programs`, checked
  // for deadlock when read); unset: 1f1b, interleaved with virtual stages.
  struct Pipeline {
    int64_t stages = 1, micro_batches = 1, virtual_stages = 1;
    std::optional<PipelineSchedule> schedule;
    std::vector<std::vector<PipelineStep>> programs;  // with schedule explicit
    std::vector<std::string> boundaries;              // empty: even layers
    // Megatron-LM's layout string instead ("layout", pipeline_layout.h):
    // each chunk's layers in model order; empty: not given.
    std::vector<int64_t> layout;
    // Chunks every stage runs together, on every device (SuperScaler's
    // interlaced pipeline: pcg/pipeline_schedule.h), by index in model
    // order; unstated boundaries make an interlaced first chunk what
    // precedes the first layer and a last one what follows the last. Its
    // rules' degrees and devices are over every device.
    std::vector<int64_t> interlaced;
  };
  std::optional<Pipeline> pipeline;
  // In order, before the rules select: the model they select from is the
  // model rewritten.
  std::vector<PlanRewrite> rewrites;
  // In order: an operator runs as the last rule that selects it says, or
  // as one task when none does.
  std::vector<PlanRule> rules;
};

// Reads a plan file (JSON, "format": "pcgx.plan", "format_version": 1).
// Throws FileError naming the file and the field for anything malformed:
// not JSON, unknown fields, a rule without "select" or "partition", a
// degree that is not a whole number of at least 1, an unknown operator type.
UserPlan plan_from_json(const std::string& text, const std::string& source);
UserPlan load_plan(const std::string& path);

// The names of `model`'s operators that `patterns` name (globs, as
// PlanSelector::name), sorted, each once: what recompute operators
// recomputes (training_recipe.h). Throws FieldError naming `what` (the
// field) for a pattern naming no operator that computes (a source or a
// weight's layout has nothing to recompute) but a loss or a graph output
// (read after the backward pass, never recomputed: a pattern naming others
// too leaves them out).
std::vector<std::string> recompute_operator_names(const Graph& model, std::span<const std::string> patterns, const std::string& what);

// The weights of `model` (its Weight operators) that `groups` names by name
// or name pattern, each with its group's stage, sorted by name, each once:
// what TrainingRecipe::zero_weights holds. Throws FieldError naming `what`
// for a pattern naming no weight, or a weight two patterns give different
// stages.
ZeroWeights zero_weight_stages(const Graph& model, const ZeroWeights& groups, const std::string& what);

// `name` with its layer number (PlanSelector::layers) replaced by '*'
// ("block3.attn.query" -> "block*.attn.query"), or "" when it has none.
std::string layer_pattern(const std::string& name);

// How a compute operator of a graph uses weights (PlanSelector::weights).
enum class WeightUse : uint8_t { kNone, kReads, kLayout };
std::vector<WeightUse> weight_uses(const Graph& g);
bool selects(const PlanSelector& s, const Node& n, WeightUse use);

class RuleLibrary;

// Finds each of the plan's rewrites in `algebraic` (the rulesets' algebraic
// rules, both directions, every rank: rule_library.h's kAlgebraic);
// throws FileError naming rewrites[i].rule for one it does not hold: no
// rule of that id in `rule_ids` (the rulesets' ids), or one with a
// parallel operator (not a plan's to state: its partitions and derived
// communication are).
void resolve_plan_rewrites(UserPlan& plan, const RuleLibrary& algebraic, const std::set<std::string>& rule_ids);

// `model` with the plan's rewrites applied in order, each followed by
// merging operators computed twice (as the search does). With `a_part`
// (`model` is a pipeline stage's part, or may be), a rewrite none of
// whose operators is in `model` or made by an earlier rewrite is skipped:
// another stage's. Throws Error naming the plan, rewrites[i] and the
// operators: one that is no operator of the model, one an earlier rewrite
// replaced, a rule that matches nowhere at them, or a rewrite not
// resolved. `applied` receives those applied as a strategy records them
// (applied_rule.h).
Graph apply_plan_rewrites(const Graph& model, const UserPlan& plan, std::vector<std::string>* applied = nullptr, bool a_part = true);

// The rewrites a plan can state among a strategy's applied rules (its
// "applied", applied_rule.h): the algebraic ones that name where they
// applied, in order. `left_out` counts the others by why.
struct RewritesLeftOut {
  size_t parallel = 0;  // a rule with a parallel operator (the plan's partitions state that)
  size_t unnamed = 0;   // an algebraic rule at an operator without a name
  size_t unknown = 0;   // a rule id none of `rule_ids` is (other rulesets searched it)
  size_t total() const { return parallel + unnamed + unknown; }
};
std::vector<PlanRewrite> plan_rewrites_of(std::span<const std::string> applied, const RuleLibrary& algebraic, const std::set<std::string>& rule_ids,
                                          RewritesLeftOut* left_out = nullptr);
// The ids of the rules of `rulesets`, as they state them (no "~" or "@").
std::set<std::string> rule_ids(std::span<const Ruleset> rulesets);

// The graph a plan's rules select from: the model with the plan's
// rewrites applied (apply_plan_rewrites), each BatchNorm the plan splits (batch_norms_split) in its statistics form (baselines.h's
// synchronized_batch_norm: BatchSum "NAME.sum", BatchSquares
// "NAME.squares", BatchNormApply "NAME"), so that it can split samples as
// data parallelism does, the others whole; and where a rule states a
// "classes" degree, each SoftmaxCrossEntropy as its parts
// (vocabulary_parallel_loss: ClassLogSumExp "NAME.lse", CrossEntropyApply
// "NAME"), in as many blocks as the largest such degree, so that the loss
// splits by classes with its logits.
// `whole`: `model` is the whole model, every rewrite applies to it
// (apply_plan_rewrites), as lower_plan checks when every rule must select.
Graph plan_graph(const Graph& model, const UserPlan& plan, bool whole = false);

// The names of the BatchNorms a plan splits, decided on their statistics
// form by the last rule selecting each part: a statistic (NAME.sum,
// NAME.squares) partitioned or placed, or the part applying them (NAME)
// run in a way the BatchNorm itself cannot (split by its samples: it
// normalizes over them); or parts no rule selects where the unstated are
// searched. The rest run whole: one operator (placed and split as NAME's
// rule says), as a strategy that never split them ran them, so that its
// plan (plan show) fed back is priced the same.
std::set<std::string> batch_norms_split(const Graph& model, const UserPlan& plan);
// Whether `s` selects a statistics part of a BatchNorm of `g` that runs
// whole: a rule for the parts ("*.bn.sum", {}) selecting nothing but them
// is no mistake.
bool selects_a_statistics_part(const Graph& g, const PlanSelector& s);

// What each compute node of `g` (a plan_graph) runs as (empty: one task),
// checked: throws pcgx::Error naming the plan, the rule and the operator
// for a rule selecting nothing, a kind the operator does not have (listing
// those it has), a kind named twice (as itself and as "samples"), a degree
// that does not divide the dimension the kind splits, or degrees whose
// product does not divide `devices` (unless the rule states its devices). `rule_of`, when given, receives the
// rule each node runs by (-1: none).
// `every_rule_selects` false: a rule may select nothing (a pipeline
// stage's part of the model).
std::vector<NodePlan> plan_partitions(const Graph& g, const UserPlan& plan, int64_t devices, std::vector<int>* rule_of = nullptr,
                                      bool every_rule_selects = true);

// What each rule decides on `model` (plan_graph's operators, `devices` as
// plan_partitions takes them): per rule, the compute operators it is the
// last to select; and of all compute operators, those running as one task.
struct PlanDecisions {
  std::vector<int64_t> per_rule;
  // Per rule deciding nothing: whether it selects statistics parts of
  // BatchNorms that run whole (plan_graph), no mistake.
  std::vector<char> whole_batch_norm_parts;
  int64_t operators = 0, one_task = 0;
  int64_t unstated = 0;  // of them, those no rule selects (searched under "unstated": "search")
};
PlanDecisions plan_decisions(const Graph& model, const UserPlan& plan, int64_t devices);

// The names of the compute operators some rule selects (plan_graph's
// names): what a search of the unstated rest keeps as the plan states it.
// Throws pcgx::Error naming the plan, the rule and the operator where a
// selected operator has no name or shares it with another.
std::set<std::string> stated_operators(const Graph& model, const UserPlan& plan, int64_t devices);

// Which rule decides how the compute operator named `name` runs, for an
// error about it: "rules[3] selects it" (the last that does), "no rule
// selects it", or empty where the plan does not lower.
std::string rule_selecting(const Graph& model, const UserPlan& plan, int64_t devices, const std::string& name);

// The model with the plan applied: plan_graph, plan_partitions, then
// parallelize; a combination of kinds an operator's degree inference
// refuses is an error naming the rule and the operator. `image`, when
// given: per node of plan_graph(model), its node in the result.
Graph lower_plan(const Graph& model, const UserPlan& plan, int64_t devices, bool every_rule_selects = true,
                 std::vector<NodeId>* image = nullptr);

// Whether some rule of `plan` states devices.
bool assigns_devices(const UserPlan& plan);

// Places the compute operators that the last rule selecting them gives
// devices (of plan_graph(model); `image` maps them into `lowered`, as
// lower_plan gives it): `views[image[node]]` becomes the machine view
// running task t on devices[t] (start and one stride per
// task-grid dimension, 0 where a dimension's tasks share a device:
// co-shard). In a pipelined plan `devices` are a stage's, numbered from
// 0 in each stage (a rule may select operators of several stages); the
// pipeline offsets them to the stage's first device. Throws pcgx::Error
// naming the plan, the rule and the operator for a device count other
// than its tasks, a device not below `devices`, or devices no view
// states (the grid's dimensions named). Returns the nodes of `lowered` it
// placed.
std::vector<NodeId> assign_plan_devices(const Graph& model, const UserPlan& plan, int64_t devices, const Graph& lowered,
                                        std::span<const NodeId> image, std::vector<MachineView>& views);

// The plan a parallelized PCG amounts to (pcgx plan show): each named
// compute operator's task grid as its kinds and degrees (the kind
// splitting samples written "samples"); the most common partition as a
// first rule selecting every operator, then one rule per group of
// operators differing from it, a group being the operators whose names
// differ only in their layer number when they all run alike
// ("block*.attn.query"). Unnamed operators are the conversions a lowering
// inserts (derived, not stated), or any other operator without a name:
// they are left out, and run as the first rule says when the plan is
// lowered again. Throws pcgx::Error naming an operator whose grid no plan
// can state (replica slots of its own: its inputs all replicated), or two
// operators of one name (a plan selects by name).
// With the strategy's `views`, an operator that co-shards (two tasks on
// one device) is stated with its devices, which only a device list can
// say; the others are left to the mapping. With `stage_devices` (a
// pipelined strategy's devices per stage), they are numbered within the
// operator's stage, as a pipelined plan states them.
UserPlan plan_of_strategy(const Graph& strategy, std::span<const MachineView> views = {}, int64_t stage_devices = 0);
// The pipeline a pipelined strategy runs (its `views` on `devices`
// devices, pipeline_stages, micro_batches, virtual_stages, schedule and
// programs as its file states them), for plan_of_strategy's plan: the
// chunks end where the stage running the named compute operators changes,
// in graph order (a joined strategy is its chunks one after the other).
// Throws pcgx::Error where the chunks found are not S v.
UserPlan::Pipeline pipeline_of_strategy(const Graph& strategy, std::span<const MachineView> views, int64_t devices,
                                        const PipelineShape& shape);
std::string plan_to_json(const UserPlan& plan);

}  // namespace pcgx::search
