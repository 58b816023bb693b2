#pragma once
// Finding a strategy (the driver behind `pcgx optimize` and `pcgx run
// --optimize`): one request, one report, the same search path for both, so
// every algorithm gets the same rules whichever front end asks.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/machine.h"
#include "pcgx/pcg/profile.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/search.h"
#include "pcgx/search/strategy_json.h"

namespace pcgx::runner {

struct OptimizeRequest {
  Graph model;      // unpartitioned (load_model)
  Machine machine;  // with the devices the plan may use (Machine::with_devices)
  search::SearchOptions search;
  // The rules of an algorithm that uses them (search::uses_rules): verified
  // rulesets, searched as one library (search/rule_library.h), or any with
  // allow_unverified (the report says why one is not verified).
  std::vector<std::string> rulesets;  // empty: default_rulesets()
  bool allow_unverified = false;
  // Re-prove every rule first (pcgx audit's checks: a fresh proof, the
  // stored unsat core alone, evaluation): a forged proof record of a true
  // rule, which the numeric check passes, fails here.
  bool reprove = false;
  // Pipeline parallelism: stages on disjoint devices, 1F1B over
  // micro-batches, each stage searched with `search`.
  std::optional<search::PipelineOptions> pipeline;
  search::CommOptions comm;
  // What the plan trains in: priced, counted and recorded. nullopt: chosen,
  // the faster plan of the machine's mixed precision (bf16, or fp16 where
  // only it is faster: fp16's loss scaling is not priced) and tf32, each
  // searched as below.
  std::optional<Precision> precision = kDefaultPrecision;
  // Activation recomputation and ZeRO stage; nullopt: chosen (below).
  std::optional<Recompute> recompute;
  // Under full recomputation, how many layers of each graph recompute (the
  // first ones: TrainingRecipe::recompute_layers); stated only with
  // `recompute` full. nullopt: every layer where `recompute` is stated
  // (Megatron-LM's full recomputation); where it is chosen and full is the
  // recipe that fits, the fewest layers that fit (each count re-prices the
  // plan found with every layer recomputed). With pipeline stages, that
  // many layers of each chunk.
  std::optional<int32_t> recompute_layers;
  // With `recompute` operators: the operators recomputed, by name or name
  // pattern (search's recompute_operator_names, resolved on `model`).
  std::vector<std::string> recompute_operators;
  std::optional<ZeroStage> zero;
  // At ZeRO stage 3, the weight blocks kept whole below this many
  // parameters (TrainingRecipe::zero_persistence_threshold). nullopt:
  // chosen where the plan found is at stage 3, or another stage won but
  // stage 3 was priced on the plan and fit (every block sharded): each
  // block size of its weights tried as the threshold (keeping whole every
  // block up to it), the plan re-priced (mapped) under each, the fastest
  // that fits kept, stage 3 then chosen where it beats the stage kept.
  std::optional<int64_t> zero_persistence_threshold;
  // Weight groups at their own ZeRO stage (training_recipe.h's
  // ZeroWeights), each weight named by its name or a name pattern ('*' any
  // run, '?' one character; search's zero_weight_stages, resolved on
  // `model`), in every recipe tried; with `zero` open, only the plan stages
  // they mix with are tried (a sharded group: 1, 2 and 3).
  ZeroWeights zero_weights;
  // The optimizer the plan trains with (its state in memory, its update's
  // traffic): Adam unless said.
  OptimizerState optimizer = kDefaultOptimizer;
  // The attention kernel the plan runs (training_recipe.h): eager unless said.
  AttentionKernel attention = AttentionKernel::kEager;
  // How the plan's runs compute the cross-entropy (cross_entropy_kernel.h):
  // fused unless said.
  CrossEntropyKernel cross_entropy = CrossEntropyKernel::kFused;
  // Whether a dropout and the residual sum reading it run as one kernel
  // (dropout_add_kernel.h): eager unless said.
  DropoutAddKernel dropout_add = DropoutAddKernel::kEager;
  // Each product sends its input's gradient while it computes its
  // weight's (TrainingRecipe::overlap_grad_input): off unless said.
  bool overlap_grad_input = false;
  // ZeRO 1 and 2's weights gathered beside the next forward pass
  // (TrainingRecipe::overlap_param_gather): off unless said.
  bool overlap_param_gather = false;
  // Gradient buckets reduced beside the backward pass
  // (TrainingRecipe::overlap_grad_reduce): on unless said.
  bool overlap_grad_reduce = true;
  // What gradients are accumulated and reduced in
  // (TrainingRecipe::grad_precision): FP32 unless said.
  GradPrecision grad_precision = GradPrecision::kFp32;
  // ZeRO 1 reduce-scatters the gradients (TrainingRecipe::reduce_scatter):
  // on unless said; off only where every weight trains at stage 1 (or the
  // stage is searched: it then applies where the search chooses 1).
  bool reduce_scatter = true;
  // Without `pipeline`: where memory left the first recipe searched no plan,
  // gradient accumulation is searched too (OptimizeReport::tried); false:
  // one batch.
  bool accumulate = true;
  // With `recompute` chosen, where full recomputation is what fits: kinds
  // of operators to recompute are tried too, the cheapest per byte freed
  // first (recompute operators); false: whole layers only. Not tried for
  // Megatron-LM's plan with sequence parallelism, which gathers again
  // whatever it recomputes (recompute full+gathers).
  bool recompute_kinds = true;
  // Megatron-LM's micro-batch size (search megatron): samples per
  // micro-batch on each data-parallel replica, so the micro-batches are the
  // model's batch over it and over the data-parallel degree, devices /
  // (tensor-parallel degree x pipeline stages). 0: the micro-batches
  // `pipeline` states.
  int64_t micro_batch_size = 0;
  std::optional<search::Efficiency> efficiency;  // default: search::default_efficiency()
  Profile profile;                               // measured operator times; empty: the roofline
};

// One recipe searched when the request leaves recomputation or ZeRO open.
struct RecipeTried {
  TrainingRecipe recipe;
  bool feasible = false;
  double time = 0;           // the plan's predicted step (feasible)
  double smallest_need = 0;  // bytes on the fullest device of the closest plan refused for memory (0: none refused)
  int64_t micro_batches = 1; // > 1: gradient accumulation over that many (the fewest that fit)
  // false: not searched again, the plan an earlier stage's search found
  // re-priced (mapped) under this recipe.
  bool searched = true;
  // Searched once more under the recipe a re-priced plan was kept under
  // (its plan kept only where faster: a `time` unlike the plan kept's
  // means the re-priced one stayed).
  bool again = false;
};

struct OptimizeReport {
  search::PipelineResult result;  // .search: strategy, rules applied, counts, seconds
  bool pipelined = false;
  // The rulesets searched with: none for an algorithm that uses no rules.
  std::vector<std::string> rulesets;
  size_t rules = 0;                       // in the library they make together
  std::vector<std::pair<std::string, std::string>> unverified;  // (file, why) for each not verified (allowed by the request)
  std::vector<std::string> trust;  // per ruleset, why it is trusted (rulesets/ruleset_trust.h: pinned, or checked numerically)
  // The plan run task by task (search/simulator.h), beside the DP's
  // estimate; 0 where the search's own figure is a simulation (mcmc) or the
  // plan is pipelined.
  double simulated = 0;
  std::string not_simulated;  // why not, where the simulation could not run (too many tasks)
  search::Strategy data_parallel;  // the data-parallel baseline on the same machine, for comparison
  int64_t data_parallel_micro_batches = 1;  // > 1: that baseline accumulates over as many micro-batches as the plan
  // What each device keeps through a step, by kind, under the plan's
  // schedule (search/machine_mapping.h); empty where the plan is infeasible.
  std::vector<search::DeviceMemory> memory;
  std::shared_ptr<const search::CostModel> cost;  // what priced the plan (its recipe: the one chosen)
  // With recomputation or the ZeRO stage left open, the recipes searched in
  // order: for each recomputation policy (none, or gathers for Megatron-LM's
  // plan with sequence parallelism; selective; full), each ZeRO
  // stage (0, 1, 2) while the search before it was constrained by memory;
  // a policy whose search memory did not constrain ends the list
  // (recomputing more would only add time). The fastest feasible plan is
  // chosen. A pipelined search stops at the first feasible recipe, and
  // shards no more than the optimizer state (ZeRO 1, as DeepSpeed's
  // pipeline engine allows). When memory left the first search no plan
  // (every plan refused) and the request accumulates (neither pipelined
  // nor an mcmc or exhaustive search), gradient accumulation follows,
  // listed with its micro-batch count: the first recomputation policy with
  // ZeRO stage 0 and with 1 (where the stages searched include it), each
  // the fewest of 1, 2, 4 or 8 micro-batches that fit (the fastest: it
  // adds no FLOPs, where recomputation re-runs the forward pass), among
  // plans the runtime runs; it competes with the rest on time. A stage
  // where no count above one fits is not listed. Where ZeRO 2 or 3 was
  // kept with the stage open and weight groups lowered to a stage that
  // shards less paid (recipe_refinements.h's fastest_zero_groups), that
  // mix is listed too, re-priced.
  std::vector<RecipeTried> tried;
  bool accumulation_failed = false;  // some accumulation search found no plan
  // At ZeRO stage 3: the persistence threshold was chosen among the plan's
  // block sizes (OptimizeRequest::zero_persistence_threshold nullopt; not
  // for a pipelined plan or one priced by simulation, which keep 0).
  bool persistence_chosen = false;
  search::StrategyFile file;       // what `optimize -o` writes
};

// Loads the rules the request's algorithm needs, searches, and compares
// with data parallelism. Throws Error when no rule file can be read or
// trusted, FieldError for options out of range; an infeasible result is
// returned (result.search.strategy.estimate.feasible false, `infeasible`
// naming the smallest per-device need found and what would lower it), not
// thrown.
OptimizeReport optimize(const OptimizeRequest& request);
// One line: how many rules the search applied, from which rulesets, and
// why each is trusted ("" when it used none).
std::string describe_rules(const OptimizeReport& report);
// The options optimize() checks before any work (FieldError naming the
// field), for a caller to check before it says anything.
void validate(const OptimizeRequest& request);
// The devices a written plan's rules divide (their degrees and stated
// devices): a pipeline stage's, or every device where the plan has
// interlaced chunks (search/pipeline.h).
int64_t plan_rule_devices(const OptimizeRequest& request);

// The ruleset the search uses: refused unless verified (unverified_reason:
// a matching content hash and every rule's proof record "proved") and
// trusted (rulesets/ruleset_trust.h: a shipped ruleset's pinned content
// hash, or every rule holding its numeric check, cached by content hash),
// or `allow_unverified`, when `why` receives the reason. `trust` receives
// the basis of the trust.
// With `reprove`, every rule is re-proved as `pcgx audit` does before it is
// trusted, pinned or not.
Ruleset load_search_ruleset(const std::string& path, bool allow_unverified, std::optional<std::string>* why, std::string* trust = nullptr,
                            bool reprove = false);

}  // namespace pcgx::runner
