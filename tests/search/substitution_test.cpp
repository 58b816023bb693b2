// The substitution engine preserves semantics: every rule of the shipped
// ruleset, applied at every match in the tiny zoo models, leaves the
// reference interpreter's outputs unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "model_param_name.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/rulesets/rule_form.h"
#include "pcgx/rulesets/numeric_check.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/rank_adapt.h"
#include "pcgx/search/rule_library.h"
#include "pcgx/search/substitution.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

const Ruleset& shipped() {
  static const Ruleset r = load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/unity-v1.json");
  return r;
}

// A ruleset's rules in both directions, and their 2-d and 4-d adaptations.
std::vector<Rule> in_all_ranks(const Ruleset& rs) {
  std::vector<Rule> v;
  for (const Rule& r : rs.rules) {
    for (const Rule& d : {r, reversed(r)}) {
      v.push_back(d);
      for (int to : {2, 4})
        if (auto a = adapt_rank(d, to)) v.push_back(std::move(*a));
    }
  }
  return v;
}

const std::vector<Rule>& all_ranks() {
  static const std::vector<Rule> rules = in_all_ranks(shipped());
  return rules;
}

// The shipped llama-v1 rules (RMSNorm, SiLU), likewise.
const std::vector<Rule>& llama_ranks() {
  static const std::vector<Rule> rules = in_all_ranks(load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/llama-v1.json"));
  return rules;
}

// The shipped layernorm-v1 and dropout-v1 rules: generic in the norm's
// epsilon and the dropout's rate and seed (ProofRecord::value_generic).
const std::vector<Rule>& layer_norm_ranks() {
  static const std::vector<Rule> rules = in_all_ranks(load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/layernorm-v1.json"));
  return rules;
}
const std::vector<Rule>& dropout_ranks() {
  static const std::vector<Rule> rules = in_all_ranks(load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/dropout-v1.json"));
  return rules;
}

TEST(RankAdaptation, EveryAdaptedRuleHoldsByEvaluation) {
  size_t adapted = 0;
  for (const Rule& r : all_ranks()) {
    if (r.id.find('@') == std::string::npos) continue;
    ++adapted;
    const NumericCheck c = check_numerically(r, 1);
    EXPECT_TRUE(c.holds) << r.id << ": " << rule_text(r) << ": " << c.counterexample;
  }
  std::printf("%zu adapted rules checked\n", adapted);
  EXPECT_GT(adapted, shipped().rules.size());  // both directions
}

// Rules whose source is a bare tensor (introducers, x =>
// Combine(Repartition(x))) apart, the others by the operator at the root of
// their source.
struct RuleIndex {
  std::vector<const Rule*> intros;
  std::map<const OpDef*, std::vector<const Rule*>> by_root;
};

RuleIndex index_rules(std::initializer_list<const std::vector<Rule>*> lists) {
  RuleIndex ix;
  for (const auto* rules : lists) {
    for (const Rule& r : *rules) {
      if (r.source.size() == 1 && r.target.size() > 1) {
        ix.intros.push_back(&r);
        continue;
      }
      for (const TensorRef& o : r.source.outputs())
        if (r.source.node(o.node).op->op_class != OpClass::kSource) {
          ix.by_root[r.source.node(o.node).op].push_back(&r);
          break;
        }
    }
  }
  return ix;
}

// The search skips a rule at a node whose feeders are not the rule's
// (feeders_missed) without matching it: every match found, lifted ones on
// parallelized graphs too, is at a node the filter lets through.
TEST(RuleRoots, FeedersNeverRuleOutAMatch) {
  size_t matches = 0;
  MatchOptions o;
  o.lift_tasks = 64;
  for (const char* model : {"mlp-tiny", "dlrm-tiny", "gpt-tiny", "inception-v3-tiny"}) {
    const Graph m = build_model(model);
    for (const Graph& g : {m, data_parallel(m, 2)}) {
      const auto consumers = g.consumers();
      for (const Rule& r : all_ranks()) {
        const auto root = rule_root(r);
        if (!root) continue;
        EXPECT_EQ(root->op, root->node->op);
        for (const Match& x : find_matches(g, r, consumers, o)) {
          ++matches;
          EXPECT_EQ(feeders_missed(g, *root, x.nodes.at(static_cast<size_t>(root->node->id))), 0u) << model << ": " << r.id;
        }
      }
    }
  }
  EXPECT_GT(matches, 1000u);
}

// What root_needs asks at input i is what the rule reads there, and it
// asks only where the rule reads every other input as the graph does; the
// root's attributes decide for every input alike. Checked from the rules'
// graphs. (No shipped rule roots at an operator of more inputs than
// RuleRoot copies, kRootFeeders: root_needs reads those from the rule.)
TEST(RootNeeds, AsksWhatTheRuleReadsWhereTheOtherInputsFit) {
  const auto [intros, by_root] = index_rules({&all_ranks()});
  size_t asked = 0;
  std::vector<RootNeed> each;
  for (const char* model : {"mlp-tiny", "dlrm-tiny", "gpt-tiny", "inception-v3-tiny"}) {
    const Graph g = build_model(model);
    for (const Node& n : g.nodes()) {
      if (n.op->op_class != OpClass::kCompute || !by_root.count(n.op)) continue;
      for (const Rule* r : by_root.at(n.op)) {
        const auto root = rule_root(*r);
        ASSERT_TRUE(root);
        const Node& pn = *root->node;
        const bool any = root_needs(g, *r, n.id, each);
        ASSERT_EQ(each.size(), n.inputs.size());
        // The rule's feeder at each input, and whether the graph's is it.
        std::vector<std::pair<const OpDef*, int>> reads;
        std::vector<bool> fits;
        const bool same_root = pn.op == n.op && pn.inputs.size() == n.inputs.size() && static_cast<size_t>(root->output) < n.outputs.size();
        for (size_t j = 0; same_root && j < pn.inputs.size(); ++j) {
          const Node& f = r->source.node(pn.inputs[j].node);
          reads.push_back(f.op->op_class == OpClass::kSource ? std::make_pair(static_cast<const OpDef*>(nullptr), 0)
                                                            : std::make_pair(f.op, pn.inputs[j].output));
          fits.push_back(!reads.back().first ||
                         (reads.back().first == g.node(n.inputs[j].node).op && reads.back().second == n.inputs[j].output));
        }
        size_t missed = 0;
        for (size_t j = 0; j < fits.size(); ++j) missed += !fits[j];
        if (same_root && pn.inputs.size() <= kRootFeeders) {
          EXPECT_EQ(feeders_missed(g, *root, n.id), missed) << r->id;
        }
        bool attrs_passed = false;
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          EXPECT_EQ(each[i], root_needs(g, *r, n.id, static_cast<int>(i))) << r->id << " at input " << i;
          if (!each[i]) continue;
          ++asked, attrs_passed = true;
          ASSERT_TRUE(same_root) << r->id;
          EXPECT_EQ(*each[i], reads[i]) << r->id << " at input " << i;
          for (size_t j = 0; j < fits.size(); ++j) {
            if (j != i) {
              EXPECT_TRUE(fits[j]) << r->id << ": input " << j << " of " << describe(n) << " is not the rule's";
            }
          }
        }
        EXPECT_EQ(any, attrs_passed) << r->id;
        // Attributes passed: every input whose others all fit is asked.
        if (attrs_passed) {
          for (size_t i = 0; i < fits.size(); ++i)
            EXPECT_EQ(each[i].has_value(), missed == 0 || (missed == 1 && !fits[i])) << r->id << " at input " << i;
        }
      }
    }
  }
  std::printf("%zu inputs asked for\n", asked);
  EXPECT_GT(asked, 1000u);
}

// The search builds an introduction (x => Combine(Repartition(x)) at one
// input of an operator) only when root_needs lets some rule follow it:
// every rule that matches there after the introduction passes root_needs.
TEST(RootNeeds, NeverRefusesARuleThatMatchesAfterAnIntroduction) {
  const auto [intros, by_root] = index_rules({&all_ranks()});
  ASSERT_FALSE(intros.empty());
  size_t matched = 0, skipped = 0;
  for (const char* model : {"mlp-tiny", "candle-uno-tiny", "dlrm-tiny", "vgg-13-tiny"}) {
    const Graph g = build_model(model);
    for (const Node& n : g.nodes()) {
      if (n.op->op_class != OpClass::kCompute || !by_root.count(n.op)) continue;
      for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i)
        for (const Rule* in : intros) {
          NodeId at = -1;
          const auto h = introduce(g, *in, n.id, i, 2, at);
          if (!h) continue;
          const TensorRef t = in->target.outputs()[0];
          const std::pair<const OpDef*, int> made{in->target.node(t.node).op, t.output};
          const std::map<const OpDef*, std::vector<NodeId>> only{{n.op, {at}}};
          MatchOptions o;
          o.by_op = &only;
          o.free_degrees = {2};
          const auto consumers = h->consumers();
          for (const Rule* r : by_root.at(n.op)) {
            const auto need = root_needs(g, *r, n.id, i);
            const bool may = need && (!need->first || *need == made);
            if (!find_matches(*h, *r, consumers, o).empty()) {
              ++matched;
              EXPECT_TRUE(may) << model << ": " << r->id << " after " << in->id << " at input " << i << " of " << describe(n);
            } else if (!may) {
              ++skipped;
            }
          }
        }
    }
  }
  std::printf("%zu matches after an introduction, %zu rules skipped without trying\n", matched, skipped);
  EXPECT_GT(matched, 0u);
  EXPECT_GT(skipped, 0u);
}

class EveryRuleAtEveryMatch : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryRuleAtEveryMatch, PreservesTheOutputs) {
  const Graph g = build_model(GetParam());
  const auto consumers = g.consumers();
  const auto before = reference_outputs(g);
  size_t applied = 0, refused = 0;
  for (const Rule& rule : all_ranks()) {
    for (const Match& m : find_matches(g, rule, consumers)) {
      const auto h = apply_match(g, m);
      if (!h) {
        ++refused;
        continue;
      }
      ++applied;
      const double d = max_difference(before, *h);
      EXPECT_LT(d, 1e-3) << rule.id << " at node " << m.nodes.back() << ": " << rule_text(rule);
    }
  }
  std::printf("%s: %zu applications checked, %zu refused\n", GetParam().c_str(), applied, refused);
  EXPECT_GT(applied, 0u);
}

INSTANTIATE_TEST_SUITE_P(Zoo, EveryRuleAtEveryMatch,
                         ::testing::Values("mlp-tiny", "candle-uno-tiny", "dlrm-tiny", "xdl-tiny", "bert-large-tiny",
                                           "gpt-tiny", "vgg-13-tiny", "resnext-50-tiny", "inception-v3-tiny"),
                         pcgx::testing::model_param_name);

// The same on parallelized graphs, where a rule matches lifted over the
// samples split (substitution.h, "Lifted matches"): data parallelism over
// 2 devices, and Megatron's tensor parallelism inside data parallelism
// (expert, t = 2 on 4 devices) for the transformers; with the shipped
// llama-v1 rules too (RMSNorm split along the sequence).
// Two-rule steps as the search takes them: an introducer (x =>
// Combine(Repartition(x)), x => Concat(Split(x))) at one input of an
// operator, then each rule at that operator (with `lifted_only`, only
// lifted ones); each must leave the outputs unchanged.
struct TwoRuleSteps {
  size_t checked = 0, norms = 0;
};

// `counted`: the operator whose rules' steps `norms` counts.
TwoRuleSteps check_two_rule_steps(const std::vector<Graph>& graphs, int64_t lift_tasks, bool lifted_only,
                                  std::initializer_list<const std::vector<Rule>*> lists = {&all_ranks(), &llama_ranks()},
                                  const std::string& counted = "RMSNorm") {
  const auto [intros, by_root] = index_rules(lists);
  TwoRuleSteps out;
  for (const Graph& g : graphs) {
    const auto before = reference_outputs(g);
    for (const Node& n : g.nodes()) {
      if (n.op->op_class != OpClass::kCompute || !by_root.count(n.op)) continue;
      for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
        for (const Rule* in : intros) {
          NodeId at = -1;
          const auto h = introduce(g, *in, n.id, i, 2, at, lift_tasks);
          if (!h) continue;
          const std::map<const OpDef*, std::vector<NodeId>> only{{n.op, {at}}};
          MatchOptions o;
          o.by_op = &only;
          o.free_degrees = {2};
          o.lift_tasks = lift_tasks;
          const auto consumers = h->consumers();
          for (const Rule* r : by_root.at(n.op))
            for (const Match& m : find_matches(*h, *r, consumers, o)) {
              if (lifted_only && m.lift == 1) continue;
              const auto k = apply_match(*h, m);
              if (!k) continue;
              ++out.checked;
              out.norms += std::any_of(r->source.nodes().begin(), r->source.nodes().end(), [&](const Node& x) { return x.op->name == counted; });
              EXPECT_LT(max_difference(before, *k), 1e-3) << in->id << " then " << r->id << " lifted over " << m.lift << " at " << describe(n);
            }
        }
      }
    }
  }
  return out;
}

class EveryRuleAtEveryLiftedMatch : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryRuleAtEveryLiftedMatch, PreservesTheOutputs) {
  const Graph model = build_model(GetParam());
  std::vector<Graph> graphs{data_parallel(model, 2)};
  if (expert_family(model) == "transformer") graphs.push_back(*expert(model, find_machine("dgx-h100"), 4, 2));
  size_t applied = 0, lifted = 0, refused = 0, norms = 0;
  auto has_rms_norm = [](const Graph& r) {
    return std::any_of(r.nodes().begin(), r.nodes().end(), [](const Node& n) { return n.op->name == "RMSNorm"; });
  };
  MatchOptions o;
  o.lift_tasks = 64;
  for (const Graph& g : graphs) {
    const auto consumers = g.consumers();
    const auto before = reference_outputs(g);
    for (const auto* rules : {&all_ranks(), &llama_ranks()}) {
      for (const Rule& rule : *rules) {
        for (const Match& m : find_matches(g, rule, consumers, o)) {
          if (m.lift == 1) continue;  // the test above
          const auto h = apply_match(g, m);
          if (!h) {
            ++refused;
            continue;
          }
          ++applied, lifted += m.lift > 1, norms += has_rms_norm(rule.source);
          const double d = max_difference(before, *h);
          EXPECT_LT(d, 1e-3) << rule.id << " lifted over " << m.lift << " at node " << m.nodes.back() << ": " << rule_text(rule);
        }
      }
    }
  }
  const TwoRuleSteps steps = check_two_rule_steps(graphs, o.lift_tasks, true);
  norms += steps.norms;
  std::printf("%s: %zu lifted applications and %zu lifted two-rule steps checked (%zu of RMSNorm rules), %zu refused\n",
              GetParam().c_str(), applied, steps.checked, norms, refused);
  EXPECT_GT(lifted, 0u);
  if (GetParam() == "llama-tiny") {
    EXPECT_GT(norms, 0u);
  }
}

// The names of `g`'s operators of type `op`, sorted (unnamed ones as "").
std::vector<std::string> names_of(const Graph& g, const std::string& op) {
  std::vector<std::string> out;
  for (const Node& n : g.nodes())
    if (n.op->name == op) out.push_back(n.name);
  std::sort(out.begin(), out.end());
  return out;
}

// The model with every LayerNorm's epsilon made `eps`.
Graph with_norm_epsilon(const Graph& g, double eps) {
  Graph out(g.name());
  std::vector<NodeId> map;
  for (const Node& n : g.nodes()) {
    Attributes a = n.attrs;
    if (n.op->name == "LayerNorm") a.set("eps", eps);
    std::vector<TensorRef> ins;
    for (const TensorRef& t : n.inputs) ins.push_back({map[static_cast<size_t>(t.node)], t.output});
    map.push_back(out.add(*n.op, a, ins, n.name));
  }
  for (const TensorRef& t : g.outputs()) out.add_output({map[static_cast<size_t>(t.node)], t.output});
  return out;
}

// Value-generic rules on GPT and BERT, whose dropouts each have their own
// seed and whose norms here have epsilon 0.5, far from the rules' 1e-5 (an
// operator that took the rule's would change the outputs): every
// layernorm-v1 and dropout-v1 rule at every match and after
// every introducer, on the model, data parallel and under Megatron's plan
// (in both layouts between its halves),
// leaves the outputs unchanged, which holds only if the applied target
// keeps each operator's own seed, rate and epsilon (a dropout at another
// seed draws another mask).
class ValueGenericRules : public ::testing::TestWithParam<std::string> {};

TEST_P(ValueGenericRules, PreserveTheOutputsWithTheModelsValues) {
  const Graph model = with_norm_epsilon(build_model(GetParam()), 0.5);
  // (Megatron's plan both as Megatron-LM runs it, the norms on copies,
  // and with them on one device of each group, where the norm rules match.)
  std::vector<Graph> graphs{model, data_parallel(model, 2), *expert(model, find_machine("dgx-h100"), 4, 2),
                            *expert(model, find_machine("dgx-h100"), 4, 2, false, false, BetweenHalves::kOneDevice)};
  MatchOptions o;
  o.lift_tasks = 64;
  std::map<std::string, size_t> applied;
  for (const Graph& g : graphs) {
    const auto consumers = g.consumers();
    const auto before = reference_outputs(g);
    for (const auto* rules : {&layer_norm_ranks(), &dropout_ranks()})
      for (const Rule& rule : *rules)
        for (const Match& m : find_matches(g, rule, consumers, o)) {
          const auto h = apply_match(g, m);
          if (!h) continue;
          for (const ValueBinding& b : m.values) ++applied[b.op->name];
          EXPECT_LT(max_difference(before, *h), 1e-3) << rule.id << " lifted over " << m.lift << ": " << rule_text(rule);
          // The rewritten norm or dropout keeps the model's name (apply_match.cpp).
          for (const char* op : {"LayerNorm", "Dropout"}) EXPECT_EQ(names_of(*h, op), names_of(g, op)) << rule.id;
        }
  }
  const TwoRuleSteps norms = check_two_rule_steps(graphs, o.lift_tasks, false, {&all_ranks(), &layer_norm_ranks()}, "LayerNorm");
  const TwoRuleSteps drops = check_two_rule_steps(graphs, o.lift_tasks, false, {&all_ranks(), &dropout_ranks()}, "Dropout");
  std::printf("%s: %zu LayerNorm and %zu Dropout matches, %zu and %zu two-rule steps\n", GetParam().c_str(),
              applied["LayerNorm"], applied["Dropout"], norms.norms, drops.norms);
  EXPECT_GT(applied["LayerNorm"], 0u);
  EXPECT_GT(applied["Dropout"], 0u);
  EXPECT_GT(norms.norms, 0u);
  EXPECT_GT(drops.norms, 0u);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ValueGenericRules, ::testing::Values("gpt-tiny", "bert-large-tiny"),
                         pcgx::testing::model_param_name);

// A value the rule repeats stands for one value of the graph: a rule with
// two dropouts at seed 0 matches two graph dropouts of one seed, not of
// two; without value_generic in its record it matches its own values only.
TEST(ValueGenericRules, BindOneGraphValuePerRuleValue) {
  auto chain = [](int64_t s1, int64_t s2) {
    Graph g("chain");
    TensorRef x{g.add("Input", {{"shape", IntList{4, 4}}}, {}, "x"), 0};
    x = {g.add("Dropout", {{"rate", 0.1}, {"seed", s1}}, {x}), 0};
    x = {g.add("Dropout", {{"rate", 0.1}, {"seed", s2}}, {x}), 0};
    g.add_output(x);
    return g;
  };
  Rule rule{"twice", chain(0, 0), chain(0, 0), {{0, 0}}, ProofRecord{"proved", 0, {"dropout_combine"}, "", false, {"Dropout.seed"}}};
  EXPECT_EQ(find_matches(chain(5, 5), rule).size(), 1u);
  EXPECT_TRUE(find_matches(chain(5, 6), rule).empty());
  const auto m = find_matches(chain(5, 5), rule);
  ASSERT_EQ(m.size(), 1u);
  const auto h = apply_match(chain(5, 5), m[0]);
  ASSERT_TRUE(h);
  for (const Node& n : h->nodes())
    if (n.op->name == "Dropout") {
      EXPECT_EQ(n.attrs.get_int("seed"), 5);
    }
  rule.proof->value_generic.clear();
  EXPECT_TRUE(find_matches(chain(5, 5), rule).empty());
  EXPECT_EQ(find_matches(chain(0, 0), rule).size(), 1u);
  // Two rulesets stating it alike, specific first: the generic copy stays
  // in the library (a rule stated alike in both is kept once only when
  // their proofs claim the same).
  Ruleset specific, generic;
  specific.rules = {rule};
  rule.proof->value_generic = {"Dropout.seed"};
  generic.rules = {rule};
  const std::vector<Ruleset> both{specific, generic}, twice{specific, specific};
  const RuleLibrary library(both);
  EXPECT_GT(library.size(), RuleLibrary(twice).size());
  bool matches = false;
  for (const Rule& r : library.rules()) matches = matches || !find_matches(chain(5, 5), r).empty();
  EXPECT_TRUE(matches);
}

// The two-rule steps on the models themselves. A Split in the introducer
// (x => Concat(Split(x))) once fed its first output to both of Concat's
// inputs: the step changed the values.
class EveryTwoRuleStep : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryTwoRuleStep, PreservesTheOutputs) {
  const TwoRuleSteps steps = check_two_rule_steps({build_model(GetParam())}, 0, false);
  std::printf("%s: %zu two-rule steps checked\n", GetParam().c_str(), steps.checked);
  EXPECT_GT(steps.checked, 0u);
}

INSTANTIATE_TEST_SUITE_P(Zoo, EveryTwoRuleStep, ::testing::Values("mlp-tiny", "candle-uno-tiny", "dlrm-tiny", "gpt-tiny", "llama-tiny"),
                         pcgx::testing::model_param_name);

INSTANTIATE_TEST_SUITE_P(Zoo, EveryRuleAtEveryLiftedMatch,
                         ::testing::Values("mlp-tiny", "candle-uno-tiny", "dlrm-tiny", "bert-large-tiny", "gpt-tiny",
                                           "llama-tiny"),
                         pcgx::testing::model_param_name);

}  // namespace
}  // namespace pcgx::search

namespace pcgx::search {
namespace {

// Relu(Relu(x)) => Relu(x) is indexed; its reverse, which only grows the
// graph by one operator, is not (with it the search explored twice the
// graphs for the same plans).
TEST(RuleLibraryIndex, LeavesOutRulesThatOnlyAddAnOperator) {
  auto relus = [](int n) {
    Graph g;
    TensorRef t{g.add("Input", {{"shape", IntList{4, 4, 4}}}, {}, "x"), 0};
    for (int i = 0; i < n; ++i) t = {g.add("Relu", {}, {t}), 0};
    g.add_output(t);
    return g;
  };
  Ruleset rs;
  rs.rules.push_back({"idempotent", relus(2), relus(1), {{0, 0}}, std::nullopt});
  const RuleLibrary lib(rs);
  ASSERT_GE(lib.rules().size(), 1u);
  for (const Rule& r : lib.rules()) EXPECT_EQ(r.id.find('~'), std::string::npos) << rule_text(r);
}

}  // namespace
}  // namespace pcgx::search
