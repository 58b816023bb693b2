// The verifier: the shipped axioms hold, a wrong axiom is caught, known rules
// are proved, and no corrupted rule is.
#include <gtest/gtest.h>


#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "pcgx/generator/generate.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/rulesets/numeric_check.h"
#include "pcgx/rulesets/rule_form.h"
#include "pcgx/verifier/batch.h"
#include "pcgx/verifier/verifier.h"

namespace pcgx::verify {
namespace {

namespace fs = std::filesystem;

TEST(Axioms, TheShippedAxiomsHoldOnRandomInstances) {
  const AxiomSet set = load_axioms(default_axioms_dir());
  EXPECT_GE(set.names.size(), 90u);
  for (const AxiomCheck& row : check_axioms(set, 60, 3)) {
    EXPECT_EQ(row.mismatches, 0) << row.name << ": " << row.counterexample;
    EXPECT_GT(row.legal, 0) << row.name << " was never instantiated legally";
  }
}

// `pcgx axioms check` of the prelude and one axiom file of `text`.
std::vector<AxiomCheck> check_one_file(const std::string& text, int attempts, uint64_t seed) {
  const fs::path dir = fs::temp_directory_path() / ("pcgx_axioms_one_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fs::path(default_axioms_dir()) / "prelude.smt2", dir / "prelude.smt2", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "one.smt2") << text << "\n";
  auto rows = check_axioms(load_axioms(dir.string()), attempts, seed);
  fs::remove_all(dir);
  return rows;
}

// Each planted axiom is false; the check must find a counterexample.
class PlantedWrongAxiom : public ::testing::TestWithParam<const char*> {};

TEST_P(PlantedWrongAxiom, IsCaught) {
  const auto rows = check_one_file(GetParam(), 30, 5);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0].legal, 0);
  EXPECT_GT(rows[0].mismatches, 0);
  EXPECT_FALSE(rows[0].counterexample.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Axioms, PlantedWrongAxiom,
    ::testing::Values(
        // Relu does not commute with Reduce: relu(a + b) != relu(a) + relu(b).
        "(assert (! (forall ((x Tensor) (k Int)) (= (relu (reduce x k)) (reduce (relu x) k))) :named relu_reduce_wrong))",
        // A table split by rows gives partial sums: without the Reduce it is wrong.
        "(assert (! (forall ((i Tensor) (t Tensor) (k Int)) (=> (and (= (rep i) 1) (= (rep t) 1)) (= (replicate (embedding i t) k) "
        "(embedding (replicate i k) (repartition t 0 k))))) :named embedding_rows_wrong))",
        // Reduce sums consecutive slots: the reduced shares must come from the last split dimension.
        "(assert (! (forall ((x Tensor) (y Tensor) (d Int) (k Int)) (= (mse_loss (combine x d k) (combine y d k)) "
        "(reduce (mse_loss x y) k))) :named mse_any_dimension_wrong))",
        // Dropout's mask follows the element index: Concat moves it.
        "(assert (! (forall ((x Tensor) (y Tensor) (r Int) (s Int)) (=> (distinct r 0) (= (dropout (concat x y 0) r s) "
        "(concat (dropout x r s) (dropout y r s) 0)))) :named dropout_concat_wrong))",
        // LayerNorm normalizes the whole last dimension: halves normalize differently.
        "(assert (! (forall ((x Tensor) (y Tensor) (e Int)) (= (layer_norm (concat x y (- (rank x) 1)) e) "
        "(concat (layer_norm x e) (layer_norm y e) (- (rank x) 1)))) :named layer_norm_concat_last_wrong))"));

// Shipped axioms with one guard removed: the unguarded forms are false on
// instances the guard excludes, which the default check must construct
// (linear_replicate's was caught only at 1,000 instances by independent
// draws).
class MissingGuard : public ::testing::TestWithParam<const char*> {};

TEST_P(MissingGuard, IsCaughtAtTheDefaultSetting) {
  const auto rows = check_one_file(GetParam(), kDefaultAxiomInstances, 7);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0].mismatches, 0) << rows[0].name << ": " << rows[0].legal << " legal instances, none refuting it";
}

INSTANTIATE_TEST_SUITE_P(
    Axioms, MissingGuard,
    ::testing::Values(
        // linear_replicate without (= (rep (linear x w a)) 1): a result of partial sums.
        "(assert (! (forall ((x Tensor) (w Tensor) (a Int) (k Int)) (=> (and (= (rep x) 1) (= (rep w) 1)) "
        "(= (replicate (linear x w a) k) (linear (replicate x k) (replicate w k) a)))) :named linear_replicate_unguarded))",
        // linear_data_parallel without (= (rep w) 1).
        "(assert (! (forall ((x Tensor) (w Tensor) (d Int) (k Int) (a Int)) (=> (< d (- (rank x) 1)) "
        "(= (linear (combine x d k) w a) (combine (linear x (replicate w k) a) d k)))) :named linear_data_parallel_unguarded))",
        // embedding_bag_rows_combine without (= (rep i) 1).
        "(assert (! (forall ((i Tensor) (t Tensor) (k Int)) (= (embedding_bag i (combine t 0 k)) "
        "(reduce (embedding_bag (replicate i k) t) k))) :named embedding_bag_rows_combine_unguarded))"));

TEST(Axioms, LoadingReportsProblems) {
  EXPECT_THROW(load_axioms("/nonexistent/axioms"), Error);
  const fs::path dir = fs::temp_directory_path() / ("pcgx_axioms_bad_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "prelude.smt2") << "(declare-sort Tensor 0)\n(assert true)\n";
  EXPECT_THROW(load_axioms(dir.string()), Error);  // an unnamed assertion
  fs::remove_all(dir);
}

// Operators' symbols come from the registry (OpDef::smt): an axiom file
// uses them undeclared, a symbol no entry declares is reported in the file
// and at the line that uses it, and a prelude declaring an operator's
// symbol itself is refused. Each axiom's digest ignores comments and
// layout, and names the operators it mentions.
TEST(Axioms, SymbolsComeFromTheRegistry) {
  const fs::path dir = fs::temp_directory_path() / ("pcgx_axioms_symbols_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string prelude = read_text_file((fs::path(default_axioms_dir()) / "prelude.smt2").string());
  std::ofstream(dir / "prelude.smt2") << prelude;
  const std::string axiom = "(assert (! (forall ((x Tensor) (k Int)) (= (relu (replicate x k)) (replicate (relu x) k))) :named r))\n";
  std::ofstream(dir / "a.smt2") << axiom;
  const AxiomSet ok = load_axioms(dir.string());
  ASSERT_EQ(ok.axioms.size(), 1u);
  EXPECT_EQ(ok.axioms[0].operators, (std::vector<std::string>{"Relu", "Replicate"}));
  EXPECT_EQ(ok.axioms[0].line, 1);
  // The same axiom spread over lines with comments: the same digest.
  std::ofstream(dir / "a.smt2") << "; a comment\n(assert (! (forall ((x Tensor) (k Int))\n   (= (relu (replicate x k)) ; why\n"
                                   "      (replicate (relu x) k))) :named r))\n";
  const AxiomSet spaced = load_axioms(dir.string());
  EXPECT_EQ(spaced.axioms[0].digest, ok.axioms[0].digest);
  EXPECT_EQ(spaced.axioms[0].line, 2);
  // An undeclared symbol: the file and line that use it.
  std::ofstream(dir / "a.smt2") << "\n\n(assert (! (forall ((x Tensor)) (= (square x) (relu x))) :named s))\n";
  try {
    load_axioms(dir.string());
    ADD_FAILURE() << "an undeclared symbol was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("a.smt2: line 3"), std::string::npos) << what;
    EXPECT_NE(what.find("square"), std::string::npos) << what;
    EXPECT_NE(what.find("OpDef::smt"), std::string::npos) << what;
  }
  // A prelude declaring an operator's symbol.
  std::ofstream(dir / "a.smt2") << axiom;
  std::ofstream(dir / "prelude.smt2") << prelude << "(declare-fun relu (Tensor) Tensor)\n";
  try {
    load_axioms(dir.string());
    ADD_FAILURE() << "a redeclared operator symbol was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("declares 'relu', which Relu's registry entry declares"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// `pcgx ops check` checks one operator's axioms alone: each row is the one
// the whole check gives it. Compared on axioms whose preconditions refuse
// some draws, so that the number of draws depends on the random stream.
TEST(Axioms, ASubsetIsCheckedAsInTheWholeCheck) {
  const AxiomSet set = load_axioms(default_axioms_dir());
  const std::vector<AxiomCheck> all = check_axioms(set, 3, kAxiomCheckSeed);
  std::vector<size_t> picked;  // two, not the set's first (its place is 0 either way)
  for (size_t i = 1; i < all.size() && picked.size() < 2; ++i)
    if (all[i].tried > all[i].legal + 3 && (picked.empty() || i > picked[0] + 10)) picked.push_back(i);
  ASSERT_EQ(picked.size(), 2u);
  const std::vector<std::string> only{all[picked[1]].name, all[picked[0]].name, "no_such_axiom"};
  const std::vector<AxiomCheck> some = check_axioms(set, 3, kAxiomCheckSeed, only);
  ASSERT_EQ(some.size(), 2u);  // in the set's order
  for (size_t k = 0; k < 2; ++k) {
    const AxiomCheck &row = some[k], &whole = all[picked[k]];
    EXPECT_EQ(row.name, whole.name);
    EXPECT_EQ(row.tried, whole.tried) << row.name;
    EXPECT_EQ(row.legal, whole.legal) << row.name;
    EXPECT_EQ(row.mismatches, whole.mismatches) << row.name;
  }
  // Another stream draws them otherwise: the comparison above can fail.
  const std::vector<AxiomCheck> other = check_axioms(set, 3, kAxiomCheckSeed + 1, only);
  ASSERT_EQ(other.size(), 2u);
  EXPECT_TRUE(other[0].tried != some[0].tried || other[1].tried != some[1].tried);
}

// An axiom of an operator whose encoding row is missing (a new operator's
// axioms written before its row) names the symbol, instead of passing as
// "no legal instance".
TEST(Axioms, AMissingEncodingRowIsNamed) {
  const fs::path dir = fs::temp_directory_path() / ("pcgx_axioms_unencoded_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The prelude, one shipped file and the new operator's: the shipped
  // axioms' own check is TheShippedAxiomsHoldOnRandomInstances'.
  for (const char* f : {"prelude.smt2", "activations.smt2"})
    fs::copy_file(fs::path(default_axioms_dir()) / f, dir / f);
  std::ofstream(dir / "prelude.smt2", std::ios::app) << "\n(declare-fun square (Tensor) Tensor)\n";
  std::ofstream(dir / "square.smt2")
      << "(assert (! (forall ((x Tensor) (k Int)) (= (square (replicate x k)) (replicate (square x) k))) :named square_replicate))\n";
  const AxiomSet set = load_axioms(dir.string());
  bool found = false;
  for (const AxiomCheck& row : check_axioms(set, 5, kAxiomCheckSeed)) {
    if (row.name != "square_replicate") {
      EXPECT_TRUE(row.unencoded.empty()) << row.name << " uses " << row.unencoded;
      continue;
    }
    found = true;
    EXPECT_EQ(row.unencoded, "square");
  }
  EXPECT_TRUE(found);
  const auto failure = axiom_check_failure(set);
  ASSERT_TRUE(failure);
  EXPECT_NE(failure->find("uses 'square', which no registry operator declares (OpDef::smt)"), std::string::npos) << *failure;
  fs::remove_all(dir);
}

Ruleset candidates(const std::string& ops, int max_ops) {
  gen::GeneratorConfig c;
  c.opset = ops == "unity" ? gen::find_opset("unity") : gen::parse_ops(ops);
  c.max_ops = max_ops;
  gen::GenerateReport rep;
  return gen::generate(c, rep);
}

TEST(Prover, ProvesEveryReluRepartitionCombineCandidate) {
  const Ruleset r = candidates("Relu,Repartition,Combine", 2);
  ASSERT_FALSE(r.rules.empty());
  Prover p(load_axioms(default_axioms_dir()));
  for (const Rule& rule : r.rules) {
    const Proof proof = p.prove(rule);
    EXPECT_EQ(proof.result, Result::kUnsat) << rule.id << ": " << rule_text(rule) << ": " << proof.reason;
    // The two sides differ, so a proof must rest on at least one axiom.
    if (proof.result == Result::kUnsat) {
      EXPECT_FALSE(proof.axioms.empty()) << rule.id;
    }
  }
}

// Synchronized BatchNorm, data parallel on 2 shards, is BatchNorm: each
// statistic summed per shard, reduced and replicated, the normalization
// applied per shard. The substitution the data-parallel baseline makes is
// proved, not only evaluated.
TEST(Prover, ProvesSynchronizedBatchNorm) {
  auto inputs = [](Graph& g) {
    return std::array<TensorRef, 3>{TensorRef{g.add("Input", {{"shape", IntList{4, 4, 2, 2}}}, {}, "x"), 0},
                                    TensorRef{g.add("Input", {{"shape", IntList{4}}}, {}, "g"), 0},
                                    TensorRef{g.add("Input", {{"shape", IntList{4}}}, {}, "b"), 0}};
  };
  Graph source("bn");
  {
    const auto [x, g, b] = inputs(source);
    source.add_output({source.add("BatchNorm", {}, {x, g, b}), 0});
  }
  Graph target("sync-bn");
  {
    const auto [x, g, b] = inputs(target);
    auto op = [&](const std::string& name, Attributes a, std::vector<TensorRef> in) { return TensorRef{target.add(name, std::move(a), in), 0}; };
    auto all_reduced = [&](TensorRef t) { return op("Replicate", {{"degree", int64_t{2}}}, {op("Reduce", {{"degree", int64_t{2}}}, {t})}); };
    const TensorRef xs = op("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {x});
    const TensorRef sum = all_reduced(op("BatchSum", {}, {xs}));
    const TensorRef squares = all_reduced(op("BatchSquares", {}, {xs, sum}));
    const TensorRef y = op("BatchNormApply", {}, {xs, sum, squares, op("Replicate", {{"degree", int64_t{2}}}, {g}),
                                                  op("Replicate", {{"degree", int64_t{2}}}, {b})});
    target.add_output(op("Combine", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {y}));
  }
  Prover p(load_axioms(default_axioms_dir()));
  const Rule rule{"sync-bn", source, target, {{0, 0}}, std::nullopt};
  const Proof proof = p.prove(rule);
  EXPECT_EQ(proof.result, Result::kUnsat) << proof.reason;
  bool decomposition = false;
  for (const std::string& a : proof.axioms) decomposition |= a == "batch_norm_is_statistics_applied";
  EXPECT_TRUE(decomposition);
  // Without the Reduce of the sums the statistics are a shard's: refused.
  Graph wrong("unreduced");
  {
    const auto [x, g, b] = inputs(wrong);
    auto op = [&](const std::string& name, Attributes a, std::vector<TensorRef> in) { return TensorRef{wrong.add(name, std::move(a), in), 0}; };
    const TensorRef xs = op("Repartition", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {x});
    const TensorRef sum = op("BatchSum", {}, {xs});
    const TensorRef y = op("BatchNormApply", {}, {xs, sum, op("BatchSquares", {}, {xs, sum}), op("Replicate", {{"degree", int64_t{2}}}, {g}),
                                                  op("Replicate", {{"degree", int64_t{2}}}, {b})});
    wrong.add_output(op("Combine", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {y}));
  }
  EXPECT_NE(p.prove(Rule{"unreduced", source, wrong, {{0, 0}}, std::nullopt}).result, Result::kUnsat);
}

// A rule over an operator with no SMT encoding at all is unproved, and the
// proof names the operator (pcgx verify then exits 1 naming it) rather
// than failing like a rule that does not hold.
TEST(Prover, AnOperatorWithoutAnEncodingIsNamed) {
  auto graph = [](bool pipelined) {
    Graph g(pipelined ? "pipelined" : "plain");
    TensorRef x{g.add("Input", {{"shape", IntList{4, 4}}}, {}, "x"), 0};
    if (pipelined) {
      x = {g.add("Pipeline", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {x}), 0};
      x = {g.add("Batch", {{"dim", int64_t{0}}, {"degree", int64_t{2}}}, {x}), 0};
    }
    g.add_output({g.add("Relu", {}, {x}), 0});
    return g;
  };
  Prover p(load_axioms(default_axioms_dir()));
  const Rule rule{"pipelined-relu", graph(true), graph(false), {{0, 0}}, std::nullopt};
  const Proof proof = p.prove(rule);
  EXPECT_NE(proof.result, Result::kUnsat);
  EXPECT_EQ(proof.unencoded, "Batch") << proof.reason;  // the first met, from the output
  Ruleset candidates;
  candidates.rules.push_back(rule);
  const ProvedSet set = collect_proved(candidates, {Verdict{proof, {}}}, load_axioms(default_axioms_dir()));
  EXPECT_EQ(set.unencoded, (std::map<std::string, int>{{"Batch", 1}}));
}

// Operator sets whose candidates (at 2 operators) the axioms prove in full:
// ScalarMul's scalar is encoded exactly as a fraction, Transpose's
// permutation as an integer with helper functions.
class ProvesEveryCandidate : public ::testing::TestWithParam<std::string> {};

TEST_P(ProvesEveryCandidate, Of) {
  const Ruleset r = candidates(GetParam(), 2);
  ASSERT_GT(r.rules.size(), 50u);
  Prover p(load_axioms(default_axioms_dir()));
  for (const Rule& rule : r.rules) {
    const Proof proof = p.prove(rule);
    EXPECT_EQ(proof.result, Result::kUnsat) << rule.id << ": " << rule_text(rule) << ": " << proof.reason;
  }
}

// Every compute operator's parallel forms, one family at a time.
const std::vector<std::string> kFamilies = {"ScalarMul,EwAdd,Repartition,Combine,Replicate,Reduce",
                                            "Transpose,Relu,Repartition,Combine",
                                            "Gelu,Sigmoid,Tanh,Repartition,Combine,Replicate",
                                            "Silu,Repartition,Combine,Replicate",
                                            "Reciprocal,EwMul,Repartition,Combine,Replicate",
                                            "Clip(min=0,max=6),Repartition,Combine,Replicate,Reduce",
                                            "RMSNorm,Repartition,Combine,Replicate",
                                            "Softmax,Repartition,Combine,Replicate",
                                            "Dropout,Repartition,Combine,Replicate,Reduce",
                                            // With gamma and beta: the shipped layernorm-v1 (its
                                            // 1-d weights normalized as inputs give true
                                            // identities the axioms do not imply, listed in
                                            // layernorm-v1.unproved.txt).
                                            "LayerNorm(affine=false),Repartition,Combine,Replicate",
                                            "BatchNorm,Repartition,Combine",
                                            "BatchSum,BatchSquares,BatchNormApply,Repartition,Combine",
                                            "Embedding,Repartition,Combine,Replicate,Reduce",
                                            "EmbeddingBag,Repartition,Combine,Replicate,Reduce",
                                            "Pool2D(kernel_h=2,kernel_w=2),Repartition,Combine,Replicate",
                                            "SoftmaxCrossEntropy,Repartition,Combine,Reduce",
                                            "ClassLogSumExp,CrossEntropyApply,Repartition,Combine,Replicate,Reduce",
                                            "MSELoss,Repartition,Combine,Replicate,Reduce",
                                            "Conv2D,Repartition,Combine,Replicate,Reduce",
                                            "Reshape,Repartition,Combine,Replicate,Reduce",
                                            "MatMul,Repartition,Combine,Replicate,Reduce",
                                            "BatchMatMul,Repartition,Combine,Replicate,Reduce"};
std::string family_name(const std::string& ops) { return ops.substr(0, ops.find_first_of(",(")); }

INSTANTIATE_TEST_SUITE_P(Opsets, ProvesEveryCandidate, ::testing::ValuesIn(kFamilies),
                         [](const auto& p) { return family_name(p.param); });

// Each compute operator's parallel forms are proved: by a family above, or
// by the shipped unity ruleset (Linear, Relu, EwAdd, EwMul, Concat, Split:
// ShippedRuleset regenerates it; its unproved candidates are listed in
// rulesets/unity-v1.unproved.txt). A new operator must join a family
// (docs/adding-an-operator.md).
TEST(ProvesEveryCandidate, CoverEveryComputeOperator) {
  std::set<std::string> covered = {"Linear", "Relu", "EwAdd", "EwMul", "Concat", "Split"};
  for (const std::string& f : kFamilies) {  // every operator of the family, attributes aside
    int depth = 0;
    std::string name;
    for (const char c : f + ",") {
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (c == ',' && depth == 0) covered.insert(name.substr(0, name.find('('))), name.clear();
      else name += c;
    }
  }
  for (const OpDef* op : OpRegistry::global().all()) {
    if (op->op_class == OpClass::kCompute) {
      EXPECT_TRUE(covered.count(op->name)) << op->name << ": no family proves its parallel forms (kFamilies)";
    }
  }
}

// Mutants of proved rules: a changed dimension or degree, swapped operands,
// an added or dropped parallel operator, a changed activation.
std::optional<Graph> mutate(const Graph& g, int kind, size_t site) {
  Graph out(g.name());
  size_t seen = 0;
  bool changed = false;
  std::vector<NodeId> map;
  for (const Node& n : g.nodes()) {
    std::vector<TensorRef> ins;
    for (const TensorRef& t : n.inputs) ins.push_back({map[static_cast<size_t>(t.node)], t.output});
    Attributes a = n.attrs;
    const bool here = n.op->op_class != OpClass::kSource && seen++ == site;
    try {
      if (here && kind == 0 && a.has("dim")) {
        a.set("dim", (a.get_int("dim") + 1) % g.shape(n.inputs[0]).rank()), changed = true;
      } else if (here && kind == 1 && a.has("degree")) {
        a.set("degree", a.get_int("degree") * 2), changed = true;
      } else if (here && kind == 2 && ins.size() == 2) {
        std::swap(ins[0], ins[1]), changed = true;
      } else if (here && kind == 3 && a.has("activation")) {
        a.set("activation", std::string(a.get_string("activation") == "none" ? "relu" : "none")), changed = true;
      }
      NodeId id = out.add(*n.op, a, ins, n.name);
      if (here && kind == 4) {
        id = out.add("Replicate", {{"degree", int64_t{2}}}, {{id, 0}}), changed = true;
      } else if (here && kind == 5 && n.op->name == "Reduce") {
        map.push_back(ins[0].node);  // drop it
        changed = true;
        continue;
      }
      map.push_back(id);
    } catch (const Error&) {
      return std::nullopt;  // the mutant is not a legal PCG
    }
  }
  if (!changed) return std::nullopt;
  try {
    for (const TensorRef& t : g.outputs()) out.add_output({map[static_cast<size_t>(t.node)], t.output});
  } catch (const Error&) {
    return std::nullopt;
  }
  return out;
}

TEST(Prover, RefusesEveryMutantOfTwoHundredProvedRules) {
  const Ruleset r = candidates("unity", 2);
  Prover p(load_axioms(default_axioms_dir()), ProverOptions{1000});
  int proved = 0, mutants = 0;
  for (const Rule& rule : r.rules) {
    if (p.prove(rule).result != Result::kUnsat) continue;
    ++proved;
    for (int kind = 0; kind < 6; ++kind)
      for (size_t site = 0; site < rule.target.size(); ++site) {
        const auto m = mutate(rule.target, kind, site);
        if (!m || m->outputs().size() != rule.target.outputs().size()) continue;
        Rule bad{rule.id + "-mutant", rule.source, *m, rule.output_map, std::nullopt};
        // Only mutants that really change the function count (swapping the
        // operands of EwAdd changes nothing).
        if (check_numerically(bad).holds) continue;
        ++mutants;
        const Proof proof = p.prove(bad);
        EXPECT_NE(proof.result, Result::kUnsat) << "proved a mutant: " << rule_text(bad);
      }
  }
  EXPECT_GE(proved, 200);
  EXPECT_GE(mutants, 200);
  RecordProperty("proved", proved);
  RecordProperty("mutants", mutants);
  std::printf("%d proved rules, %d mutants refused\n", proved, mutants);
}

}  // namespace
}  // namespace pcgx::verify
