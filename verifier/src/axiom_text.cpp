#include "axiom_text.h"

#include <algorithm>
#include <cctype>

#include "pcgx/pcg/error.h"

namespace pcgx::verify {
namespace {

bool atom_char(char c) { return !std::isspace(static_cast<unsigned char>(c)) && c != '(' && c != ')' && c != ';' && c != '|' && c != '"'; }

}  // namespace

std::vector<TopForm> top_level_forms(const std::string& text, const std::string& file) {
  std::vector<TopForm> out;
  int line = 1, depth = 0;
  TopForm cur;
  bool space = false;  // a separator is pending inside the current form
  auto emit = [&](char c) {
    if (space && !cur.text.empty() && cur.text.back() != '(' && c != ')') cur.text += ' ';
    space = false;
    cur.text += c;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (c == ';') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      space = true;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (depth == 0 && c != '(')
      throw FileError(file, "line " + std::to_string(line), std::string("unexpected '") + c + "' outside a form");
    if (c == '|' || c == '"') {  // quoted symbol or string: copied whole
      const size_t end = text.find(c, i + 1);
      if (end == std::string::npos) throw FileError(file, "line " + std::to_string(line), std::string("unterminated ") + c);
      emit(c);
      for (size_t j = i + 1; j <= end; ++j) {
        cur.text += text[j];
        if (text[j] == '\n') ++line;
      }
      i = end;
      continue;
    }
    if (c == '(') {
      if (depth == 0) cur = TopForm{"", "", "", line}, space = false;
      ++depth;
    } else if (c == ')') {
      if (depth == 0) throw FileError(file, "line " + std::to_string(line), "unbalanced ')'");
      --depth;
    }
    emit(c);
    if (c == ')' && depth == 0) {
      const auto ids = identifiers(cur.text);
      cur.head = ids.empty() ? "" : ids[0];
      if (cur.head == "assert") {
        const size_t at = cur.text.find(":named ");
        if (at != std::string::npos) {
          size_t b = at + 7, e = b;
          while (e < cur.text.size() && (atom_char(cur.text[e]) || cur.text[e] == '|')) ++e;
          cur.name = cur.text.substr(b, e - b);
          if (cur.name.size() > 1 && cur.name.front() == '|') cur.name = cur.name.substr(1, cur.name.size() - 2);
        }
      } else if (ids.size() > 1) {
        cur.name = ids[1];
      }
      out.push_back(std::move(cur));
      cur = TopForm{};
    }
  }
  if (depth != 0) throw FileError(file, "line " + std::to_string(cur.line), "form not closed at the end of the file");
  return out;
}

std::vector<std::string> identifiers(const std::string& form) {
  std::vector<std::string> out;
  for (size_t i = 0; i < form.size();) {
    const char c = form[i];
    if (c == '|' || c == '"') {
      const size_t end = form.find(c, i + 1);
      i = end == std::string::npos ? form.size() : end + 1;
      continue;
    }
    if (!atom_char(c)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < form.size() && atom_char(form[j])) ++j;
    std::string tok = form.substr(i, j - i);
    i = j;
    const bool number = std::isdigit(static_cast<unsigned char>(tok[0])) || (tok[0] == '-' && tok.size() > 1);
    if (tok[0] == ':' || number) continue;
    if (std::find(out.begin(), out.end(), tok) == out.end()) out.push_back(std::move(tok));
  }
  return out;
}

}  // namespace pcgx::verify
