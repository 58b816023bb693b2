#include "pcgx/pcg/optimizer_state.h"

#include "pcgx/pcg/named_choice.h"

namespace pcgx {

const char* name(OptimizerState o) {
  switch (o) {
    case OptimizerState::kSgd: return "sgd";
    case OptimizerState::kMomentum: return "momentum";
    case OptimizerState::kAdam: return "adam";
  }
  return "?";
}

std::optional<OptimizerState> optimizer_named(std::string_view text) { return choice_named(text, kOptimizerStates); }

int optimizer_states(OptimizerState o) {
  switch (o) {
    case OptimizerState::kSgd: return 0;
    case OptimizerState::kMomentum: return 1;
    case OptimizerState::kAdam: return 2;
  }
  return 2;
}

int update_words(OptimizerState o) { return 3 + 2 * optimizer_states(o); }

}  // namespace pcgx
