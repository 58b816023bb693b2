#pragma once
// The shipped ruleset as the search reads it, loaded once per test binary.
#include <string>

#include "pcgx/rulesets/ruleset.h"
#include "pcgx/search/rule_library.h"

namespace pcgx::search {

inline const RuleLibrary& shipped_library() {
  static const Ruleset rs = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  static const RuleLibrary lib(rs);
  return lib;
}

}  // namespace pcgx::search
