// Megatron-LM's pipeline layout strings (see pipeline_layout.h).
#include "pcgx/search/pipeline_layout.h"

#include <string>

#include "pcgx/pcg/error.h"

namespace pcgx::search {
namespace {

constexpr const char* kField = "PipelineOptions.layout";
constexpr size_t kMaxExpanded = 1 << 20;  // a layout of a million layers is a typo
constexpr int kMaxDepth = 64;             // groups within groups

[[noreturn]] void bad(const std::string& why) { throw FieldError(kField, why); }

// Expands `text` from `at` to the matching ')' (or the end where `depth`
// is 0): repetitions unrolled, commas and spaces dropped. `work` counts
// every character written, kept or not, against kMaxExpanded.
std::string expand(std::string_view text, size_t& at, int depth, size_t& work) {
  if (depth > kMaxDepth) bad("groups nested more than " + std::to_string(kMaxDepth) + " deep");
  std::string out;
  auto count = [&]() -> size_t {  // after '*'
    const size_t from = at;
    size_t n = 0;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      n = n * 10 + static_cast<size_t>(text[at++] - '0');
      if (n > kMaxExpanded) bad("a repetition of more than " + std::to_string(kMaxExpanded));
    }
    if (at == from) bad("'*' at position " + std::to_string(from - 1) + " is not followed by a count");
    return n;
  };
  auto repeat = [&](const std::string& unit, size_t n) {
    work += unit.size() * n;
    if (unit.size() * n + out.size() > kMaxExpanded || work > 4 * kMaxExpanded)
      bad("more than " + std::to_string(kMaxExpanded) + " characters once expanded");
    for (size_t i = 0; i < n; ++i) out += unit;
  };
  while (at < text.size()) {
    const char c = text[at++];
    if (c == ',' || c == ' ') continue;
    if (c == '(') {
      const std::string group = expand(text, at, depth + 1, work);
      if (at >= text.size() || text[at] != '*') bad("a group '(...)' must be followed by '*' and a count");
      ++at;
      repeat(group, count());
    } else if (c == ')') {
      if (depth == 0) bad("')' at position " + std::to_string(at - 1) + " closes no group");
      return out;
    } else if (c == 'E' || c == 't' || c == 'L' || c == '|') {
      if (at < text.size() && text[at] == '*') {
        ++at;
        repeat(std::string(1, c), count());
      } else {
        out += c;
        if (++work > 4 * kMaxExpanded) bad("more than " + std::to_string(kMaxExpanded) + " characters once expanded");
      }
    } else {
      bad(std::string("unknown character '") + c + "' at position " + std::to_string(at - 1) +
          " (E: the embeddings, t: a transformer layer, L: the head and loss, |: the end of a chunk; x*n and (...)*n repeat)");
    }
  }
  if (depth > 0) bad("a group '(' is not closed");
  return out;
}

}  // namespace

std::vector<int64_t> parse_pipeline_layout(std::string_view text) {
  size_t at = 0, work = 0;
  const std::string flat = expand(text, at, 0, work);
  std::vector<int64_t> layers{0};
  std::vector<std::string> chunks{""};
  for (const char c : flat) {
    if (c == '|') {
      layers.push_back(0), chunks.emplace_back();
      continue;
    }
    if (c == 't') ++layers.back();
    chunks.back() += c;
  }
  const size_t n = chunks.size();
  size_t embeddings = 0, heads = 0;
  for (size_t k = 0; k < n; ++k) {
    for (size_t i = 0; i < chunks[k].size(); ++i) {
      if (chunks[k][i] == 'E') {
        ++embeddings;
        if (k != 0 || i != 0) bad("'E' (the embeddings) must come first in the first chunk");
      } else if (chunks[k][i] == 'L') {
        ++heads;
        if (k + 1 != n || i + 1 != chunks[k].size()) bad("'L' (the head and loss) must come last in the last chunk");
      }
    }
    if (chunks[k].empty() || (layers[k] == 0 && k != 0 && k + 1 != n))
      bad("chunk " + std::to_string(k + 1) + " of " + std::to_string(n) + " holds no layer");
  }
  if (embeddings != 1 || heads != 1) bad("a layout states 'E' and 'L' once each");
  return layers;
}

}  // namespace pcgx::search
