// The axioms' search path (verifier.h: load_axioms over directories): the
// shipped directory first, then others, a later file standing for an
// earlier one of the same name.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "pcgx/pcg/error.h"
#include "pcgx/verifier/verifier.h"
#include "temp_dir.h"

namespace pcgx::verify {
namespace {

namespace fs = std::filesystem;

bool has(const AxiomSet& s, const std::string& name) { return std::find(s.names.begin(), s.names.end(), name) != s.names.end(); }

TEST(AxiomSearchPath, ALaterDirectoryAddsAndReplacesFilesByName) {
  const fs::path extra = testing::temp_dir("pcgx_axiom_path");
  std::ofstream(extra / "linear.smt2") << "; Linear's axioms taken out\n";
  std::ofstream(extra / "mine.smt2")
      << "(assert (! (forall ((x Tensor) (k Int)) (= (relu (replicate x k)) (replicate (relu x) k))) :named my_relu_replicate))\n";
  const AxiomSet shipped = load_axioms(default_axioms_dir());
  const AxiomSet both = load_axioms(axiom_search_path({extra.string()}));
  EXPECT_TRUE(std::none_of(both.axioms.begin(), both.axioms.end(), [](const AxiomInfo& a) {
    return a.file.ends_with("/axioms/linear.smt2");
  })) << "the shipped linear.smt2 was replaced";
  EXPECT_TRUE(has(both, "my_relu_replicate"));
  const auto mine = std::find_if(both.axioms.begin(), both.axioms.end(), [](const AxiomInfo& a) { return a.name == "my_relu_replicate"; });
  EXPECT_EQ(mine->file, (extra / "mine.smt2").string());
  size_t linear = 0;
  for (const AxiomInfo& a : shipped.axioms) linear += a.file.ends_with("/linear.smt2");
  EXPECT_GT(linear, 0u);
  EXPECT_EQ(both.names.size(), shipped.names.size() - linear + 1);
  EXPECT_EQ(both.dir, default_axioms_dir() + " + " + extra.string());
  // A name used in two files of different names is still refused.
  std::ofstream(extra / "twice.smt2")
      << "(assert (! (forall ((x Tensor) (k Int)) (= (relu (replicate x k)) (replicate (relu x) k))) :named my_relu_replicate))\n";
  try {
    load_axioms(axiom_search_path({extra.string()}));
    ADD_FAILURE() << "a name used twice was accepted";
  } catch (const Error& e) {  // both places named
    const std::string m = e.what();
    EXPECT_NE(m.find("axiom name 'my_relu_replicate' is used twice"), std::string::npos) << m;
    EXPECT_NE(m.find("mine.smt2"), std::string::npos) << m;
    EXPECT_NE(m.find("twice.smt2"), std::string::npos) << m;
  }
  fs::remove_all(extra);
}

TEST(AxiomSearchPath, NamesWhatIsMissing) {
  const fs::path empty = testing::temp_dir("pcgx_axiom_path_empty");
  try {
    load_axioms(std::vector<std::string>{empty.string()});
    ADD_FAILURE() << "no prelude";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((empty / "prelude.smt2").string()), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_axioms(axiom_search_path({(empty / "absent").string()})), Error);
  fs::remove_all(empty);
}

}  // namespace
}  // namespace pcgx::verify
