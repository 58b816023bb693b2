#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>

#include <z3++.h>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/resources.h"
#include "pcgx/rulesets/sha256.h"
#include "pcgx/verifier/verifier.h"
#include "axiom_text.h"
#include "encoding.h"

namespace pcgx::verify {

std::string_view to_string(Result r) {
  switch (r) {
    case Result::kUnsat: return "proved";
    case Result::kSat: return "not proved";
    case Result::kTimeout: return "timeout";
    case Result::kError: return "error";
  }
  return "?";
}

std::string default_axioms_dir() { return shipped_dir(Shipped::kAxioms); }

std::vector<std::string> axiom_search_path(const std::vector<std::string>& extra) {
  std::vector<std::string> dirs = search_path(Shipped::kAxioms);
  dirs.insert(dirs.end(), extra.begin(), extra.end());
  return dirs;
}

namespace {

// Z3 parses `decls` followed by `text`; an error names `file` and the line
// in it.
void parse_check(const std::string& decls, const std::string& text, const std::string& file) {
  z3::context ctx;
  try {
    ctx.parse_string((decls + "\n" + text).c_str());
  } catch (const z3::exception& e) {
    std::string msg = e.msg();
    const int offset = static_cast<int>(std::count(decls.begin(), decls.end(), '\n')) + 1;
    static const std::regex at(R"(line (\d+) column (\d+): )");
    std::smatch m;
    std::string where;
    if (std::regex_search(msg, m, at) && std::stoi(m[1]) > offset) {
      where = "line " + std::to_string(std::stoi(m[1]) - offset);
      msg = msg.substr(static_cast<size_t>(m.position(0) + m.length(0)));
    }
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == '"' || msg.back() == ')' || msg.back() == ' ')) msg.pop_back();
    if (msg.find("unknown constant") != std::string::npos)
      msg += " (an operator's symbol is declared by its registry entry, OpDef::smt in pcg/src/ops/; `pcgx ops check NAME` prints it)";
    throw FileError(file, where, "Z3 cannot parse it: " + msg);
  }
}

}  // namespace

AxiomSet load_axioms(const std::string& dir) { return load_axioms(std::vector<std::string>{dir}); }

AxiomSet load_axioms(const std::vector<std::string>& dirs) {
  namespace fs = std::filesystem;
  if (dirs.empty()) throw Error("no axiom directory");
  // By file name: a later directory's file stands for an earlier one's.
  std::map<std::string, std::string> by_name;
  std::string described;
  for (const std::string& dir : dirs) {
    if (!fs::is_directory(dir)) throw FileError(dir, "", "not a directory (the axioms are a directory of .smt2 files)");
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".smt2") by_name[e.path().filename().string()] = e.path().string();
    described += (described.empty() ? "" : " + ") + dir;
  }
  const auto prelude_it = by_name.find("prelude.smt2");
  if (prelude_it == by_name.end()) throw FileError((fs::path(dirs.front()) / "prelude.smt2").string(), "", "missing: the axioms need their declarations");
  const fs::path prelude = prelude_it->second;
  AxiomSet s;
  s.dir = described;
  std::vector<std::string> files{prelude.string()};
  for (const auto& [name, path] : by_name)
    if (name != "prelude.smt2") files.push_back(path);
  // Declarations by symbol, as the digests spell them.
  std::map<std::string, std::string> declared;
  for (const Encoding& e : encodings()) declared[e.symbol] = declaration(e);
  std::vector<std::pair<TopForm, std::string>> asserts;  // with their file
  std::string prelude_decls, extra_decls;
  for (const auto& f : files) {
    const std::string text = read_text_file(f);
    s.files.push_back(f);
    for (TopForm& form : top_level_forms(text, f)) {
      if (form.head == "assert") {
        if (form.name.empty()) throw FileError(f, "line " + std::to_string(form.line), "an assertion without a :named label");
        asserts.emplace_back(std::move(form), f);
        continue;
      }
      if (form.head == "declare-fun" || form.head == "define-fun" || form.head == "declare-const") {
        if (const Encoding* e = encoding_by_symbol(form.name))
          throw FileError(f, "line " + std::to_string(form.line),
                          "declares '" + form.name + "', which " + e->op + "'s registry entry declares (OpDef::smt): remove it");
        declared[form.name] = form.text;
      }
      (f == prelude.string() ? prelude_decls : extra_decls) += form.text + "\n";
    }
  }
  s.declarations = "; prelude.smt2\n" + prelude_decls + operator_declarations() + extra_decls;
  parse_check(s.declarations, "", prelude.string());
  for (size_t i = 1; i < files.size(); ++i) parse_check(s.declarations, read_text_file(files[i]), files[i]);
  s.text = s.declarations;
  for (auto& [form, file] : asserts) {
    AxiomInfo a{form.name, file, form.line, {}, "", form.text, false};
    std::string digest_text = form.text + "\n";
    std::vector<std::string> used;
    for (const std::string& id : identifiers(form.text)) {
      const Encoding* e = encoding_by_symbol(id);
      if (e && std::find(a.operators.begin(), a.operators.end(), e->op) == a.operators.end()) a.operators.push_back(e->op);
      const auto d = declared.find(id);
      if (d == declared.end()) continue;
      used.push_back(d->second);
      const std::string& decl = d->second;
      if (!e && decl.rfind("(declare-fun ", 0) == 0 && decl.size() >= 7 && decl.compare(decl.size() - 7, 7, "Tensor)") == 0)
        a.foreign = true;  // a tensor function no registry operator has
    }
    std::sort(a.operators.begin(), a.operators.end());
    std::sort(used.begin(), used.end());
    for (const std::string& d : used) digest_text += d + "\n";
    a.digest = sha256_hex(digest_text);
    s.text += form.text + "\n";
    s.names.push_back(a.name);
    s.axioms.push_back(std::move(a));
  }
  std::map<std::string, const AxiomInfo*> first_of;  // a name used twice: both places named
  for (const AxiomInfo& a : s.axioms)
    if (const auto [it, fresh] = first_of.emplace(a.name, &a); !fresh)
      throw FileError(a.file, "line " + std::to_string(a.line),
                      "axiom name '" + a.name + "' is used twice (first in " + it->second->file + ", line " + std::to_string(it->second->line) + ")");
  s.hash = sha256_hex(s.text);
  return s;
}

AxiomSet restrict_to(const AxiomSet& set, const std::vector<std::string>& operators) {
  if (operators.empty() || set.axioms.size() != set.names.size()) return set;
  AxiomSet out;
  out.dir = set.dir;
  out.declarations = set.declarations;
  out.text = set.declarations;
  out.files = set.files;
  for (const AxiomInfo& a : set.axioms) {
    const bool inside = !a.foreign && std::all_of(a.operators.begin(), a.operators.end(), [&](const std::string& op) {
      return std::find(operators.begin(), operators.end(), op) != operators.end();
    });
    if (!inside) continue;
    out.text += a.text + "\n";
    out.names.push_back(a.name);
    out.axioms.push_back(a);
  }
  out.hash = sha256_hex(out.text);
  return out;
}

AxiomSet axioms_for(const AxiomSet& set, const Ruleset& r) { return restrict_to(set, r.operators); }

std::vector<std::pair<std::string, std::string>> axiom_digests(const AxiomSet& set, const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, std::string>> out;
  if (set.axioms.size() != set.names.size()) return out;  // rules as axioms: no files to digest
  for (const std::string& n : names) {
    const auto it = std::find_if(set.axioms.begin(), set.axioms.end(), [&](const AxiomInfo& a) { return a.name == n; });
    if (it == set.axioms.end()) throw Error("axiom '" + n + "' is not in " + set.dir);
    out.emplace_back(n, it->digest);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace pcgx::verify
