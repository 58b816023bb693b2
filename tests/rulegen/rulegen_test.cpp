// rulegen: an opset's candidates proved with its own operators' axioms, and
// one operator's parallel forms.
#include "pcgx/rulegen/regenerate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "pcgx/pcg/error.h"
#include "pcgx/rulesets/rule_form.h"

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

// Relu with Repartition and Combine, two operators, one thread.
RegenerateOptions small_opset() {
  RegenerateOptions o;
  o.opset = gen::parse_ops("Relu,Repartition,Combine");
  o.max_ops = 2, o.threads = 1;
  return o;
}

// The ruleset as a file holds it: proofs reused from its JSON.
Ruleset as_loaded(const Ruleset& r) { return ruleset_from_json(ruleset_to_json(r), "previous.json"); }

TEST(Rulegen, ReusedProofsGiveTheSameRuleset) {
  const verify::AxiomSet all = verify::load_axioms(verify::default_axioms_dir());
  RegenerateOptions o = small_opset();
  const Regenerated first = regenerate(o, all);
  const Ruleset previous = as_loaded(first.proved.ruleset);
  o.previous = &previous;
  const Regenerated again = regenerate(o, all);
  ASSERT_GT(first.proved.ruleset.rules.size(), 0u);
  EXPECT_EQ(again.offered, first.proved.ruleset.rules.size());
  EXPECT_EQ(again.reused, again.offered);
  EXPECT_EQ(as_loaded(again.proved.ruleset).computed_hash, previous.computed_hash);
}

// Adding an operator re-proves only the candidates it is in: the others
// take their proofs from the ruleset before it, and the result is what
// proving everything gives.
TEST(Rulegen, AddingAnOperatorReprovesOnlyWhatItTouches) {
  const verify::AxiomSet all = verify::load_axioms(verify::default_axioms_dir());
  RegenerateOptions o = small_opset();
  const Ruleset before = as_loaded(regenerate(o, all).proved.ruleset);
  o.opset = gen::parse_ops("Relu,Sigmoid,Repartition,Combine");
  const Regenerated fresh = regenerate(o, all);
  o.previous = &before;
  const Regenerated grown = regenerate(o, all);
  EXPECT_EQ(grown.reused, before.rules.size());
  // What was proved anew is exactly the proved rules with the new operator.
  const auto with_sigmoid = std::count_if(fresh.proved.ruleset.rules.begin(), fresh.proved.ruleset.rules.end(),
                                          [](const Rule& r) { return rule_text(r).find("Sigmoid") != std::string::npos; });
  EXPECT_GT(with_sigmoid, 0);
  EXPECT_EQ(grown.proved.ruleset.rules.size() - grown.reused, static_cast<size_t>(with_sigmoid));
  EXPECT_EQ(as_loaded(grown.proved.ruleset).computed_hash, as_loaded(fresh.proved.ruleset).computed_hash);
}

// A stored core is proved again, never trusted: one that does not prove
// its rule, or names an axiom whose content changed, gives no proof of its
// own, and the rule is proved from every axiom as before.
TEST(Rulegen, AStoredCoreIsCheckedNotTrusted) {
  const verify::AxiomSet all = verify::load_axioms(verify::default_axioms_dir());
  RegenerateOptions o = small_opset();
  const Regenerated first = regenerate(o, all);
  Ruleset forged = as_loaded(first.proved.ruleset);
  ASSERT_GE(forged.rules.size(), 2u);
  // Rule 1's core names an axiom recorded with another digest.
  const std::string changed = forged.rules[1].proof->axioms.front();
  // Rule 0's core swapped for one axiom outside it that proves nothing about it alone.
  const auto& core0 = forged.rules[0].proof->axioms;
  std::string unrelated;
  for (const auto& [name, digest] : forged.axiom_digests)
    if (name != changed && std::find(core0.begin(), core0.end(), name) == core0.end()) unrelated = name;
  ASSERT_FALSE(unrelated.empty());
  forged.rules[0].proof->axioms = {unrelated};
  for (auto& [name, digest] : forged.axiom_digests)
    if (name == changed) digest = std::string(64, '0');
  o.previous = &forged;
  const Regenerated again = regenerate(o, all);
  EXPECT_LT(again.offered, first.proved.ruleset.rules.size());  // the changed digest's rules are not offered
  EXPECT_LT(again.reused, again.offered);                          // rule 0's core did not prove it
  EXPECT_EQ(again.proved.ruleset.rules.size(), first.proved.ruleset.rules.size());
  EXPECT_EQ(as_loaded(again.proved.ruleset).computed_hash, as_loaded(first.proved.ruleset).computed_hash);
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
