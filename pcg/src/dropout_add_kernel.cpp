// The dropout-add kernel a plan's runs use (see dropout_add_kernel.h).
#include "pcgx/pcg/dropout_add_kernel.h"

#include "pcgx/pcg/named_choice.h"

namespace pcgx {

const char* name(DropoutAddKernel k) {
  switch (k) {
    case DropoutAddKernel::kEager: return "eager";
    case DropoutAddKernel::kFused: return "fused";
  }
  return "?";
}

std::optional<DropoutAddKernel> dropout_add_named(std::string_view text) { return choice_named(text, kDropoutAddKernels); }

}  // namespace pcgx
