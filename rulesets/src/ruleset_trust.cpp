#include "pcgx/rulesets/ruleset_trust.h"

#include <cstdlib>
#include <fstream>
#include <system_error>

#include "pcgx/rulesets/numeric_check.h"
#include "pinned_hashes.h"

namespace pcgx {

std::span<const std::string> pinned_content_hashes() {
  static const std::vector<std::string> hashes(std::begin(kPinnedContentHashes), std::end(kPinnedContentHashes));
  return hashes;
}

std::string RulesetTrust::describe() const {
  switch (basis) {
    case Basis::kPinned: return "shipped (content hash pinned)";
    case Basis::kCheckedNow: return "every rule checked numerically (" + std::to_string(rules) + " rules)";
    case Basis::kCheckedBefore: return "every rule checked numerically before (cached by content hash)";
  }
  return "?";
}

std::optional<std::filesystem::path> default_trust_cache() {
  if (const char* d = std::getenv("PCGX_CACHE_DIR"); d && *d) return std::filesystem::path(d);
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::filesystem::path(d) / "pcgx";
  if (const char* d = std::getenv("HOME"); d && *d) return std::filesystem::path(d) / ".cache" / "pcgx";
  return std::nullopt;
}

namespace {

// The check's own version is in the name: a changed check checks again.
constexpr const char* kCheckVersion = "1";
std::filesystem::path mark(const std::filesystem::path& cache, const std::string& hash) {
  return cache / (std::string("checked-v") + kCheckVersion + "-" + hash);
}

// Remembers a passing check; a cache that cannot be written only costs the
// check again next time.
void remember(const std::filesystem::path& cache, const std::string& hash) {
  std::error_code ec;
  std::filesystem::create_directories(cache, ec);
  if (ec) return;
  const std::filesystem::path tmp = mark(cache, hash).string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << "every rule of the ruleset with content hash " << hash << " held its numeric check\n";
    if (!out) return;
  }
  std::filesystem::rename(tmp, mark(cache, hash), ec);
}

}  // namespace

RulesetTrust establish_trust(const Ruleset& r, const std::optional<std::filesystem::path>& cache) {
  RulesetTrust t;
  const std::string& hash = r.computed_hash;
  for (const std::string& pinned : pinned_content_hashes())
    if (!pinned.empty() && pinned == hash) return t;
  std::error_code ec;
  if (cache && std::filesystem::exists(mark(*cache, hash), ec)) {
    t.basis = RulesetTrust::Basis::kCheckedBefore;
    return t;
  }
  t.basis = RulesetTrust::Basis::kCheckedNow;
  for (const Rule& rule : r.rules) {
    ++t.rules;
    const NumericCheck n = check_numerically(rule);
    if (!n.holds) {
      t.refuted = rule.id + ": " + n.counterexample;
      return t;
    }
  }
  if (cache) remember(*cache, hash);
  return t;
}

}  // namespace pcgx
