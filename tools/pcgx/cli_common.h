#pragma once
// What the subcommands share: model loading by zoo name or file, and number
// formatting. No logic of its own beyond argument handling.
#include <CLI/CLI.hpp>
#include <iostream>
#include <streambuf>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pcgx/runner/backend_choice.h"
#include "pcgx/runner/model_source.h"
#include "pcgx/runtime/optimizer.h"
#include "pcgx/search/search.h"
#include "pcgx/runtime/mpi.h"
#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/training_recipe.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/rulesets/legacy_flexflow.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/rulesets/ruleset_compare.h"

namespace pcgx::cli {

using runner::ChosenBackend;
using runner::is_strategy_file;

// A model as runner::load_model takes it, with `sets` ("key=value" size
// overrides, --set) parsed into its sizes. An ONNX model's initializers go
// to `weights` when given.
Graph load_model(const std::string& model, const std::vector<std::string>& sets,
                 std::map<std::string, Tensor<float>>* weights = nullptr);
// --set's "key=value" list as a model's sizes; errors name --set.
ModelParams parse_sets(const std::vector<std::string>& sets);

// Library errors name the field at fault (pcgx::FieldError,
// "SearchOptions.budget: must be at least 1"); a command says which of its
// flags sets which field, and main() prints the message with the flags
// ("--budget: must be at least 1"). A field of no registered flag is
// printed as the library names it. Registered when the command runs.
void name_flags(std::initializer_list<std::pair<const char*, const char*>> fields);
std::string with_flags(const std::string& message);

// Text into the libraries' enums, in one place; an unknown value is an
// error naming `flag`, the value and the choices.
search::Algorithm parse_algorithm(const std::string& text, const std::string& flag = "--search");
// --rank: simulation or estimate.
search::SearchOptions::Rank parse_rank(const std::string& text);
runtime::OptimizerKind parse_optimizer(const std::string& text);
runner::BackendKind parse_backend(const std::string& text);
Precision parse_precision(const std::string& text);
// The same where the command chooses (optimize): "auto" is nullopt.
std::optional<Precision> parse_precision(const std::string& text, bool allow_auto);
// --precision's help, alike on every command that takes it.
extern const char* const kPrecisionHelp;
// --schedule's value (pcg/pipeline_schedule.h): gpipe, 1f1b, interleaved.
// --schedule: a schedule's name, or a file of explicit stage programs
// (pcg/pipeline_schedule.h's parse_pipeline_programs).
struct ScheduleFlag {
  PipelineSchedule kind = PipelineSchedule::k1F1B;
  std::vector<std::vector<PipelineStep>> programs;
};
ScheduleFlag parse_schedule(const std::string& text);
extern const char* const kScheduleHelp;
// --recompute: a policy by its name, and where the command chooses
// (optimize) "auto" (nullopt).
std::optional<Recompute> parse_recompute(const std::string& text, bool allow_auto);
extern const char* const kRecomputeHelp;
// --recompute-layers N (with --recompute full).
extern const char* const kRecomputeLayersHelp;
// --optimizer of optimize and simulate: what the plan's update is priced
// as (sgd, momentum, adam).
inline constexpr const char* kOptimizerStateHelp =
    "the optimizer the plan trains with, for its state in memory and its update's traffic: sgd (none), momentum (one FP32 state per "
    "parameter) or adam (two)";
OptimizerState parse_optimizer_state(const std::string& text);
// --attention of optimize and simulate: eager, fused or flash (training_recipe.h).
inline constexpr const char* kAttentionHelp =
    "the attention kernel the plan runs: eager (each operator its own kernel, the [b, a, s, s] scores written between them), "
    "fused (eager, but the scale and the masked softmax one kernel, as Megatron-LM's FusedScaleMaskSoftmax runs them) or flash "
    "(FlashAttention, as most training since 2023 runs: q k^T to the weighted sum one kernel that keeps no scores and recomputes "
    "them in its backward)";
AttentionKernel parse_attention(const std::string& text);
// --cross-entropy of optimize and simulate: fused or eager (cross_entropy_kernel.h).
inline constexpr const char* kCrossEntropyHelp =
    "how the plan's runs compute the cross-entropy over the logits: fused (one kernel reads the logits once and writes their "
    "gradient once, as pcgx's runtimes, Transformer Engine's and Liger's kernels do) or eager (the logits cast to FP32 and taken "
    "through separate passes, the FP32 probabilities kept for backward, as Megatron-LM's vocab_parallel_cross_entropy and "
    "PyTorch's cross_entropy under autocast run it)";
CrossEntropyKernel parse_cross_entropy(const std::string& text);
// What a report says of an eager cross-entropy in g: "eager (1 softmax over the logits ...)".
std::string cross_entropy_line(const Graph& g);
// --dropout-add of optimize and simulate: eager or fused (dropout_add_kernel.h).
inline constexpr const char* kDropoutAddHelp =
    "whether each dropout and the residual sum reading it run as two kernels (eager: pcgx's runtimes, PyTorch eager) or one that "
    "reads the dropout's input and the residual and writes the sum (fused: Megatron-LM's bias-dropout-add fusion, its default)";
DropoutAddKernel parse_dropout_add(const std::string& text);
// --grad-precision of optimize and simulate: fp32 or compute (precision.h).
inline constexpr const char* kGradPrecisionHelp =
    "what gradients are accumulated and reduced in under mixed precision: fp32 (Megatron-LM's main_grad, which it forces for bf16, "
    "accumulated by the weight-gradient kernels; pcgx's runtimes), compute, the training precision (Megatron-LM's FP16 default before "
    "Megatron-Core; DeepSpeed's FP16 engine): half the gradient bytes kept and reduced, or fp32-cast, FP32 gradients the backward "
    "pass does not accumulate itself (DeepSpeed's BF16 optimizer: each micro-batch's gradients written in the training precision, "
    "then cast to FP32 and added, a pass over every parameter per micro-batch, both kept)";
GradPrecision parse_grad_precision(const std::string& text);
// What a report adds after the precision's name: under mixed precision
// what stays FP32 (" (FP32 master weights, gradients and optimizer
// state)", or with compute-precision gradients " (FP32 master weights and
// optimizer state; gradients in bf16: --grad-precision compute)").
std::string precision_note(const TrainingRecipe& recipe);
// What a report says of a fused dropout-add in g: "fused (96 dropouts in their sums' pass)".
std::string dropout_add_line(const Graph& g);
// --overlap-grad-input of optimize (a flag) and simulate (on or off):
// TrainingRecipe::overlap_grad_input.
inline constexpr const char* kOverlapGradInputHelp =
    "each product of an activation and a weight (a Linear) whose input came through a collective computes its input's gradient "
    "first and sends it back (a tensor-parallel all-reduce, sequence parallelism's reduce-scatter) while it computes its weight's "
    "gradient, as Megatron-LM does since 2022 (--async-tensor-model-parallel-allreduce); priced and simulated on machines whose "
    "devices overlap communication";
// --overlap-param-gather of optimize (a flag) and simulate (on or off):
// TrainingRecipe::overlap_param_gather.
inline constexpr const char* kOverlapParamGatherHelp =
    "under ZeRO 1 and 2, each bucket's updated weights are all-gathered beside the next step's forward pass, each operator's first "
    "forward waiting for its bucket's, instead of after the update, as Megatron-LM's distributed optimizer does with "
    "--overlap-param-gather; priced and simulated on machines whose devices overlap communication (with pipeline stages, each stage's "
    "first forward waiting from when the first micro-batch reaches it; not with interlaced chunks)";
// --overlap-grad-reduce of optimize (a flag, on by default) and simulate
// (on or off): TrainingRecipe::overlap_grad_reduce.
inline constexpr const char* kOverlapGradReduceHelp =
    "the data-parallel gradient buckets are reduced beside the backward pass, each once its last gradient is ready (PyTorch DDP, "
    "Megatron-LM's --overlap-grad-reduce); off: after the backward pass (of the last micro-batch, after a pipeline's flush), the "
    "devices waiting for them, as Megatron-LM's DDP did before Megatron-Core (2023) and DeepSpeed's pipeline engine does; priced "
    "and simulated on machines whose devices overlap communication; a step that gathers weights before use (ZeRO 3) reduces every bucket "
    "beside the backward pass either way";
// --reduce-scatter of optimize (a flag, on by default) and simulate (on
// or off): TrainingRecipe::reduce_scatter.
inline constexpr const char* kReduceScatterHelp =
    "under ZeRO 1, the data-parallel gradients are reduce-scattered, each device receiving the sum of the shard it updates "
    "(Megatron-LM's distributed optimizer, DeepSpeed's \"reduce_scatter\": true); off: all-reduced whole, each device then updating "
    "its shard of the sum, as DeepSpeed's BF16 optimizer does (its pipeline engine at ZeRO 1 in BF16: BLOOM, MT-NLG), twice the "
    "gradients' ring bytes; off applies where every weight trains at stage 1 (with a stated stage of 0, 2 or 3 an error; with "
    "the stage searched, where stage 1 is chosen)";
bool parse_on_off(const std::string& text, const char* flag);
// What a report says of overlap_grad_input on machine `m`.
std::string overlap_grad_input_line(const Machine& m);
// What a report says of overlap_param_gather on machine `m` under `zero`
// (`gathered_for_use`: ZeRO 3 gathers some weights before each use).
std::string overlap_param_gather_line(const Machine& m, ZeroStage zero, bool gathered_for_use);
// What a report says of gradient buckets reduced after the backward pass
// (overlap_grad_reduce off) on machine `m` (`gathered_for_use`: ZeRO 3).
std::string after_backward_line(const Machine& m, bool gathered_for_use);
// What a report says of ZeRO 1's gradients all-reduced whole
// (reduce_scatter off), or "" where the recipe does not (the line included).
std::string all_reduced_line(const TrainingRecipe& r);
// --zero: 0, 1, 2, and where the command chooses (optimize) "auto".
std::optional<ZeroStage> parse_zero(const std::string& text, bool allow_auto);
// "  weight groups       stage 2: ... (the other weights at 1)\n", the
// line a report gives weights at another stage than the plan's; "" where
// none is.
std::string weight_groups_line(ZeroStage plan, const ZeroWeights& groups);
// --zero-weights: PATTERN=STAGE items, each stage 0-3 (the patterns
// resolved on the model later: search's zero_weight_stages).
ZeroWeights parse_zero_weights(const std::vector<std::string>& items);
extern const char* const kZeroHelp;
// --zero-persistence-threshold: a number of parameters (>= 0), or where the
// command chooses (optimize) "auto" (nullopt).
std::optional<int64_t> parse_persistence_threshold(const std::string& text, bool allow_auto);
extern const char* const kPersistenceHelp;

// --dims for the legacy format ("forward" or "reversed") and --format
// ("pcgx" or "flexflow"); errors name the option.
LegacyDims parse_dims(const std::string& s);
RuleFormat parse_rule_format(const std::string& f);

// Parses a whole string as an integer; `what` names it in the error.
int64_t parse_int(const std::string& text, const std::string& what);
// A positive count, or "auto" (0); errors name `flag`.
int64_t parse_count_or_auto(const std::string& flag, const std::string& text);

std::string human_count(double n);   // 335.1M
std::string human_bytes(double b);   // 1.25 GiB
std::string human_flops(double f);   // 3.21 TFLOP
std::string with_commas(int64_t n);  // 335,143,936

// An error message as one printable line: control characters (newlines,
// terminal escape codes from a file name or a field) are shown escaped.
std::string one_line(const std::string& message);

inline constexpr const char* kAxiomsHelp =
    "an axiom directory searched after the shipped axioms and plugins' (repeatable); a file there stands for the one of the same name "
    "before it";
inline constexpr const char* kAllowUnverifiedHelp =
    "search with a ruleset that is not a verified one (a content-hash mismatch, a rule without a proof, a rule that fails its "
    "check); reported as a warning";
inline constexpr const char* kReproveHelp =
    "re-prove every rule of the ruleset before searching, as pcgx audit does (a fresh proof, the stored unsat core alone, "
    "evaluation); a rule that fails refuses the ruleset";

// An integer option that must be positive when given (0 must not
// silently mean "the default").
CLI::Validator positive();

// --backend made concrete for this process (runner::choose_backend).
runner::ChosenBackend choose_backend(const std::string& name);

// Candidates left unproved because an operator has no SMT encoding at all
// (operator -> count): one line on stderr naming them, and true when any.
bool report_unencoded(const std::map<std::string, int>& unencoded);

// --opset's help: the shipped operator sets (rulesets/opsets) by name.
std::string opset_help();

// Silences std::cout and std::cerr on MPI ranks other than 0 for the rest
// of the process (every rank runs the same command and, given bad input,
// fails the same way: rank 0 reports for all).
class QuietRank {
 public:
  explicit QuietRank(bool quiet) {
    // Never destroyed: std::cout is flushed at exit after function-local
    // statics are gone, and flushing into a destroyed buffer crashed every
    // rank but 0 at exit (found by AddressSanitizer).
    static Null* const null = new Null;
    if (quiet) out_ = std::cout.rdbuf(null), err_ = std::cerr.rdbuf(null);
  }
  // For an error of this rank alone.
  void restore() {
    if (out_) std::cout.rdbuf(out_), std::cerr.rdbuf(err_), out_ = err_ = nullptr;
  }

 private:
  struct Null : std::streambuf {
    int overflow(int c) override { return c; }
  };
  std::streambuf* out_ = nullptr;
  std::streambuf* err_ = nullptr;
};

// Runs a command's work on every MPI rank of `world` (or once, without
// one), rank 0 alone speaking. An error of every rank alike (before
// training: arguments, files, the search's broadcast result) is said once
// by rank 0 before any rank leaves, exit code 2; a runner::TrainingError of
// one rank (the others may be waiting on it) is said by that rank, which
// then aborts the job.
void on_every_rank(runtime::MpiWorld* world, const std::function<void()>& work);

void add_models_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_ops_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_ruleset_command(CLI::App& app);
void add_axioms_command(CLI::App& app);
void add_verify_command(CLI::App& app);
void add_audit_command(CLI::App& app);
void add_regenerate_command(CLI::App& app);
void add_optimize_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_simulate_command(CLI::App& app);

}  // namespace pcgx::cli
