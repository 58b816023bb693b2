#pragma once
// The optimizer a plan trains with, as the memory and cost models see it
// (docs/training.md "Optimizer"): how many FP32 tensors of state it keeps
// per parameter, which is what it costs in memory (4 bytes each) and in
// the update's memory traffic (each read and written once, beside the
// weight read and written and the gradient read).
//
//   sgd       plain SGD: no state; the update streams 3 FP32 words per
//             parameter (read w, g; write w).
//   momentum  SGD with momentum (PyTorch's SGD(momentum > 0)): one state,
//             5 words.
//   adam      Adam (and AdamW): two moments, 7 words. pcgx's default, what
//             large models train with.
#include <cstdint>
#include <optional>
#include <string_view>

namespace pcgx {

enum class OptimizerState : uint8_t { kSgd, kMomentum, kAdam };
inline constexpr OptimizerState kOptimizerStates[] = {OptimizerState::kSgd, OptimizerState::kMomentum, OptimizerState::kAdam};
inline constexpr OptimizerState kDefaultOptimizer = OptimizerState::kAdam;

// sgd, momentum, adam: what files and reports say.
const char* name(OptimizerState o);
// From its name; nullopt for any other text.
std::optional<OptimizerState> optimizer_named(std::string_view text);
// FP32 tensors of state per parameter: 0, 1, 2.
int optimizer_states(OptimizerState o);
// FP32 words the update streams per parameter: 3 + 2 per state.
int update_words(OptimizerState o);

}  // namespace pcgx
