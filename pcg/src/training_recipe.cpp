#include "pcgx/pcg/training_recipe.h"

#include "pcgx/pcg/named_choice.h"

#include <algorithm>

namespace pcgx {

const char* name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kGathers: return "gathers";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
    case Recompute::kFullSelective: return "full+selective";
    case Recompute::kFullGathers: return "full+gathers";
    case Recompute::kOperators: return "operators";
  }
  return "?";
}

std::optional<Recompute> recompute_named(std::string_view text) { return choice_named(text, kRecomputePolicies); }

std::string describe_recompute(Recompute r, int32_t layers, bool per_chunk) {
  if (!recomputes_layers(r) || layers < 0) return name(r);
  const std::string count = std::to_string(layers) + (layers == 1 ? " layer" : " layers") + (per_chunk ? " of each chunk" : "");
  if (r == Recompute::kFullSelective) return "full, first " + count + ", selective in the others";
  if (r == Recompute::kFullGathers) return "full, first " + count + ", gathers again in the others";
  return std::string(name(r)) + ", first " + count;
}

const char* name(ZeroStage z) {
  switch (z) {
    case ZeroStage::k0: return "0";
    case ZeroStage::k1: return "1";
    case ZeroStage::k2: return "2";
    case ZeroStage::k3: return "3";
  }
  return "?";
}

std::optional<ZeroStage> zero_named(std::string_view text) { return choice_named(text, kZeroStages); }

ZeroStage zero_of(ZeroStage plan, const ZeroWeights& groups, std::string_view weight) {
  const auto it = std::lower_bound(groups.begin(), groups.end(), weight, [](const WeightZero& w, std::string_view n) { return w.weight < n; });
  return it != groups.end() && it->weight == weight ? it->stage : plan;
}

ZeroStage highest_zero(ZeroStage plan, const ZeroWeights& groups) {
  for (const WeightZero& w : groups) plan = std::max(plan, w.stage);
  return plan;
}

std::optional<std::string> zero_weights_problem(ZeroStage plan, const ZeroWeights& groups) {
  for (const WeightZero& w : groups)
    if ((w.stage == ZeroStage::k0) != (plan == ZeroStage::k0))
      return "weight " + w.weight + " at ZeRO stage " + name(w.stage) + " beside the plan's stage " + name(plan) +
             ": stage 0 cannot mix with a sharded stage (stage 1 moves the same bytes as 0's all-reduce and keeps less: "
             "stage 1 instead)";
  return std::nullopt;
}

std::optional<std::string> zero_weights_problem(std::optional<ZeroStage> plan, const ZeroWeights& groups) {
  if (plan) return zero_weights_problem(*plan, groups);
  const auto at0 = std::find_if(groups.begin(), groups.end(), [](const WeightZero& w) { return w.stage == ZeroStage::k0; });
  const auto sharded = std::find_if(groups.begin(), groups.end(), [](const WeightZero& w) { return w.stage != ZeroStage::k0; });
  if (at0 == groups.end() || sharded == groups.end()) return std::nullopt;
  return "weight " + at0->weight + " at ZeRO stage 0 beside " + sharded->weight + " at " + name(sharded->stage) +
         ": stage 0 cannot mix with a sharded stage (at stage 1 it moves the same bytes and keeps less)";
}

void sort_zero_weights(ZeroWeights& groups) {
  std::sort(groups.begin(), groups.end(), [](const WeightZero& a, const WeightZero& b) { return a.weight < b.weight; });
}

std::string describe_zero_weights(ZeroStage plan, const ZeroWeights& groups) {
  std::string out;
  for (const ZeroStage z : kZeroStages) {
    if (z == plan) continue;
    std::vector<const std::string*> names;
    for (const WeightZero& w : groups)
      if (w.stage == z) names.push_back(&w.weight);
    if (names.empty()) continue;
    out += std::string(out.empty() ? "" : "; ") + "stage " + name(z) + ": " + std::to_string(names.size()) + (names.size() == 1 ? " weight (" : " weights (");
    for (size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", " : "") + *names[i];
    out += names.size() > 3 ? ", ...)" : ")";
  }
  return out;
}

const char* name(AttentionKernel a) {
  switch (a) {
    case AttentionKernel::kEager: return "eager";
    case AttentionKernel::kFlash: return "flash";
    case AttentionKernel::kFused: return "fused";
  }
  return "?";
}

std::optional<AttentionKernel> attention_named(std::string_view text) { return choice_named(text, kAttentionKernels); }

}  // namespace pcgx
