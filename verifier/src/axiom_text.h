#pragma once
// SMT-LIB text as pcgx reads it before Z3 does (internal): the top-level
// forms of an axiom file, their identifiers, and a spelling that ignores
// comments and layout, so that an axiom's content can be hashed and its
// operators found without a solver.
#include <string>
#include <vector>

namespace pcgx::verify {

struct TopForm {
  std::string text;   // the form, comments removed, whitespace collapsed
  std::string head;   // "assert", "declare-fun", ...
  std::string name;   // an assert's :named label; a declaration's symbol
  int line = 0;       // where it starts in its file (1-based)
};

// Throws pcgx::FileError(file, "line N", ...) on unbalanced parentheses or
// text outside a form.
std::vector<TopForm> top_level_forms(const std::string& text, const std::string& file);
// The identifiers of a form, each once, in order (quoted |names| and
// keywords excluded).
std::vector<std::string> identifiers(const std::string& form);

}  // namespace pcgx::verify
