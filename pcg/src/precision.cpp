#include "pcgx/pcg/precision.h"

#include "pcgx/pcg/named_choice.h"

namespace pcgx {

const char* name(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "?";
}

std::optional<Precision> precision_named(std::string_view text) { return choice_named(text, kPrecisions); }

bool is_mixed(Precision p) { return p == Precision::kBf16 || p == Precision::kFp16; }

int64_t activation_bytes(Precision p) { return is_mixed(p) ? 2 : 4; }

int64_t element_bytes(DataType t, Precision p) { return t == DataType::kFloat32 ? activation_bytes(p) : byte_size(t); }

const char* name(GradPrecision g) {
  switch (g) {
    case GradPrecision::kCompute: return "compute";
    case GradPrecision::kFp32Cast: return "fp32-cast";
    case GradPrecision::kFp32: break;
  }
  return "fp32";
}

std::optional<GradPrecision> grad_precision_named(std::string_view text) { return choice_named(text, kGradPrecisions); }

ParamBytes param_bytes(Precision p, OptimizerState o, GradPrecision g) {
  return {activation_bytes(p), is_mixed(p) ? 4 : 0, g == GradPrecision::kCompute ? activation_bytes(p) : 4, 4 * optimizer_states(o),
          cast_pass_bytes(p, g) > 0 ? activation_bytes(p) : 0};
}

int64_t cast_pass_bytes(Precision p, GradPrecision g) {
  if (!is_mixed(p) || g != GradPrecision::kFp32Cast) return 0;
  return activation_bytes(p) + 4 + 4 + 4 + 4;
}

double update_stream_words(Precision p, OptimizerState o) {
  const ParamBytes per = param_bytes(p, o);
  return update_words(o) + (per.master > 0 ? static_cast<double>(per.weight) / 4.0 : 0.0);
}

int64_t param_state_bytes(Precision p, OptimizerState o) { return param_bytes(p, o).total(); }

}  // namespace pcgx
