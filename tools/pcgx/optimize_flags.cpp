// pcgx optimize's flags (see optimize_flags.h).
#include "optimize_flags.h"

#include "cli_common.h"
#include "pcgx/runner/plan_request.h"
#include "pcgx/runner/request_sources.h"
#include "pcgx/search/cost_model.h"

namespace pcgx::cli {

void add_optimize_options(CLI::App* cmd, OptimizeFlags& f) {
  search::SearchOptions& s = f.search;
  cmd->add_option("MODEL", f.model, "zoo model name or graph JSON file")->required();
  cmd->add_option("--machine", f.machine, "machine name (data/machines) or machine JSON file")->required();
  cmd->add_option("--devices", f.devices, "use the first N devices (whole nodes first); default: all")->check(positive());
  cmd->add_option("--ruleset", f.rulesets, "ruleset to apply (repeatable: searched as one library); default: every shipped ruleset (rulesets/MANIFEST.json)")
      ->allow_extra_args(false);  // one file per --ruleset: the next word is the model
  f.search_flag = cmd->add_option("--search", f.algorithm, "unity, data-parallel, expert, sequential, exhaustive, mcmc (FlexFlow's MCMC, costed by simulation), "
                  "autoddl (AutoDDL's coordinate descent over SBP signatures) or megatron (Megatron-LM's plan as stated: "
                  "--tensor-parallel, --pipeline-parallel, --virtual-stages, --micro-batch-size, layers split evenly unless --first-stage-layers, "
                  "--last-stage-layers, the --account-for-*-in-pipeline-split flags or --pipeline-layout say otherwise) or plan (--plan's, as "
                  "written; the default with --plan)")->capture_default_str();
  cmd->add_option("--plan", f.plan, "a plan written by hand (pcgx.plan JSON, docs/plans.md): each operator runs as the plan's rules say, the "
                  "communication between them derived; operators no rule selects run as one task");
  cmd->add_option("-o,--output", f.out, "strategy file to write (optimized PCG + machine mapping)")->required();
  cmd->add_option("--dot", f.dot, "also draw the optimized PCG (Graphviz)");
  cmd->add_option("--budget", s.budget, "candidate PCGs explored per search (per piece and layout)")->capture_default_str();
  cmd->add_option("--alpha", s.alpha, "prune candidates slower than alpha x the best")->capture_default_str();
  cmd->add_option("--split", s.split_min_ops, "graph splitting: pieces of at least this many operators")->capture_default_str();
  cmd->add_option("--max-nodes", s.exhaustive_max_nodes, "exhaustive search: PCGs of at most this many nodes (default: model nodes + inputs and weights + 1)");
  cmd->add_option("--limit", s.exhaustive_limit, "exhaustive search: give up above this many candidate PCGs")->capture_default_str();
  cmd->add_option("--rank", f.rank,
                  "unity: choose the result among the search's best and the data-parallel and expert baselines by simulation "
                  "(each mapped, then run task by task as pcgx simulate does) or by the DP's estimate")
      ->capture_default_str();
  cmd->add_option("--proposals", s.proposals, "mcmc: proposals in all, shared by its chains")->capture_default_str()->check(positive());
  cmd->add_option("--evaluations", s.evaluations, "autoddl: PCGs costed in all, shared by its starting points")->capture_default_str()->check(positive());
  cmd->add_option("--seed", s.seed, "mcmc and autoddl: random seed")->capture_default_str();
  cmd->add_option("--tensor-parallel", s.tensor_degree, "expert and megatron: the tensor-parallel degree T, as a Megatron-LM plan states it (expert default: the fastest that fits; megatron: 1)");
  cmd->add_flag("--sequence-parallel", s.sequence_parallel, "expert and megatron: Megatron-LM's sequence parallelism in each tensor-parallel group");
  cmd->add_option("--profile", f.profile, "measured operator times (pcgx.profile JSON) instead of the roofline");
  cmd->add_option("--efficiency", f.efficiency, "operator efficiency table (default data/cost/efficiency.json)");
  cmd->add_option("--bucket-mb", f.bucket_mb, "gradient buckets of this many MiB, all-reduced beside the backward pass (PyTorch DDP's bucket_cap_mb)")
      ->capture_default_str();
  cmd->add_option("--set", f.sets, "override a size parameter: key=value (repeatable)");
  f.precision_flag = cmd->add_option("--precision", f.precision, std::string(kPrecisionHelp) + "; auto: the fastest plan over the machine's mixed precisions and tf32")
      ->capture_default_str();
  f.recompute_flag = cmd->add_option("--recompute", f.recompute, std::string(kRecomputeHelp) + "; auto: the fastest plan that fits, trying none (gathers for the expert's and Megatron's plans with "
                                                                     "--sequence-parallel), then selective, then full (full+gathers for those) where memory limits the search "
                                                                     "(and where full fits, the fewest layers, full+selective and, except for those plans, kinds of operators)")
      ->capture_default_str();
  cmd->add_option("--recompute-layers", f.recompute_layers, std::string(kRecomputeLayersHelp) +
                  " (default: every layer where --recompute full or full+gathers is given; with --recompute auto, where full recomputation is what fits, "
                  "the fewest layers that fit)")
      ->check(positive());
  cmd->add_option("--recompute-operators", f.recompute_operators,
                  "the operators whose outputs the backward pass recomputes instead of keeping (--recompute operators, implied where "
                  "--recompute is not given), by name or name pattern ('*' any run, '?' one character), comma-separated "
                  "(\"block*.attn.scores,block*.attn.softmax\"); the per-operator table (without -q) lists the names")
      ->delimiter(',');
  f.zero_flag = cmd->add_option("--zero", f.zero, std::string(kZeroHelp) + "; auto: the fastest plan that fits, sharding more only where memory limits the search")
      ->capture_default_str();
  cmd->add_option("--zero-weights", f.zero_weights,
                  "weight groups at their own ZeRO stage, PATTERN=STAGE, comma-separated (\"block*.mlp.*=3,block*.attn.*=2\"): the weights whose "
                  "names match ('*' any run, '?' one character) train at that stage, the others at --zero's (as FSDP wraps modules with "
                  "their own sharding strategy); stages 1, 2 and 3 mix, 0 only with 0")
      ->delimiter(',');
  cmd->add_option("--zero-persistence-threshold", f.persistence,
                  std::string(kPersistenceHelp) + "; auto: the fastest that fits among the plan's weight block sizes")
      ->capture_default_str();
  f.optimizer_flag = cmd->add_option("--optimizer", f.optimizer, std::string(kOptimizerStateHelp) + " (with --plan: the plan's, when it states one)")
                         ->capture_default_str();
  f.attention_flag = cmd->add_option("--attention", f.attention, std::string(kAttentionHelp) + " (with --plan: the plan's, when it states one)")
                         ->capture_default_str();
  f.cross_entropy_flag = cmd->add_option("--cross-entropy", f.cross_entropy, std::string(kCrossEntropyHelp) + " (with --plan: the plan's, when it states one)")
                             ->capture_default_str();
  f.dropout_add_flag = cmd->add_option("--dropout-add", f.dropout_add, std::string(kDropoutAddHelp) + " (with --plan: the plan's, when it states one)")
                           ->capture_default_str();
  f.grad_precision_flag = cmd->add_option("--grad-precision", f.grad_precision, std::string(kGradPrecisionHelp) + " (with --plan: the plan's, when it states one)")
                              ->capture_default_str();
  f.overlap_flag = cmd->add_flag("--overlap-grad-input,!--no-overlap-grad-input", f.overlap_grad_input,
                                 std::string(kOverlapGradInputHelp) + " (--no-overlap-grad-input: not, whatever a --plan states)");
  f.param_gather_flag = cmd->add_flag("--overlap-param-gather,!--no-overlap-param-gather", f.overlap_param_gather,
                                      std::string(kOverlapParamGatherHelp) + " (--no-overlap-param-gather: not, whatever a --plan states)");
  f.grad_reduce_flag = cmd->add_flag("--overlap-grad-reduce,!--no-overlap-grad-reduce", f.overlap_grad_reduce,
                                     std::string(kOverlapGradReduceHelp) + " (default: on, unless a --plan states off)");
  f.reduce_scatter_flag = cmd->add_flag("--reduce-scatter,!--no-reduce-scatter", f.reduce_scatter,
                                        std::string(kReduceScatterHelp) + " (default: on, unless a --plan states off)");
  cmd->add_flag("!--global-batch", f.per_device_batch,
                "take a zoo model's batch as the global batch (default: it is per device, times --devices, as in Unity's evaluation)");
  add_pipeline_options(cmd, f.pipe);
  cmd->add_flag("-q,--quiet", f.quiet, "no per-operator table");
  cmd->add_flag("--allow-unverified", f.allow_unverified, kAllowUnverifiedHelp);
  cmd->add_flag("--reprove", f.reprove, kReproveHelp);
}

runner::OptimizeRequest optimize_request(OptimizeFlags& f) {
  name_flags({{"SearchOptions.budget", "--budget"}, {"SearchOptions.alpha", "--alpha"}, {"SearchOptions.split_min_ops", "--split"},
              {"SearchOptions.exhaustive_limit", "--limit"}, {"SearchOptions.exhaustive_max_nodes", "--max-nodes"}, {"SearchOptions.proposals", "--proposals"},
              {"SearchOptions.evaluations", "--evaluations"}, {"PipelineOptions.stages", f.pipe.pipeline_parallel > 0 ? "--pipeline-parallel" : "--stages"},
              {"PipelineOptions.micro_batches", "--micro-batches"}, {"PipelineOptions.virtual_stages", "--virtual-stages"}, {"PipelineOptions.first_stage_layers", "--first-stage-layers"},
              {"PipelineOptions.last_stage_layers", "--last-stage-layers"},
              {"PipelineOptions.layout", "--pipeline-layout"},
              {"PipelineOptions.embedding_as_layer", "--account-for-embedding-in-pipeline-split"},
              {"PipelineOptions.loss_as_layer", "--account-for-loss-in-pipeline-split"}, {"PipelineOptions.interlaced", "the plan's pipeline.interlaced"}, {"OptimizeRequest.pipeline", "--pipeline"}, {"OptimizeRequest.zero", "--zero"},
              {"OptimizeRequest.allow_unverified", "--allow-unverified"}, {"Machine.device.peak_flops_by_precision", "--precision"},
              {"CommOptions.bucket_bytes", "--bucket-mb"}, {"SearchOptions.tensor_degree", "--tensor-parallel"}, {"SearchOptions.algorithm", "--search"},
              {"SearchOptions.sequence_parallel", "--sequence-parallel"}, {"OptimizeRequest.micro_batch_size", "--micro-batch-size"},
              {"SearchOptions.plan", "--plan"}, {"OptimizeRequest.recompute_layers", "--recompute-layers"},
              {"OptimizeRequest.recompute", "--recompute"}, {"OptimizeRequest.recompute_operators", "--recompute-operators"},
              {"OptimizeRequest.zero_persistence_threshold", "--zero-persistence-threshold"}, {"OptimizeRequest.zero_weights", "--zero-weights"},
              {"TrainingRecipe.overlap_param_gather", "--overlap-param-gather"},
              {"OptimizeRequest.reduce_scatter", f.reduce_scatter_flag->count() > 0 ? "--no-reduce-scatter" : "the plan's reduce_scatter"}});
  runner::OptimizeRequest q;
  q.search = f.search;
  q.search.algorithm = parse_algorithm(f.algorithm), q.search.rank = parse_rank(f.rank);
  apply_pipeline_flags(f.pipe, q);  // a contradiction among them before any model loads
  runner::load_sources({f.model, parse_sets(f.sets), f.per_device_batch, f.machine, f.devices, f.plan, f.search_flag->count() > 0}, q);
  q.rulesets = f.rulesets, q.allow_unverified = f.allow_unverified, q.reprove = f.reprove;
  q.comm.bucket_bytes = f.bucket_mb * 1024 * 1024, q.precision = parse_precision(f.precision, true);
  q.recompute = parse_recompute(f.recompute, true), q.zero = parse_zero(f.zero, true);
  q.zero_persistence_threshold = parse_persistence_threshold(f.persistence, true);
  q.zero_weights = parse_zero_weights(f.zero_weights);
  q.optimizer = parse_optimizer_state(f.optimizer);
  q.attention = parse_attention(f.attention);
  q.cross_entropy = parse_cross_entropy(f.cross_entropy);
  q.dropout_add = parse_dropout_add(f.dropout_add);
  q.overlap_grad_input = f.overlap_grad_input;
  q.overlap_param_gather = f.overlap_param_gather;
  q.overlap_grad_reduce = f.overlap_grad_reduce;
  q.grad_precision = parse_grad_precision(f.grad_precision);
  q.reduce_scatter = f.reduce_scatter;
  if (f.recompute_layers != 0) q.recompute_layers = f.recompute_layers;
  q.recompute_operators = f.recompute_operators;
  // Naming operators without --recompute: recompute those.
  if (!f.recompute_operators.empty() && f.recompute_flag->count() == 0) q.recompute = Recompute::kOperators;
  if (!f.efficiency.empty()) q.efficiency = search::load_efficiency(f.efficiency);
  if (!f.profile.empty()) q.profile = load_profile(f.profile);
  runner::adopt_plan_settings(q, {true, f.precision_flag->count() > 0, f.recompute_flag->count() > 0 || !f.recompute_operators.empty(), f.zero_flag->count() > 0,
                                  f.optimizer_flag->count() > 0, f.attention_flag->count() > 0, f.overlap_flag->count() > 0,
                                  f.param_gather_flag->count() > 0, f.cross_entropy_flag->count() > 0, f.dropout_add_flag->count() > 0,
                                  f.grad_reduce_flag->count() > 0, f.grad_precision_flag->count() > 0, f.reduce_scatter_flag->count() > 0});
  runner::validate(q);  // (a plan's mistakes among them) before any output
  return q;
}

}  // namespace pcgx::cli
