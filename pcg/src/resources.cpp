// Where the shipped files are (resources.h).
#include "pcgx/pcg/resources.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/plugin.h"

#ifndef PCGX_SOURCE_TREE
#define PCGX_SOURCE_TREE "."
#endif

namespace pcgx {
namespace fs = std::filesystem;
namespace {

// $PCGX_SHARE_DIR; else <prefix>/share/pcgx when the executable runs from
// <prefix>/bin (or any directory one level below the prefix) and it holds
// the axioms; else the source tree the build was configured from.
const std::string& root() {
  static const std::string r = [] {
    if (const char* d = std::getenv("PCGX_SHARE_DIR"); d && *d) return std::string(d);
    const std::string exe = executable_dir();
    if (!exe.empty()) {
      const fs::path share = fs::path(exe).parent_path() / "share" / "pcgx";
      std::error_code ec;
      if (fs::is_directory(share / "axioms", ec)) return share.string();
    }
    return std::string(PCGX_SOURCE_TREE);
  }();
  return r;
}

}  // namespace

bool installed() { return root() != PCGX_SOURCE_TREE; }

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string shipped_dir(Shipped what) {
  switch (what) {
    case Shipped::kAxioms:
      if (const char* d = std::getenv("PCGX_AXIOMS"); d && *d) return d;
      return root() + "/axioms";
    case Shipped::kRulesets: return root() + "/rulesets";
    case Shipped::kOpsets: return root() + "/rulesets/opsets";
    case Shipped::kData:
      if (const char* d = std::getenv("PCGX_DATA_DIR"); d && *d) return d;
      return root() + "/data";
  }
  return root();
}

std::vector<std::string> search_path(Shipped what) {
  std::vector<std::string> out{shipped_dir(what)};
  const char* sub = what == Shipped::kAxioms ? "axioms" : what == Shipped::kOpsets ? "opsets" : nullptr;
  if (!sub) return out;
  for (const Plugin& p : loaded_plugins()) {
    std::error_code ec;
    if (!p.data_dir.empty() && fs::is_directory(fs::path(p.data_dir) / sub, ec)) out.push_back((fs::path(p.data_dir) / sub).string());
  }
  // A plugin's files add to pcgx's and to earlier plugins', never replace
  // them (a file of the same name would, silently, for the axioms).
  std::map<std::string, fs::path> seen;  // file name -> where first
  for (const std::string& dir : out) {
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir, ec)) {
      const std::string name = f.path().filename().string();
      const auto [it, fresh] = seen.emplace(name, f.path());
      if (!fresh)
        throw FileError(f.path().string(), "", "has the name of " + it->second.string() + ": a plugin's " + sub +
                                                   " files add to pcgx's, never replace them (rename it)");
    }
  }
  return out;
}

}  // namespace pcgx
