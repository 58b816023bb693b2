#pragma once
// Every loader of a file a user hands pcgx, behind one entry point, for the
// fuzz targets (fuzz_*.cpp) and the regression corpus the test suite runs
// (tests/fuzz). The contract under test: any bytes either load or raise
// pcgx::Error (exit 2, one line naming the file); any other exception, a
// crash or a sanitizer report is a finding.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pcgx::fuzz {

enum class Loader { kGraph, kMachine, kStrategy, kRuleset, kProfile, kEfficiency, kNpy };

// The loaders by the name of their corpus folder (fuzz/corpus/NAME).
const std::vector<std::pair<Loader, std::string>>& loaders();

// Loads `bytes` as a file of that kind. Throws pcgx::Error for bad input
// and std::logic_error for any other exception the loader let out.
void load_untrusted(Loader which, const std::string& bytes);

}  // namespace pcgx::fuzz
