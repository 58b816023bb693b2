#pragma once
// Whether the search may use a ruleset. A content hash is no signature:
// anyone who edits a rule can recompute it, and a proof record that says
// "proved" is only a claim. So a ruleset is trusted when its content hash
// is one of pcgx's own shipped rulesets (pinned in the binary at build
// time from rulesets/MANIFEST.json), or else after every rule has been
// evaluated on both sides in the reference interpreter
// (numeric_check.h) and held. A passing check is remembered by content
// hash in a cache directory, so a ruleset costs it once.
//
// What this does not catch: a true rule whose proof record is forged (a
// swapped unsat core) passes the numeric check, because the rule is true;
// `pcgx audit` re-proves every stored core.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "pcgx/rulesets/ruleset.h"

namespace pcgx {

// The content hashes of the shipped rulesets this binary was built with.
std::span<const std::string> pinned_content_hashes();

struct RulesetTrust {
  enum class Basis : uint8_t { kPinned, kCheckedNow, kCheckedBefore } basis = Basis::kPinned;
  size_t rules = 0;  // the rules the numeric check evaluated (0 when pinned)
  // The first rule the numeric check refuted: its id and counterexample.
  std::optional<std::string> refuted;
  // One line for a report: "shipped (content hash pinned)", "every rule
  // checked numerically (N rules)", "... (checked before: cached)".
  std::string describe() const;
};

// The directory where passing checks are remembered: $PCGX_CACHE_DIR, else
// $XDG_CACHE_HOME/pcgx, else $HOME/.cache/pcgx; nothing when none is set.
std::optional<std::filesystem::path> default_trust_cache();

// Trust for `r` (loaded, its proof records already accepted): pinned, or
// the numeric check of every rule (skipped when `cache` remembers this
// content hash; a passing check is written there, a failure to write it
// ignored).
RulesetTrust establish_trust(const Ruleset& r, const std::optional<std::filesystem::path>& cache);

}  // namespace pcgx
