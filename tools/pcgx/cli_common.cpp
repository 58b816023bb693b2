#include "cli_common.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "pcgx/generator/opset.h"
#include "pcgx/pcg/dropout_add_kernels.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/runner/train.h"

namespace pcgx::cli {

ModelParams parse_sets(const std::vector<std::string>& sets) {
  ModelParams sizes;
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("--set " + s + ": expected key=value");
    sizes[s.substr(0, eq)] = parse_int(s.substr(eq + 1), "--set " + s + ": value");
  }
  return sizes;
}

Graph load_model(const std::string& model, const std::vector<std::string>& sets, std::map<std::string, Tensor<float>>* weights) {
  runner::LoadedModel m = runner::load_model(model, parse_sets(sets));
  if (weights) *weights = std::move(m.weights);
  return std::move(m.graph);
}

namespace {

std::vector<std::pair<std::string, std::string>>& flag_names() {
  static std::vector<std::pair<std::string, std::string>> names;
  return names;
}

template <typename E, typename Range, typename NameOf>
std::optional<E> parse_choice_or_auto(const std::string& text, const std::string& flag, const char* what, const Range& all, NameOf name_of,
                                      bool allow_auto) {
  if (allow_auto && text == "auto") return std::nullopt;
  std::string choices = allow_auto ? "auto" : "";
  for (const E e : all) {
    if (text == name_of(e)) return e;
    choices += (choices.empty() ? "" : ", ") + std::string(name_of(e));
  }
  throw Error(flag + ": unknown " + what + " '" + text + "' (" + choices + ")");
}

template <class E, class Range, class NameOf>
E parse_choice(const std::string& text, const std::string& flag, const char* what, const Range& all, NameOf name_of) {
  return *parse_choice_or_auto<E>(text, flag, what, all, name_of, false);
}

}  // namespace

void name_flags(std::initializer_list<std::pair<const char*, const char*>> fields) {
  // A command's own names go before the common ones (a later registration
  // wins), and longest first, so "ModelParams.batch" is replaced before
  // "ModelParams".
  flag_names().insert(flag_names().begin(), fields.begin(), fields.end());
  std::stable_sort(flag_names().begin(), flag_names().end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

std::string with_flags(const std::string& message) {
  std::string out = message;
  for (const auto& [field, flag] : flag_names())
    for (size_t at = out.find(field); at != std::string::npos; at = out.find(field, at + flag.size())) {
      // A field name ends at a character that cannot continue it.
      const size_t end = at + field.size();
      if (field.back() != '.' && end < out.size() && (std::isalnum(static_cast<unsigned char>(out[end])) || out[end] == '_')) {
        at += 1;
        continue;
      }
      out.replace(at, field.size(), flag);
    }
  return out;
}

search::Algorithm parse_algorithm(const std::string& text, const std::string& flag) {
  return parse_choice<search::Algorithm>(text, flag, "algorithm", search::kAlgorithms, [](search::Algorithm a) { return search::name(a); });
}

search::SearchOptions::Rank parse_rank(const std::string& text) {
  using Rank = search::SearchOptions::Rank;
  static constexpr std::array ranks{Rank::kSimulation, Rank::kEstimate};
  return parse_choice<Rank>(text, "--rank", "ranking", ranks, [](Rank r) { return r == Rank::kSimulation ? "simulation" : "estimate"; });
}

runtime::OptimizerKind parse_optimizer(const std::string& text) {
  static constexpr std::array kinds{runtime::OptimizerKind::kSgd, runtime::OptimizerKind::kAdam};
  return parse_choice<runtime::OptimizerKind>(text, "--optimizer", "optimizer", kinds, [](runtime::OptimizerKind k) { return runtime::name(k); });
}

runner::BackendKind parse_backend(const std::string& text) {
  return parse_choice<runner::BackendKind>(text, "--backend", "backend", runner::kBackendKinds, runner::backend_name);
}

Precision parse_precision(const std::string& text) {
  return parse_choice<Precision>(text, "--precision", "precision", kPrecisions, [](Precision p) { return name(p); });
}

std::optional<Precision> parse_precision(const std::string& text, bool allow_auto) {
  return parse_choice_or_auto<Precision>(text, "--precision", "precision", kPrecisions, [](Precision p) { return name(p); }, allow_auto);
}

ScheduleFlag parse_schedule(const std::string& text) {
  std::error_code ec;
  const bool file = !pipeline_schedule_named(text) && std::filesystem::exists(text, ec);
  if (!file && (text.find('/') != std::string::npos || text.find('.') != std::string::npos))
    throw Error("--schedule: no file '" + text + "' (and not a schedule: gpipe, 1f1b, interleaved)");
  if (!file)
    return {parse_choice<PipelineSchedule>(text, "--schedule", "schedule", kPipelineSchedules, [](PipelineSchedule k) { return name(k); }), {}};
  return {PipelineSchedule::kExplicit, parse_pipeline_programs(read_text_file(text), text)};
}

const char* const kScheduleHelp =
    "pipeline schedule of a pipelined strategy: gpipe, 1f1b, interleaved, or a file of each stage's order of steps (one line per stage, "
    "e.g. \"F0 F1 B0 F2 B1 B2\"; docs/plans.md), checked for deadlock (default: the strategy's)";

const char* const kPrecisionHelp =
    "training precision: fp32, tf32 (FP32 storage, TF32 matrix products), bf16 or fp16 (mixed: low-precision compute and "
    "activations, FP32 master weights, gradients and optimizer state; fp16 with loss scaling)";

std::optional<Recompute> parse_recompute(const std::string& text, bool allow_auto) {
  return parse_choice_or_auto<Recompute>(text, "--recompute", "recomputation policy", kRecomputePolicies, [](Recompute r) { return name(r); }, allow_auto);
}

const char* const kRecomputeHelp =
    "activation recomputation: none (keep every activation), gathers (only sequence parallelism's all-gathered inputs, "
    "gathered again in backward as Megatron-LM's sequence parallelism does), selective (recompute attention's scores, softmax and dropout, and the gathers), "
    "full (keep only the tensors between blocks, recompute each block in backward), full+selective (with --recompute-layers N: "
    "N blocks full, selective in the others), full+gathers (full, of the first N blocks with --recompute-layers N, and "
    "the gathers again elsewhere: Megatron-LM's sequence parallelism with --recompute-num-layers N), operators (the operators optimize's --recompute-operators or a plan's "
    "recompute_operators names)";
const char* const kRecomputeLayersHelp =
    "with --recompute full: recompute only the first N layers of the model (with pipeline stages, of each chunk) (Megatron-LM's "
    "--recompute-method block --recompute-num-layers N); the later layers keep their activations (with full+selective: "
    "recompute selectively; with full+gathers: gather sequence parallelism's inputs again)";

OptimizerState parse_optimizer_state(const std::string& text) {
  return parse_choice<OptimizerState>(text, "--optimizer", "optimizer", kOptimizerStates, [](OptimizerState o) { return name(o); });
}

AttentionKernel parse_attention(const std::string& text) {
  return parse_choice<AttentionKernel>(text, "--attention", "attention kernel", kAttentionKernels, [](AttentionKernel a) { return name(a); });
}

std::string cross_entropy_line(const Graph& g) {
  int64_t softmaxes = 0;
  for (const Node& n : g.nodes()) softmaxes += n.op && n.op->cross_entropy == CrossEntropyPart::kSoftmax ? 1 : 0;
  if (softmaxes == 0) return "eager (the model has no cross-entropy: nothing changes)";
  return std::string("eager (") + std::to_string(softmaxes) + (softmaxes == 1 ? " softmax" : " softmaxes") +
         " over the logits in FP32 passes, the FP32 probabilities kept for backward)";
}

CrossEntropyKernel parse_cross_entropy(const std::string& text) {
  return parse_choice<CrossEntropyKernel>(text, "--cross-entropy", "cross-entropy kernel", kCrossEntropyKernels,
                                          [](CrossEntropyKernel k) { return name(k); });
}

DropoutAddKernel parse_dropout_add(const std::string& text) {
  return parse_choice<DropoutAddKernel>(text, "--dropout-add", "dropout-add kernel", kDropoutAddKernels, [](DropoutAddKernel k) { return name(k); });
}

std::string precision_note(const TrainingRecipe& recipe) {
  if (!is_mixed(recipe.precision)) return "";
  if (recipe.grad_precision == GradPrecision::kFp32) return " (FP32 master weights, gradients and optimizer state)";
  if (recipe.grad_precision == GradPrecision::kFp32Cast)
    return std::string(" (FP32 master weights, gradients and optimizer state; each micro-batch's gradients written in ") + name(recipe.precision) +
           ", then cast and added to the FP32 ones: --grad-precision fp32-cast)";
  return std::string(" (FP32 master weights and optimizer state; gradients in ") + name(recipe.precision) + ": --grad-precision compute)";
}

GradPrecision parse_grad_precision(const std::string& text) {
  return parse_choice<GradPrecision>(text, "--grad-precision", "gradient precision", kGradPrecisions, [](GradPrecision g) { return name(g); });
}

std::string dropout_add_line(const Graph& g) {
  const size_t fused = find_dropout_add_kernels(g, source_layouts(g)).count();
  if (fused == 0) return "fused (no dropout of the model is read by a sum alone: nothing changes)";
  return std::string("fused (") + std::to_string(fused) + (fused == 1 ? " dropout" : " dropouts") + " in their sums' pass)";
}

bool parse_on_off(const std::string& text, const char* flag) {
  if (text == "on") return true;
  if (text == "off") return false;
  throw Error(std::string(flag) + ": expected on or off, got '" + text + "'");
}

std::string overlap_grad_input_line(const Machine& m) {
  return m.device.overlaps_communication
             ? "sent while the weight gradients are computed, where a collective carries them (--overlap-grad-input)"
             : "sent after each operator's backward: this machine's devices do their own communication (--overlap-grad-input has no effect)";
}

std::string overlap_param_gather_line(const Machine& m, ZeroStage zero, bool gathered_for_use) {
  if (zero == ZeroStage::k0) return "no weights gathered after the update at ZeRO stage 0 (--overlap-param-gather has no effect)";
  if (gathered_for_use)
    return "ZeRO 3 gathers weights before each use; the blocks kept whole are gathered after the update (--overlap-param-gather has no effect)";
  return m.device.overlaps_communication
             ? "gathered beside the next step's forward pass, each operator waiting for its bucket's (--overlap-param-gather)"
             : "gathered after the update: this machine's devices do their own communication (--overlap-param-gather has no effect)";
}

std::string all_reduced_line(const TrainingRecipe& r) {
  if (!zero1_all_reduces(r)) return "";
  return "gradient reduction    all-reduced whole, each device then updating its shard of the sum (ZeRO 1, --no-reduce-scatter; "
         "DeepSpeed's BF16 optimizer)\n";
}

std::string after_backward_line(const Machine& m, bool gathered_for_use) {
  if (gathered_for_use)
    return "ZeRO 3 gathers weights before use and reduces every bucket beside the backward pass (--no-overlap-grad-reduce has no effect)";
  return m.device.overlaps_communication
             ? "reduced after the backward pass, the devices waiting for them (--no-overlap-grad-reduce)"
             : "reduced after the backward pass: this machine's devices do their own communication, so always";
}

std::optional<ZeroStage> parse_zero(const std::string& text, bool allow_auto) {
  return parse_choice_or_auto<ZeroStage>(text, "--zero", "ZeRO stage", kZeroStages, [](ZeroStage z) { return name(z); }, allow_auto);
}

std::string weight_groups_line(ZeroStage plan, const ZeroWeights& groups) {
  const std::string listed = describe_zero_weights(plan, groups);
  return listed.empty() ? std::string() : "  weight groups       " + listed + " (the other weights at " + name(plan) + ")\n";
}

ZeroWeights parse_zero_weights(const std::vector<std::string>& items) {
  ZeroWeights out;
  for (const std::string& item : items) {
    const size_t eq = item.rfind('=');
    const std::optional<ZeroStage> z = eq == std::string::npos ? std::nullopt : zero_named(item.substr(eq + 1));
    if (eq == 0 || !z) throw FieldError("--zero-weights", "expected PATTERN=STAGE (a weight name or pattern, a stage of 0, 1, 2, 3: 'block*.mlp.*=3'), got '" + item + "'");
    out.push_back({item.substr(0, eq), *z});
  }
  return out;
}

const char* const kZeroHelp =
    "sharded data parallelism (ZeRO): 0 (every replica keeps all of its weights' state, gradients all-reduced), 1 (the FP32 master "
    "weights and the optimizer's state (Adam's moments) sharded over each weight's data-parallel group: gradients reduce-scattered, weights all-gathered "
    "after the update), 2 (the gradients sharded too), 3 (the weights too: each operator all-gathers its weights before its forward "
    "and its backward, as FSDP does)";

static std::optional<int64_t> whole_integer(const std::string& text);  // below

std::optional<int64_t> parse_persistence_threshold(const std::string& text, bool allow_auto) {
  if (allow_auto && text == "auto") return std::nullopt;
  const auto v = whole_integer(text);
  if (!v || *v < 0)
    throw Error("--zero-persistence-threshold: expected a number of parameters (0 or more)" + std::string(allow_auto ? " or auto" : "") + ", got '" +
                text + "'");
  return *v;
}

const char* const kPersistenceHelp =
    "at ZeRO stage 3: weight blocks (what one device holds of a weight before sharding) of fewer parameters than this stay whole "
    "on every device, gathered once after the update as at stage 2, instead of before each use (DeepSpeed's "
    "stage3_param_persistence_threshold); 0: every block sharded (FSDP)";

LegacyDims parse_dims(const std::string& s) {
  if (s == "reversed") return LegacyDims::kReversed;
  if (s == "forward") return LegacyDims::kForward;
  throw Error("--dims " + s + ": expected reversed or forward");
}

RuleFormat parse_rule_format(const std::string& f) {
  if (f == "pcgx") return RuleFormat::kPcgx;
  if (f == "flexflow") return RuleFormat::kFlexflow;
  throw Error("--format " + f + ": expected pcgx or flexflow");
}

// The whole string as an integer, or nothing.
static std::optional<int64_t> whole_integer(const std::string& text) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return v;
}

int64_t parse_int(const std::string& text, const std::string& what) {
  const auto v = whole_integer(text);
  if (!v) throw Error(what + " '" + text + "' is not an integer");
  return *v;
}

int64_t parse_count_or_auto(const std::string& flag, const std::string& text) {
  if (text == "auto") return 0;
  const auto v = whole_integer(text);
  if (!v || *v < 1) throw Error(flag + ": expected a positive count or auto, got '" + text + "'");
  return *v;
}

static std::string scaled(double v, const char* const* units, int n, double base, int decimals) {
  int u = 0;
  while (u + 1 < n && std::fabs(v) >= base) {
    v /= base;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", u == 0 ? 0 : decimals, v, units[u]);
  return buf;
}

std::string human_count(double n) {
  static const char* const units[] = {"", "K", "M", "B", "T"};
  return scaled(n, units, 5, 1000.0, 1);
}

std::string human_bytes(double b) {
  static const char* const units[] = {" B", " KiB", " MiB", " GiB", " TiB"};
  return scaled(b, units, 5, 1024.0, 2);
}

std::string human_flops(double f) {
  static const char* const units[] = {" FLOP", " KFLOP", " MFLOP", " GFLOP", " TFLOP", " PFLOP"};
  return scaled(f, units, 6, 1000.0, 2);
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string one_line(const std::string& message) {
  std::string out;
  out.reserve(message.size());
  for (const char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        return used == value.size() && v > 0 ? "" : "must be a positive integer, got '" + value + "'";
      },
      "POSITIVE");
}

runner::ChosenBackend choose_backend(const std::string& name) {
  name_flags({{"BackendKind", "--backend"}});
  return runner::choose_backend(parse_backend(name));
}

void on_every_rank(runtime::MpiWorld* world, const std::function<void()>& work) {
  QuietRank quiet(world && world->rank() != 0);
  try {
    work();
  } catch (const Error& e) {
    if (!world) throw;
    if (dynamic_cast<const runner::TrainingError*>(&e)) {
      quiet.restore();
      std::cerr << "error: rank " << world->rank() << ": " << one_line(with_flags(e.what())) << "\n";
      world->abort(2);
    }
    // mpirun ends the job at the first non-zero exit and may drop what a
    // rank prints after that, so rank 0 says why before any rank can leave
    // (the sum is collective).
    if (world->rank() == 0) std::cerr << "error: " << one_line(with_flags(e.what())) << std::endl;
    world->sum(0);
    throw CLI::RuntimeError(2);
  }
}

std::string opset_help() {
  std::string names;
  try {
    for (const auto& o : gen::named_opsets()) names += (names.empty() ? "" : ", ") + o.name;
  } catch (const Error& e) {
    names = "unreadable: " + std::string(e.what());
  }
  return "operator set: a shipped one (" + names + ", in " + gen::opsets_dir() + ") or an opset file (pcgx.opset JSON)";
}

bool report_unencoded(const std::map<std::string, int>& unencoded) {
  if (unencoded.empty()) return false;
  std::string list;
  int n = 0;
  for (const auto& [op, count] : unencoded) list += (list.empty() ? "" : ", ") + op + " (" + std::to_string(count) + ")", n += count;
  std::cerr << n << " candidates are unproved because their operators have no SMT encoding: " << list
            << "; give each registry entry its SMT forms, OpDef::smt (pcgx ops check NAME)\n";
  return true;
}

}  // namespace pcgx::cli
