#pragma once
// How a plan's runs compute the cross-entropy over the logits
// (TrainingRecipe::cross_entropy): a property of the software that runs the
// plan, like its attention kernel. The values are the same either way; the
// time and the memory differ, and at a large vocabulary over a small
// hidden size by much (the logits are the step's largest tensor: 4,096
// tokens x 131,072 classes is 0.5 G elements).
//
//   fused  one kernel reads the logits once in the compute precision and
//          accumulates in FP32, and the backward pass writes their gradient
//          once; the logits are kept for it. What pcgx's runtimes run, and
//          Transformer Engine's parallel cross-entropy, Apex's xentropy
//          and Liger's kernel do about the same.
//   eager  the logits cast to FP32 and taken through separate passes, the
//          FP32 probabilities kept for the backward pass, which scales them
//          in place and casts the gradient back: Megatron-LM's
//          vocab_parallel_cross_entropy (its default; in core_r0.8.0
//          --cross-entropy-loss-fusion only fuses some of the elementwise
//          passes into jit kernels) and PyTorch's cross_entropy under
//          autocast, which runs log_softmax and nll_loss in FP32.
//
// Which operators take part: the registry's OpDef::cross_entropy.
#include <cstdint>
#include <optional>
#include <string_view>

namespace pcgx {

enum class CrossEntropyKernel : uint8_t { kFused, kEager };
inline constexpr CrossEntropyKernel kCrossEntropyKernels[] = {CrossEntropyKernel::kFused, CrossEntropyKernel::kEager};
// "fused", "eager".
const char* name(CrossEntropyKernel k);
std::optional<CrossEntropyKernel> cross_entropy_named(std::string_view text);

// The passes of an eager cross-entropy over one logit element, as
// Megatron-LM's vocab_parallel_cross_entropy runs them, for logits of
// `logit_bytes` bytes per element (2 under BF16/FP16, 4 in FP32):
//   forward   the cast to FP32 (read the logits, write 4 bytes; none when
//             they are FP32 already: `.float()` returns them), the rows'
//             maximum (read 4), its subtraction (read and write 4, in
//             place), exp (read and write 4, in place), the rows' sums
//             (read 4), the division by them (read and write 4, in place):
//             32 bytes and 5 kernels, 38 and 6 from 16-bit logits;
//   backward  the FP32 probabilities less one at each label (a few bytes
//             per row, not counted) scaled by the loss's gradient in place
//             (read and write 4), then cast back (read 4, write the
//             logits' size; none in FP32): 8 bytes and 1 kernel, 14 and
//             2 from 16-bit logits.
// The probabilities (4 bytes per element) are kept between the two, in
// place of the logits; while the forward runs, both exist.
struct CrossEntropyPasses {
  double forward_bytes = 0, backward_bytes = 0;  // per logit element
  int forward_kernels = 0, backward_kernels = 0;
  double kept_bytes = 0;  // per logit element, through the backward pass
};
CrossEntropyPasses eager_cross_entropy_passes(int64_t logit_bytes);

}  // namespace pcgx
