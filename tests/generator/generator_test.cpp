// The generator on configurations small enough to reason about by hand, its
// determinism, and the soundness of what it proposes under the float
// interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "pcgx/generator/generate.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/rulesets/numeric_check.h"

namespace pcgx::gen {
namespace {

GeneratorConfig config(const std::string& ops, int max_ops, int threads = 1) {
  GeneratorConfig c;
  c.opset = ops.find(',') == std::string::npos && ops.find('(') == std::string::npos && find_opset_or_null(ops)
                ? find_opset(ops)
                : parse_ops(ops);
  c.max_ops = max_ops;
  c.threads = threads;
  return c;
}

// Rules as text: "Relu(Repartition[0](x2)) == Repartition[0](Relu(x2))",
// both orientations, so tests need not know which side is the source.
std::string text(const Graph& g, TensorRef t) {
  const Node& n = g.node(t.node);
  if (n.op->op_class == OpClass::kSource) return n.name;
  std::string s = n.op->name;
  if (n.attrs.has("dim")) s += "[" + std::to_string(n.attrs.get_int("dim")) + "]";
  if (n.attrs.has("activation") && n.attrs.get_string("activation") != "none") s += "[" + n.attrs.get_string("activation") + "]";
  if (n.op->name == "Concat" || n.op->name == "Split") s += "[" + std::to_string(n.attrs.get_int("axis")) + "]";
  s += "(";
  for (size_t i = 0; i < n.inputs.size(); ++i) s += (i ? "," : "") + text(g, n.inputs[i]);
  s += ")";
  if (t.output) s += "." + std::to_string(t.output);
  return s;
}

std::set<std::string> rule_texts(const Ruleset& r) {
  std::set<std::string> out;
  for (const Rule& rule : r.rules) {
    std::string a, b;
    for (const TensorRef& t : rule.source.outputs()) a += (a.empty() ? "" : ";") + text(rule.source, t);
    for (const TensorRef& t : rule.target.outputs()) b += (b.empty() ? "" : ";") + text(rule.target, t);
    out.insert(a + " == " + b);
    out.insert(b + " == " + a);
  }
  return out;
}

// Renames whole tensor names ("x2" but not the "x1" of "x1.d0x2").
std::string rename(const std::string& s, const std::map<std::string, std::string>& m) {
  std::string out, tok;
  auto flush = [&] {
    auto it = m.find(tok);
    out += it == m.end() ? tok : it->second;
    tok.clear();
  };
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.') {
      tok += c;
    } else {
      flush();
      out += c;
    }
  }
  flush();
  return out;
}

// Is `rule` among `rules` up to renaming x1..x3 and w1..w2 among themselves?
bool has_rule(const std::set<std::string>& rules, const std::string& rule) {
  std::vector<std::string> xs{"x1", "x2", "x3"}, ws{"w1", "w2"};
  do {
    do {
      std::map<std::string, std::string> m{{"x1", xs[0]}, {"x2", xs[1]}, {"x3", xs[2]}, {"w1", ws[0]}, {"w2", ws[1]}};
      if (rules.count(rename(rule, m))) return true;
    } while (std::next_permutation(ws.begin(), ws.end()));
  } while (std::next_permutation(xs.begin(), xs.end()));
  return false;
}

Ruleset run(const GeneratorConfig& c) {
  GenerateReport rep;
  return generate(c, rep);
}

TEST(Generator, ReluWithRepartitionAndCombineGivesTheCommutationRules) {
  const Ruleset r = run(config("Relu,Repartition,Combine", 2));
  const auto rules = rule_texts(r);
  for (int d = 0; d < 3; ++d) {
    const std::string dim = "[" + std::to_string(d) + "]";
    EXPECT_TRUE(has_rule(rules, "Relu(Repartition" + dim + "(x2)) == Repartition" + dim + "(Relu(x2))")) << d;
    // Combine∘Repartition collapses to the identity.
    EXPECT_TRUE(has_rule(rules, "Combine" + dim + "(Repartition" + dim + "(x2)) == x2")) << d;
  }
  EXPECT_TRUE(has_rule(rules, "Relu(Combine[0](x1.d0x2)) == Combine[0](Relu(x1.d0x2))"));
  EXPECT_TRUE(has_rule(rules, "Repartition[0](Combine[0](x1.d0x2)) == x1.d0x2"));
  // Renamed copies are pruned: one rule stands for x1, x2 and x3.
  int copies = 0;
  for (const char* x : {"x1", "x2", "x3"})
    copies += static_cast<int>(rules.count(std::string("Relu(Repartition[0](") + x + ")) == Repartition[0](Relu(" + x + "))"));
  EXPECT_EQ(copies, 1);
  // Relu's idempotence: Relu(x) is shared by both sides but is one side's
  // whole output, so the pair is not derivable from Relu(y) = y and is kept.
  EXPECT_TRUE(has_rule(rules, "Relu(Relu(x1)) == Relu(x1)"));
}

// Names of the inputs a graph reads.
std::set<std::string> inputs_read(const Graph& g) {
  std::set<std::string> out;
  for (const Node& n : g.nodes())
    if (n.op->op_class == OpClass::kSource) out.insert(n.name);
  return out;
}

// MSELoss(x, x) is 0 for every x: such losses share a fingerprint whatever
// they read, but a target reading an input its source does not is no
// substitution (matching the source binds nothing to it). None is proposed;
// the zero losses of one tensor's layouts still are.
TEST(Generator, TargetsReadOnlyWhatTheirSourceReads) {
  const Ruleset r = run(config("MSELoss,Repartition,Replicate,Reduce", 2));
  ASSERT_FALSE(r.rules.empty());
  for (const Rule& rule : r.rules) {
    const std::set<std::string> src = inputs_read(rule.source), dst = inputs_read(rule.target);
    EXPECT_TRUE(std::includes(src.begin(), src.end(), dst.begin(), dst.end()))
        << text(rule.source, rule.source.outputs()[0]) << " => " << text(rule.target, rule.target.outputs()[0]);
  }
  const auto rules = rule_texts(r);
  EXPECT_FALSE(has_rule(rules, "MSELoss(x2,x2) == MSELoss(x1,x1)"));
  EXPECT_TRUE(has_rule(rules, "MSELoss(Replicate(x1),Replicate(x1)) == Replicate(MSELoss(x1,x1))"));
}

TEST(Generator, RulesWithOneOperatorEachSideAreExactlyTheCommutations) {
  // With at most one operator per graph, equal fingerprints need two
  // different single operators computing the same thing: none exist among
  // Relu/Repartition/Combine, so there are no candidates at all.
  const Ruleset r = run(config("Relu,Repartition,Combine", 1));
  EXPECT_TRUE(r.rules.empty());
}

TEST(Generator, UnityOpsetContainsTheExpectedParallelizationRules) {
  const Ruleset r = run(config("unity", 2));
  const auto rules = rule_texts(r);
  // Unity's hybrid rewrite: Add(x, y) = Reduce(2)(Concat_replica(x, y)).
  EXPECT_TRUE(has_rule(rules, "Reduce(Concat[-1](x1,x2)) == EwAdd(x1,x2)") ||
              has_rule(rules, "Reduce(Concat[-1](x1,x2)) == EwAdd(x2,x1)"));
  // Relu commutes with Replicate (and never with Reduce).
  EXPECT_TRUE(has_rule(rules, "Relu(Replicate(x2)) == Replicate(Relu(x2))"));
  for (const auto& s : rules) EXPECT_EQ(s.find("Relu(Reduce(x1.r2)) == Reduce(Relu"), std::string::npos) << s;
}

TEST(Generator, LinearParallelizationRulesAtThreeOperators) {
  const auto rules = rule_texts(run(config("Linear,Repartition,Combine,Replicate,Reduce", 3, 2)));
  // Reduction parallelism on an input split along the contraction dimension.
  EXPECT_TRUE(has_rule(rules, "Reduce(Linear(x1.d2x2,Repartition[0](w2))) == Linear(Combine[2](x1.d2x2),w2)"));
  // Data parallelism: batch-split input, replicated weight.
  EXPECT_TRUE(has_rule(rules, "Combine[0](Linear(x1.d0x2,Replicate(w2))) == Linear(Combine[0](x1.d0x2),w2)"));
  // Model parallelism: replicated input, column-split weight.
  EXPECT_TRUE(has_rule(rules, "Combine[2](Linear(Replicate(x2),w1.d1x2)) == Linear(x2,Combine[1](w1.d1x2))"));
}

TEST(Generator, OutputIsTheSameWhateverTheThreadCount) {
  const std::string one = ruleset_to_json(run(config("unity", 2, 1)));
  const std::string two = ruleset_to_json(run(config("unity", 2, 2)));
  EXPECT_EQ(one, two);
}

// Every candidate holds under the interpreter (float, and exactly) on fresh
// inputs whose replica slots are unrelated (partial sums).
TEST(Generator, EveryCandidateHoldsUnderTheFloatInterpreter) {
  const Ruleset r = run(config("unity", 2));
  ASSERT_GT(r.rules.size(), 100u);
  for (const Rule& rule : r.rules) {
    const NumericCheck check = check_numerically(rule);
    EXPECT_TRUE(check.holds) << rule.id << ": " << check.counterexample;
  }
}

TEST(Generator, StageCountsShrinkMonotonically) {
  GenerateReport rep;
  generate(config("unity", 2), rep);
  const auto& c = rep.counts;
  EXPECT_GT(c.graphs, c.fingerprints);
  EXPECT_GE(c.raw_pairs, c.after_common_subgraph);
  EXPECT_GE(c.after_common_subgraph, c.after_renaming);
  EXPECT_GE(c.after_renaming, c.after_implied);
  EXPECT_GT(c.after_implied, 0u);
}

TEST(Generator, BadConfigurationsAreErrors) {
  EXPECT_THROW(find_opset("nope"), Error);
  EXPECT_THROW(parse_ops("Relu,Frob"), Error);
  EXPECT_THROW(parse_ops("Linear(activation=swish)"), Error);
  EXPECT_THROW(parse_ops("Linear(colour=red)"), Error);
  GeneratorConfig c = config("Relu", 1);
  c.degrees = {1};
  GenerateReport rep;
  EXPECT_THROW(generate(c, rep), Error);
  c.degrees = {2};
  c.max_ops = 9;
  EXPECT_THROW(generate(c, rep), Error);
  // A required attribute with no values to enumerate.
  EXPECT_THROW(generate(config("Pool2D", 1), rep), Error);
}

}  // namespace
}  // namespace pcgx::gen

namespace pcgx::gen {
namespace {

// A surrogate that satisfies an identity the real operator does not would
// let the generator propose a false rule; the max-pool surrogate once did
// (avgpool(maxpool(x)) = avgpool(x * x)).
TEST(Generator, PoolingCandidatesHoldUnderTheFloatInterpreter) {
  GeneratorConfig c;
  c.opset = parse_ops("Pool2D(kernel_h=2,kernel_w=2,mode=max|avg),EwMul,Relu");
  c.opset.conv_kernels = true;
  c.ndims = 4;
  c.max_ops = 2;
  GenerateReport rep;
  const Ruleset r = generate(c, rep);
  ASSERT_FALSE(r.rules.empty());
  for (const Rule& rule : r.rules) {
    const NumericCheck check = check_numerically(rule);
    EXPECT_TRUE(check.holds) << rule.id << ": " << check.counterexample;
  }
}

}  // namespace
}  // namespace pcgx::gen
