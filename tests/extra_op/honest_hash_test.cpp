// What a ruleset's hash promises (rulesets/ruleset.h), tested with an
// operator added as a user's library adds one: a registration of its own
// (pcg/registry.h, OpRegistration), an axiom file of its own, no other file
// touched. Its rules are generated and proved, while the shipped unity-v1
// ruleset is left alone: the axioms open to its proofs and their digests do
// not change, and proving its rules again records nothing else. The extra
// operator is in this process's registry, so the suite has an executable of
// its own (the registry-coverage test would rightly refuse it).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "pcgx/generator/generate.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/verifier/batch.h"
#include "pcgx/verifier/verifier.h"

#ifndef PCGX_SOURCE_DIR
#define PCGX_SOURCE_DIR "."
#endif

namespace pcgx::verify {
namespace {

namespace fs = std::filesystem;

template <class T>
void square_k(const KernelArgs<T>& a) {
  const std::vector<T>& x = a.in[0]->data;
  std::vector<T>& y = a.out[0].data;
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * x[i];
}

// x * x, elementwise: split along any dimension, copied slot by slot.
void add_square(OpRegistry& r) {
  OpDef d;
  d.name = "TestSquare";
  d.summary = "x * x (a test's operator)";
  d.input_names = {"x"};
  d.min_inputs = d.max_inputs = 1;
  d.infer_types = [](const Attributes&, std::span<const TensorType> in) { return std::vector<TensorType>{in[0]}; };
  d.kinds = [](const Attributes&, std::span<const TensorType> in) {
    std::vector<ParallelKind> kinds;
    for (size_t i = 0; i < in[0].shape.size(); ++i)
      kinds.push_back({"dim" + std::to_string(i), {static_cast<int>(i)}, {static_cast<int>(i)}, 0});
    return kinds;
  };
  d.kernel_f32 = &square_k<float>;
  d.kernel_mod = &square_k<ModP>;
  d.smt = {{"test_square", 1}};
  d.elementwise = d.any_rank = true;
  r.add(std::move(d));
}
const OpRegistration registration(&add_square);

TEST(HonestHashes, ATemporaryOperatorLeavesTheShippedRulesetAlone) {
  const Ruleset shipped = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  ASSERT_FALSE(shipped.axiom_digests.empty());
  ASSERT_NE(OpRegistry::global().find("TestSquare"), nullptr);
  const fs::path dir = fs::temp_directory_path() / ("pcgx_axioms_more_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(default_axioms_dir())) fs::copy_file(f.path(), dir / f.path().filename());
  // The operator's axiom file: its symbol comes from its registry entry.
  std::ofstream(dir / "test_square.smt2")
      << "(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (test_square (repartition x d k)) (repartition (test_square x) d k))) "
         ":named test_square_repartition))\n"
      << "(assert (! (forall ((x Tensor) (d Int) (k Int)) (= (test_square (combine x d k)) (combine (test_square x) d k))) "
         ":named test_square_combine))\n"
      << "(assert (! (forall ((x Tensor) (k Int)) (= (test_square (replicate x k)) (replicate (test_square x) k))) :named test_square_replicate))\n";
  // And another axiom of an operator outside unity.
  std::ofstream(dir / "activations.smt2", std::ios::app)
      << "\n(assert (! (forall ((x Tensor) (y Tensor)) (= (gelu (ew_add x y)) (gelu (ew_add y x)))) :named gelu_add_commutes))\n";
  const AxiomSet all = load_axioms(dir.string());
  EXPECT_EQ(all.names.size(), load_axioms(default_axioms_dir()).names.size() + 4);

  // The new operator's rules: generated and every one proved.
  gen::GeneratorConfig c;
  c.opset = gen::parse_ops("TestSquare,Repartition,Combine,Replicate");
  c.max_ops = 2;
  c.threads = 1;
  gen::GenerateReport report;
  const Ruleset candidates = gen::generate(c, report);
  ASSERT_FALSE(candidates.rules.empty());
  const AxiomSet mine = axioms_for(all, candidates);
  const std::vector<Verdict> verdicts = prove_all(candidates.rules, mine, {}, 1);
  const ProvedSet proved_new = collect_proved(candidates, verdicts, mine);
  EXPECT_EQ(proved_new.ruleset.rules.size(), candidates.rules.size());

  const AxiomSet before = axioms_for(load_axioms(default_axioms_dir()), shipped);
  const AxiomSet after = axioms_for(all, shipped);
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
  const auto again = prove_all(some.rules, after, {}, 1);
  const ProvedSet proved = collect_proved(some, again, after);
  EXPECT_EQ(proved.ruleset.rules.size(), some.rules.size());
  for (const auto& d : proved.ruleset.axiom_digests)
    EXPECT_NE(std::find(shipped.axiom_digests.begin(), shipped.axiom_digests.end(), d), shipped.axiom_digests.end()) << d.first;
  fs::remove_all(dir);
}

// Registering once the registry is built is refused, not lost.
TEST(HonestHashes, ARegistrationAfterTheRegistryIsBuiltIsAnError) {
  (void)OpRegistry::global();
  auto late = [] { const OpRegistration too_late([](OpRegistry&) {}); };
  EXPECT_THROW(late(), Error);
}

}  // namespace
}  // namespace pcgx::verify
