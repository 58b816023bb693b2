// The fuzzers' corpus (fuzz/corpus/LOADER/: seeds from the repository's own
// files and every input a fuzzer ever found a problem with) through the
// loaders: each loads or raises pcgx::Error, nothing else. Under
// scripts/test.sh --sanitize the same inputs also run under ASan + UBSan.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include "loaders.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"

namespace pcgx::fuzz {
namespace {

namespace fs = std::filesystem;

TEST(FuzzCorpus, EveryInputLoadsOrIsAnError) {
  size_t inputs = 0;
  for (const auto& [which, name] : loaders()) {
    const fs::path dir = fs::path(PCGX_SOURCE_DIR) / "fuzz" / "corpus" / name;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    size_t here = 0;
    for (const auto& f : fs::directory_iterator(dir)) {
      ++inputs, ++here;
      try {
        load_untrusted(which, read_text_file(f.path().string()));
      } catch (const Error&) {
      } catch (const std::logic_error& e) {
        ADD_FAILURE() << f.path() << ": " << e.what();
      }
    }
    EXPECT_GT(here, 0u) << dir << " is empty";
  }
  EXPECT_GT(inputs, 0u);
}

}  // namespace
}  // namespace pcgx::fuzz
