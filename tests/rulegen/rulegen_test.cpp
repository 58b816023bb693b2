// rulegen: an opset's candidates proved with its own operators' axioms, and
// one operator's parallel forms.
#include "pcgx/rulegen/regenerate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "pcgx/pcg/error.h"

namespace pcgx::rulegen {
namespace {

namespace fs = std::filesystem;

TEST(Rulegen, ASmallOpsetIsProvedWithItsOwnAxioms) {
  RegenerateOptions o;
  o.opset = gen::parse_ops("Relu,Repartition,Combine");
  o.max_ops = 2, o.threads = 1;
  const Regenerated r = regenerate(o, verify::load_axioms(verify::default_axioms_dir()));
  ASSERT_FALSE(r.candidates.rules.empty());
  EXPECT_EQ(r.proved.ruleset.rules.size(), r.candidates.rules.size()) << r.proved.unproved;
  EXPECT_LT(r.axioms, verify::load_axioms(verify::default_axioms_dir()).names.size());  // its operators' only
  for (const auto& [name, digest] : r.proved.ruleset.axiom_digests)
    EXPECT_TRUE(name.find("relu") != std::string::npos || name.find("repartition") != std::string::npos ||
                name.find("combine") != std::string::npos)
        << name;
}

TEST(Rulegen, ParallelFormsOfOneOperator) {
  const verify::AxiomSet all = verify::load_axioms(verify::default_axioms_dir());
  const ParallelForms silu = prove_parallel_forms("Silu", all, 1);
  EXPECT_TRUE(silu.not_generated.empty()) << silu.not_generated;
  EXPECT_GT(silu.candidates, 0u);
  EXPECT_EQ(silu.proved, silu.candidates) << silu.unproved;
  const ParallelForms pool = prove_parallel_forms("Pool2D", all, 1);
  EXPECT_NE(pool.not_generated.find("kernel_h"), std::string::npos) << pool.not_generated;
  EXPECT_EQ(pool.candidates, 0u);
}

// Without Silu's axioms its parallel forms are not proved, and the count says so.
TEST(Rulegen, MissingAxiomsLeaveParallelFormsUnproved) {
  const fs::path dir = fs::temp_directory_path() / ("pcgx_rulegen_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(verify::default_axioms_dir()))
    if (f.path().filename() != "silu.smt2") fs::copy_file(f.path(), dir / f.path().filename());
  const ParallelForms silu = prove_parallel_forms("Silu", verify::load_axioms(dir.string()), 1);
  EXPECT_GT(silu.candidates, 0u);
  EXPECT_LT(silu.proved, silu.candidates);
  EXPECT_FALSE(silu.unproved.empty());
  fs::remove_all(dir);
}

// A wrong axiom open to the opset's proofs stops everything before generation.
TEST(Rulegen, AWrongAxiomRefusesToProve) {
  const fs::path dir = fs::temp_directory_path() / ("pcgx_rulegen_wrong_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(verify::default_axioms_dir())) fs::copy_file(f.path(), dir / f.path().filename());
  std::ofstream(dir / "activations.smt2", std::ios::app)
      << "\n(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (relu (repartition x d k)) (repartition x d k))) :named relu_wrong))\n";
  RegenerateOptions o;
  o.opset = gen::parse_ops("Relu,Repartition,Combine");
  o.max_ops = 2, o.threads = 1;
  try {
    regenerate(o, verify::load_axioms(dir.string()));
    ADD_FAILURE() << "a wrong axiom was used";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu_wrong"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pcgx::rulegen
