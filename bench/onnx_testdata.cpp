// How much of ONNX's own test data pcgx takes (Debian's libonnx-testdata):
// per folder, the cases, how many import, and of those how many reproduce
// the reference output through pcgx's interpreter. docs/results.md's table.
//
// Usage: bench_onnx_testdata [DIR] [--why]   (DIR default: Debian's)
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "pcgx/importer/onnx_import.h"
#include "pcgx/importer/onnx_testdata.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::string root = "/usr/share/libonnx-testdata/data";
  bool why = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--why") why = true;
    else if (a == "--help" || a == "-h") return std::printf("usage: bench_onnx_testdata [DIR] [--why]\n"), 0;
    else root = a;
  }
  std::string reason;
  if (!pcgx::importer::onnx_available(&reason)) return std::printf("bench_onnx_testdata: not run: %s\n", reason.c_str()), 0;
  if (!fs::is_directory(root)) return std::printf("bench_onnx_testdata: not run: %s is absent (apt-get install libonnx-testdata)\n", root.c_str()), 0;
  std::printf("%-20s %6s %9s %11s\n", "folder", "cases", "imported", "reproduced");
  int all = 0, all_imported = 0, all_reproduced = 0;
  std::vector<fs::path> folders;
  for (const auto& f : fs::directory_iterator(root))
    if (f.is_directory()) folders.push_back(f.path());
  std::sort(folders.begin(), folders.end());
  for (const fs::path& folder : folders) {
    std::vector<fs::path> cases;
    for (const auto& c : fs::directory_iterator(folder))
      if (fs::exists(c.path() / "model.onnx")) cases.push_back(c.path());
    std::sort(cases.begin(), cases.end());
    int imported = 0, reproduced = 0;
    for (const fs::path& c : cases) {
      const auto r = pcgx::importer::run_onnx_test_case(c.string());
      imported += r.imported, reproduced += r.reproduced;
      if (why && r.imported && !r.reproduced) std::printf("  %s: %s\n", c.filename().c_str(), r.why.c_str());
    }
    std::printf("%-20s %6zu %9d %11d\n", folder.filename().c_str(), cases.size(), imported, reproduced);
    all += static_cast<int>(cases.size()), all_imported += imported, all_reproduced += reproduced;
  }
  std::printf("%-20s %6d %9d %11d\n", "all", all, all_imported, all_reproduced);
  return 0;
}
