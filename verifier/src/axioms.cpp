#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/rulesets/sha256.h"
#include "pcgx/verifier/verifier.h"

#ifndef PCGX_AXIOMS_DIR
#define PCGX_AXIOMS_DIR "axioms"
#endif

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

std::string default_axioms_dir() {
  if (const char* env = std::getenv("PCGX_AXIOMS")) return env;
  return PCGX_AXIOMS_DIR;
}

AxiomSet load_axioms(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw Error("--axioms " + dir + ": not a directory");
  const fs::path prelude = fs::path(dir) / "prelude.smt2";
  if (!fs::exists(prelude)) throw FileError(prelude.string(), "", "missing: the axioms need their declarations");
  AxiomSet s;
  s.dir = dir;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".smt2" && e.path().filename() != "prelude.smt2") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  files.insert(files.begin(), prelude.string());
  const std::regex named(R"(:named\s+([A-Za-z0-9_.\-]+))");
  for (const auto& f : files) {
    const std::string text = read_text_file(f);
    s.files.push_back(f);
    s.text += "; " + fs::path(f).filename().string() + "\n" + text + "\n";
    size_t asserts = 0, pos = 0;
    while ((pos = text.find("(assert", pos)) != std::string::npos) ++asserts, ++pos;
    size_t names = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), named); it != std::sregex_iterator(); ++it, ++names)
      s.names.push_back((*it)[1]);
    if (names != asserts)
      throw FileError(f, "", std::to_string(asserts - names) + " assertion(s) without a :named label");
  }
  std::vector<std::string> sorted = s.names;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i] == sorted[i - 1]) throw Error(dir + ": axiom name '" + sorted[i] + "' is used twice");
  s.hash = sha256_hex(s.text);
  return s;
}

}  // namespace pcgx::verify
