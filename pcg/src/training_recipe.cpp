#include "pcgx/pcg/training_recipe.h"

#include "pcgx/pcg/named_choice.h"

namespace pcgx {

const char* name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
    case Recompute::kFullSelective: return "full+selective";
    case Recompute::kOperators: return "operators";
  }
  return "?";
}

std::optional<Recompute> recompute_named(std::string_view text) { return choice_named(text, kRecomputePolicies); }

std::string describe_recompute(Recompute r, int32_t layers, bool per_chunk) {
  if (!recomputes_layers(r) || layers < 0) return name(r);
  const std::string count = std::to_string(layers) + (layers == 1 ? " layer" : " layers") + (per_chunk ? " of each chunk" : "");
  if (r == Recompute::kFullSelective) return "full, first " + count + ", selective in the others";
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
