// What a ruleset's hash promises (rulesets/ruleset.h): adding another
// operator's axioms changes nothing a ruleset records. The registry cannot
// take an operator at run time, so the unrelated addition here is what an
// axiom author writes for one: a tensor function declared in the prelude, an
// axiom file over it, and another axiom of an operator outside unity.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "pcgx/verifier/batch.h"
#include "pcgx/verifier/verifier.h"

#ifndef PCGX_SOURCE_DIR
#define PCGX_SOURCE_DIR "."
#endif

namespace pcgx::verify {
namespace {

namespace fs = std::filesystem;

TEST(HonestHashes, AnUnrelatedOperatorsAxiomsLeaveTheShippedRulesetAlone) {
  const Ruleset shipped = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  ASSERT_FALSE(shipped.axiom_digests.empty());
  const fs::path dir = fs::temp_directory_path() / ("pcgx_axioms_more_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(default_axioms_dir())) fs::copy_file(f.path(), dir / f.path().filename());
  std::ofstream(dir / "prelude.smt2", std::ios::app) << "\n(declare-fun square (Tensor) Tensor)\n";
  std::ofstream(dir / "square.smt2")
      << "(assert (! (forall ((x Tensor) (k Int)) (= (square (replicate x k)) (replicate (square x) k))) :named square_replicate))\n"
      << "(assert (! (forall ((x Tensor)) (= (relu (square x)) (square x))) :named relu_square))\n";
  std::ofstream(dir / "activations.smt2", std::ios::app)
      << "\n(assert (! (forall ((x Tensor) (y Tensor)) (= (gelu (ew_add x y)) (gelu (ew_add y x)))) :named gelu_add_commutes))\n";

  const AxiomSet before = axioms_for(load_axioms(default_axioms_dir()), shipped);
  const AxiomSet after = axioms_for(load_axioms(dir.string()), shipped);
  EXPECT_GT(load_axioms(dir.string()).names.size(), load_axioms(default_axioms_dir()).names.size() + 2);
  // The same axioms are open to unity's proofs, digest for digest...
  ASSERT_EQ(before.names, after.names);
  for (size_t i = 0; i < before.axioms.size(); ++i) EXPECT_EQ(before.axioms[i].digest, after.axioms[i].digest) << before.names[i];
  // ...the ones the shipped file records are those of the axioms as they are...
  std::vector<std::string> used;
  for (const auto& [name, digest] : shipped.axiom_digests) used.push_back(name);
  EXPECT_EQ(axiom_digests(after, used), shipped.axiom_digests);
  // ...and proving its rules again records nothing else.
  Ruleset some = shipped;
  some.rules.resize(40);
  for (Rule& r : some.rules) r.proof.reset();
  const auto verdicts = prove_all(some.rules, after, {}, 1);
  const ProvedSet proved = collect_proved(some, verdicts, after);
  EXPECT_EQ(proved.ruleset.rules.size(), some.rules.size());
  for (const auto& d : proved.ruleset.axiom_digests)
    EXPECT_NE(std::find(shipped.axiom_digests.begin(), shipped.axiom_digests.end(), d), shipped.axiom_digests.end()) << d.first;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pcgx::verify
