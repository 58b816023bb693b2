// Value-generic proofs (verifier/src/value_generic.h): a rule whose proof
// passes a value attribute (a dropout's rate and seed, a norm's epsilon)
// through every axiom holds with any value there, and the verifier says so;
// an axiom that fixes the value (dropout at rate 0 is the identity) keeps
// the rule to that value, and a wrong claim is refuted by evaluation.
#include <gtest/gtest.h>

#include "pcgx/pcg/error.h"
#include "pcgx/rulesets/numeric_check.h"
#include "pcgx/verifier/batch.h"
#include "pcgx/verifier/verifier.h"

namespace pcgx::verify {
namespace {

TensorRef op(Graph& g, const std::string& name, Attributes a, std::vector<TensorRef> in) {
  return {g.add(name, std::move(a), std::move(in)), 0};
}

Attributes drop(double rate, int64_t seed) { return {{"rate", rate}, {"seed", seed}}; }
Attributes along(int64_t dim) { return {{"dim", dim}, {"degree", int64_t{2}}}; }

// Dropout(Combine_1(x)) = Combine_1(Dropout(x)), x split on dimension 1.
Rule dropout_combine(double rate, int64_t seed) {
  auto side = [&](bool inside) {
    Graph g(inside ? "target" : "source");
    const TensorRef x{g.add("Input", {{"shape", IntList{4, 4, 4}}, {"degrees", IntList{1, 2, 1}}}, {}, "x"), 0};
    g.add_output(inside ? op(g, "Combine", along(1), {op(g, "Dropout", drop(rate, seed), {x})})
                        : op(g, "Dropout", drop(rate, seed), {op(g, "Combine", along(1), {x})}));
    return g;
  };
  return {"dropout-combine", side(false), side(true), {{0, 0}}, std::nullopt};
}

// LayerNorm(Combine_1(x), g, b) = Combine_1(LayerNorm(x, Replicate(g), Replicate(b))):
// Megatron-LM's sequence-parallel norm.
Rule layer_norm_sequence_split(double eps) {
  auto side = [&](bool inside) {
    Graph g(inside ? "target" : "source");
    const TensorRef x{g.add("Input", {{"shape", IntList{4, 4, 4}}, {"degrees", IntList{1, 2, 1}}}, {}, "x"), 0};
    const TensorRef gamma{g.add("Weight", {{"shape", IntList{4}}}, {}, "g"), 0};
    const TensorRef beta{g.add("Weight", {{"shape", IntList{4}}}, {}, "b"), 0};
    const Attributes ln{{"eps", eps}, {"affine", true}};
    const Attributes copies{{"degree", int64_t{2}}};
    g.add_output(inside ? op(g, "Combine", along(1),
                             {op(g, "LayerNorm", ln, {x, op(g, "Replicate", copies, {gamma}), op(g, "Replicate", copies, {beta})})})
                        : op(g, "LayerNorm", ln, {op(g, "Combine", along(1), {x}), gamma, beta}));
    return g;
  };
  return {"layer-norm-sequence", side(false), side(true), {{0, 0}}, std::nullopt};
}

// Dropout at rate 0 is x, whatever its seed.
Rule dropout_rate_zero() {
  Graph s("source"), t("target");
  s.add_output(op(s, "Dropout", drop(0.0, 3), {{s.add("Input", {{"shape", IntList{4, 4}}}, {}, "x"), 0}}));
  t.add_output({t.add("Input", {{"shape", IntList{4, 4}}}, {}, "x"), 0});
  return {"dropout-rate-zero", s, t, {{0, 0}}, std::nullopt};
}

std::vector<std::string> generic_of(const Rule& r) {
  const std::vector<Verdict> v = prove_all({r}, load_axioms(default_axioms_dir()), ProverOptions{}, 1);
  EXPECT_EQ(v[0].proof.result, Result::kUnsat) << r.id << ": " << v[0].proof.reason;
  EXPECT_TRUE(v[0].check.holds) << v[0].check.counterexample;
  return v[0].proof.value_generic;
}

TEST(ValueGeneric, ADropoutSplitHoldsAtEveryRateAndSeed) {
  EXPECT_EQ(generic_of(dropout_combine(0.1, 0)), (std::vector<std::string>{"Dropout.rate", "Dropout.seed"}));
}

TEST(ValueGeneric, TheSequenceSplitOfALayerNormHoldsAtEveryEpsilon) {
  EXPECT_EQ(generic_of(layer_norm_sequence_split(1e-5)), (std::vector<std::string>{"LayerNorm.eps"}));
}

// dropout_rate_zero states rate 0 and any seed: the rule keeps its rate.
TEST(ValueGeneric, AnAxiomThatFixesTheValueKeepsIt) {
  const Rule r = dropout_rate_zero();
  EXPECT_EQ(generic_of(r), (std::vector<std::string>{"Dropout.seed"}));
  // Claiming the rate too would be wrong, and evaluation says so.
  EXPECT_FALSE(check_numerically(with_other_values(r, {"Dropout.rate"})).holds);
  EXPECT_TRUE(check_numerically(with_other_values(r, {"Dropout.seed"})).holds);
}

// The verdict is the axioms': stated with only the axioms of a proof, and
// with one that does not pass the value through, the answer follows them.
TEST(ValueGeneric, FollowsTheAxiomsNamed) {
  const Prover p(load_axioms(default_axioms_dir()));
  const Rule r = dropout_combine(0.1, 0);
  EXPECT_EQ(p.value_generic(r, {"dropout_combine"}), (std::vector<std::string>{"Dropout.rate", "Dropout.seed"}));
  EXPECT_EQ(p.value_generic(r, {"dropout_combine", "dropout_rate_zero"}), (std::vector<std::string>{"Dropout.seed"}));
  EXPECT_TRUE(p.value_generic(r, {}).empty());  // no proof, no claim
}

TEST(ValueGeneric, OtherValuesAreConsistentAndStayLegal) {
  const Rule r = with_other_values(dropout_combine(0.1, 0), {"Dropout.rate", "Dropout.seed"});
  for (const Graph* g : {&r.source, &r.target})
    for (const Node& n : g->nodes())
      if (n.op->name == "Dropout") {
        EXPECT_DOUBLE_EQ(n.attrs.get_float("rate"), 0.3);
        EXPECT_EQ(n.attrs.get_int("seed"), 7);
      }
  EXPECT_TRUE(check_numerically(r).holds);
}

}  // namespace
}  // namespace pcgx::verify
