// The cross-entropy kernel a plan's runs use (see cross_entropy_kernel.h).
#include "pcgx/pcg/cross_entropy_kernel.h"

#include "pcgx/pcg/named_choice.h"

namespace pcgx {

const char* name(CrossEntropyKernel k) {
  switch (k) {
    case CrossEntropyKernel::kFused: return "fused";
    case CrossEntropyKernel::kEager: return "eager";
  }
  return "?";
}

std::optional<CrossEntropyKernel> cross_entropy_named(std::string_view text) { return choice_named(text, kCrossEntropyKernels); }

CrossEntropyPasses eager_cross_entropy_passes(int64_t logit_bytes) {
  constexpr double kFp32 = 4;
  const auto a = static_cast<double>(logit_bytes);
  const bool cast = logit_bytes != 4;
  CrossEntropyPasses p;
  // max (read), subtract (read, write), exp (read, write), sum (read), divide (read, write).
  p.forward_bytes = kFp32 * (1 + 2 + 2 + 1 + 2) + (cast ? a + kFp32 : 0);
  p.forward_kernels = 5 + (cast ? 1 : 0);
  // The scale by the loss's gradient (read, write), then the cast back.
  p.backward_bytes = 2 * kFp32 + (cast ? kFp32 + a : 0);
  p.backward_kernels = 1 + (cast ? 1 : 0);
  p.kept_bytes = kFp32;
  return p;
}

}  // namespace pcgx
