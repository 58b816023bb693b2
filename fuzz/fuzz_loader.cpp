// One libFuzzer target per loader: this file is compiled once per loader
// with PCGX_FUZZ_LOADER set to its index in loaders() (fuzz/CMakeLists.txt).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "loaders.h"
#include "pcgx/pcg/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto which = pcgx::fuzz::loaders().at(PCGX_FUZZ_LOADER).first;
  try {
    pcgx::fuzz::load_untrusted(which, std::string(reinterpret_cast<const char*>(data), size));
  } catch (const pcgx::Error&) {
    // Bad input, reported as the contract says.
  } catch (const std::logic_error& e) {
    std::fprintf(stderr, "finding: %s\n", e.what());
    std::abort();
  }
  return 0;
}
