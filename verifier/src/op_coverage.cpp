#include "pcgx/verifier/op_coverage.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "encoding.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx::verify {
namespace {

// Whether `text` holds `word` as a whole SMT symbol.
bool mentions(const std::string& text, const std::string& word) {
  auto symbol_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; };
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool before = at == 0 || !symbol_char(text[at - 1]);
    const bool after = at + word.size() == text.size() || !symbol_char(text[at + word.size()]);
    if (before && after) return true;
  }
  return false;
}

}  // namespace

OpCoverage op_coverage(const std::string& op, const AxiomSet& axioms, bool check) {
  OpCoverage c;
  for (const Encoding& e : encodings())
    if (op == e.op && std::find(c.symbols.begin(), c.symbols.end(), e.symbol) == c.symbols.end()) c.symbols.push_back(e.symbol);
  if (c.symbols.empty()) return c;
  // Each file's assertions: "(assert (! BODY :named NAME))".
  for (const std::string& file : axioms.files) {
    const std::string text = read_text_file(file);
    for (size_t at = text.find("(assert"); at != std::string::npos; at = text.find("(assert", at + 1)) {
      const size_t named = text.find(":named", at);
      if (named == std::string::npos) break;
      const std::string body = text.substr(at, named - at);
      const bool about = std::any_of(c.symbols.begin(), c.symbols.end(), [&](const std::string& s) { return mentions(body, s); });
      if (!about) continue;
      size_t b = named + 6;
      while (b < text.size() && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
      size_t e = b;
      while (e < text.size() && text[e] != ')' && !std::isspace(static_cast<unsigned char>(text[e]))) ++e;
      c.axioms.push_back({text.substr(b, e - b), std::filesystem::path(file).filename().string(), false, {}});
    }
  }
  if (check && !c.axioms.empty()) {
    const auto results = check_axioms(axioms, kDefaultAxiomInstances, kAxiomCheckSeed);
    for (OpAxiom& a : c.axioms)
      for (const AxiomCheck& r : results)
        if (r.name == a.name) a.checked = true, a.check = r;
  }
  return c;
}

}  // namespace pcgx::verify
