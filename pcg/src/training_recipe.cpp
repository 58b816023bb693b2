#include "pcgx/pcg/training_recipe.h"

namespace pcgx {

const char* name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

std::optional<Recompute> recompute_named(std::string_view text) {
  for (const Recompute r : kRecomputes)
    if (text == name(r)) return r;
  return std::nullopt;
}

}  // namespace pcgx
