#pragma once
// How a plan's runs compute a dropout whose output is added to the
// residual stream (TrainingRecipe::dropout_add): a property of the
// software that runs the plan, like its attention kernel. The values are
// the same either way; the time differs.
//
//   eager  the dropout one kernel (reads its input, writes its output) and
//          the sum another (reads that output and the residual, writes
//          the sum): what the reference interpreter and the CPU runtime
//          run, and PyTorch eager.
//   fused  one kernel reads the dropout's input and the residual and writes
//          the sum, the dropout's output never written: Megatron-LM's
//          bias-dropout-add fusion (bias_dropout_add_fused_train, on by
//          default; --no-bias-dropout-fusion turns it off), which also adds
//          the bias of the product before it. pcgx's Linear adds its bias in
//          the product itself, so the kernel here is the dropout and the
//          sum. The backward pass is the same two kernels' work either way
//          (the dropout's gradient scaled by its mask, the sum's gradient
//          passed to both inputs and added where the residual forks), and
//          nothing more or less is kept for it (pcgx's dropout draws its
//          mask again from its seed; Megatron-LM keeps the mask in both).
//
// Which operators take part: the registry's OpDef::dropout_add; where
// they run fused in a graph: dropout_add_kernels.h.
#include <cstdint>
#include <optional>
#include <string_view>

namespace pcgx {

enum class DropoutAddKernel : uint8_t { kEager, kFused };
inline constexpr DropoutAddKernel kDropoutAddKernels[] = {DropoutAddKernel::kEager, DropoutAddKernel::kFused};
// "eager", "fused".
const char* name(DropoutAddKernel k);
std::optional<DropoutAddKernel> dropout_add_named(std::string_view text);

}  // namespace pcgx
