// The search end to end on small models: its result computes what the
// model computes, is never predicted slower than the baselines it is
// compared with, and survives the strategy file.
#include <gtest/gtest.h>

#include <set>

#include "model_param_name.h"
#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_builder.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/strategy_json.h"
#include "pcgx/search/unity_search.h"
#include "search/shipped_library.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

const RuleLibrary& library() { return shipped_library(); }

class UnitySearch : public ::testing::TestWithParam<std::string> {};

TEST_P(UnitySearch, PreservesValuesAndBeatsTheBaselines) {
  const Graph g = build_model(GetParam());
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.budget = 6;
  const SearchResult r = optimize(g, library(), mapper, o);
  ASSERT_TRUE(r.strategy.estimate.feasible) << r.strategy.estimate.infeasible;
  EXPECT_LT(max_difference(g, r.strategy.graph), 1e-3);
  for (const Algorithm b : {Algorithm::kDataParallel, Algorithm::kExpert}) {
    if (b == Algorithm::kExpert && expert_family(g).empty()) continue;
    SearchOptions ob;
    ob.algorithm = b;
    const SearchResult base = optimize(g, library(), mapper, ob);
    EXPECT_LE(r.strategy.estimate.time, base.strategy.estimate.time * (1 + 1e-9)) << name(b);
  }
  // Data parallelism over a group of fewer devices (parallel branches side
  // by side, one group each) is a seed of the search too.
  for (int64_t d : {2, 1}) EXPECT_LE(r.strategy.estimate.time, mapper.time(data_parallel(g, d)) * (1 + 1e-9)) << "data parallel on " << d;
  // Round trip through the strategy file.
  StrategyFile f{g.name(), cm.machine(), 4, "unity", r.applied, r.strategy};
  const StrategyFile back = strategy_from_json(strategy_to_json(f), "s.json");
  EXPECT_EQ(back.strategy.graph.size(), r.strategy.graph.size());
  EXPECT_EQ(back.applied, r.applied);
  for (const Node& n : r.strategy.graph.nodes())
    if (n.op->op_class != OpClass::kSource) {
      EXPECT_EQ(back.strategy.views[static_cast<size_t>(n.id)], r.strategy.views[static_cast<size_t>(n.id)]);
    }
  EXPECT_NEAR(mapper.map(back.strategy.graph).estimate.time, r.strategy.estimate.time, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Tiny, UnitySearch, ::testing::Values("mlp-tiny", "dlrm-tiny", "xdl-tiny", "candle-uno-tiny"),
                         pcgx::testing::model_param_name);

// The zoo's MLP (8192 wide, batch 2048) with a softmax before the loss,
// which keeps it outside the expert's families: no seed starts from
// tensor parallelism, the search has to find it.
Graph dense_stack(int layers) {
  GraphBuilder b("stack");
  TensorRef x = b.input("x", {2048, 8192});
  for (int i = 0; i < layers; ++i) x = b.linear(x, 8192, i + 1 < layers ? "relu" : "none", false, "dense" + std::to_string(i));
  b.graph().add_output(b.mse_loss(b.softmax(x), b.input("target", {2048, 8192})));
  Graph g = b.finish();
  EXPECT_EQ(expert_family(g), "");
  return g;
}

TEST(UnitySearch, FindsModelParallelismForAWideMlp) {
  // 8192-wide layers on 8 GPUs: replicating 1B parameters costs more than
  // moving activations, so the search must beat data parallelism.
  const Graph g = dense_stack(4);
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.budget = 16;
  const SearchResult r = optimize(g, library(), mapper, o);
  const double dp = mapper.map(data_parallel(g, 8)).estimate.time;
  EXPECT_LT(r.strategy.estimate.time, 0.9 * dp);
  EXPECT_FALSE(r.applied.empty());
}

// Sixteen identical 8192-wide layers: converting them one exploration at a
// time, the default budget reached 1.00x of data parallelism on the zoo's
// MLP (1.14x with budget 20); repeating an improving step across the
// layers (Explorer::repeat) finds tensor parallelism for all of them at the
// default budget.
TEST(UnitySearch, RepeatsAnImprovingStepAcrossIdenticalLayers) {
  const Graph g = dense_stack(16);
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency());
  const MachineMapper mapper(cm);
  const SearchResult r = optimize(g, library(), mapper, SearchOptions{});
  const double dp = mapper.map(best_data_parallel(g, mapper)).estimate.time;
  EXPECT_LT(r.strategy.estimate.time, dp / 1.5);
  EXPECT_GE(r.applied.size(), 16u);
}

// Unity's best-first search, with its default budget, finds the optimum
// of the exhaustive search over the same (bounded) space.
struct SmallCase {
  std::string name;
  Graph graph;
  int64_t devices;
  int64_t max_nodes = 0;  // exhaustive space (0: the default bound)
  int64_t budget = SearchOptions{}.budget;
};

Graph two_branches() {
  // y = x·A + x·B: a parallel split in the series-parallel decomposition.
  Graph g("two-branches");
  const NodeId x = g.add("Input", {{"shape", IntList{1024, 2048}}}, {}, "x");
  const NodeId a = g.add("Weight", {{"shape", IntList{2048, 2048}}}, {}, "a");
  const NodeId b = g.add("Weight", {{"shape", IntList{2048, 2048}}}, {}, "b");
  const NodeId ya = g.add("Linear", {}, {{x, 0}, {a, 0}}, "fa");
  const NodeId yb = g.add("Linear", {}, {{x, 0}, {b, 0}}, "fb");
  const NodeId s = g.add("EwAdd", {}, {{ya, 0}, {yb, 0}}, "sum");
  g.add_output({s, 0});
  return g;
}

std::vector<SmallCase> small_cases() {
  std::vector<SmallCase> cases;
  for (int64_t d : {2, 4, 8}) cases.push_back({"mlp1", build_model("mlp", {{"layers", 1}, {"batch", 64 * d}}), d});
  for (int64_t d : {2, 4}) cases.push_back({"mlp2", build_model("mlp", {{"layers", 2}, {"batch", 64 * d}}), d});
  // The default bound (11 nodes) holds ~4,000 PCGs here; the optimum,
  // x·(A + B) with A + B split by columns, has 9. Before the search
  // repeated improving steps, the default budget stopped short of it (on 2
  // devices at 0.177 ms predicted against 0.159 ms, on 4 at reduction
  // parallelism, 0.147 against 0.119 ms) and this case ran at twice the
  // budget; it now reaches it at the default.
  for (int64_t d : {2, 4}) cases.push_back({"branches", two_branches(), d, 9});
  return cases;
}

// One test per case, so each stays well under a minute on a busy machine
// (together they took 142 s under ctest -j2).
class ExhaustiveSearch : public ::testing::TestWithParam<size_t> {};

TEST_P(ExhaustiveSearch, UnityFindsTheExhaustiveOptimum) {
  const SmallCase c = small_cases().at(GetParam());
  SCOPED_TRACE(c.name + " on " + std::to_string(c.devices) + " devices");
  const CostModel cm(find_machine("dgx-h100").with_devices(c.devices), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions ex;
  ex.algorithm = Algorithm::kExhaustive;
  ex.exhaustive_max_nodes = c.max_nodes;
  const SearchResult best = optimize(c.graph, library(), mapper, ex);
  ASSERT_TRUE(best.strategy.estimate.feasible);
  EXPECT_GT(best.explored, 1);
  EXPECT_LT(max_difference(c.graph, best.strategy.graph), 1e-3);
  SearchOptions uo;
  uo.budget = c.budget;
  const SearchResult u = optimize(c.graph, library(), mapper, uo);  // the cache the exhaustive search filled
  EXPECT_LE(u.strategy.estimate.time, best.strategy.estimate.time * (1 + 1e-9));
  EXPECT_LT(u.explored, best.explored);
}

INSTANTIATE_TEST_SUITE_P(Small, ExhaustiveSearch, ::testing::Range(size_t{0}, small_cases().size()), [](const auto& p) {
  const SmallCase c = small_cases().at(p.param);
  return c.name + "_on_" + std::to_string(c.devices);
});

TEST(ExhaustiveLimit, RefusesASpaceOverItsLimit) {
  const Graph g = build_model("mlp", {{"layers", 2}, {"batch", 128}});
  const CostModel cm(find_machine("dgx-h100").with_devices(2), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.algorithm = Algorithm::kExhaustive;
  o.exhaustive_limit = 20;
  EXPECT_THROW(optimize(g, library(), mapper, o), Error);
}

TEST(SequentialSearch, AlgebraicThenParallelPreservesValuesAndBeatsDataParallel) {
  const Graph g = build_model("mlp-tiny");
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.algorithm = Algorithm::kSequential;
  o.budget = 6;
  const SearchResult r = optimize(g, library(), mapper, o);
  ASSERT_TRUE(r.strategy.estimate.feasible);
  EXPECT_LT(max_difference(g, r.strategy.graph), 1e-3);
  EXPECT_LE(r.strategy.estimate.time, mapper.map(data_parallel(g, 4)).estimate.time * (1 + 1e-9));
  // The first phase applies algebraic rules only: no parallel operator
  // appears before the first rule that has one.
  bool seen_parallel = false;
  const RuleLibrary algebraic = library().filtered(RuleFilter::kAlgebraic);
  std::set<std::string> algebraic_ids;
  for (const Rule& rule : algebraic.rules()) algebraic_ids.insert(rule.id);
  for (const std::string& label : r.applied) {
    const std::string id = label.substr(0, label.find("@k"));
    const bool alg = algebraic_ids.count(id) > 0;
    EXPECT_FALSE(seen_parallel && alg) << id << " (algebraic) after a parallelization step";
    seen_parallel |= !alg;
  }
}

TEST(UnitySearch, BadOptionsAndUncoveredExpertAreErrors) {
  const Graph g = build_model("vgg-13-tiny");
  const CostModel cm(find_machine("dgx-h100").with_devices(2), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.budget = 0;
  try {
    optimize(g, library(), mapper, o);
    ADD_FAILURE() << "a budget of 0 was accepted";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "SearchOptions.budget");
  }
  o.budget = 12;
  o.algorithm = Algorithm::kExpert;
  EXPECT_THROW(optimize(g, library(), mapper, o), Error);
}

TEST(GraphSplitting, CutsLargeModelsIntoPiecesOfAtLeastK) {
  const Graph g = build_model("bert-large-tiny");
  const auto pieces = split_points(g, library(), 10);
  ASSERT_GT(pieces.size(), 1u);
  size_t total = 0;
  for (const auto& p : pieces) {
    EXPECT_GE(p.size(), 10u);
    total += p.size();
  }
  size_t compute = 0;
  for (const Node& n : g.nodes()) compute += n.op->op_class != OpClass::kSource;
  EXPECT_EQ(total, compute);
}

}  // namespace
}  // namespace pcgx::search

namespace pcgx::search {
namespace {

const Ruleset& shipped_named(const std::string& file) {
  static std::map<std::string, Ruleset> loaded;
  auto it = loaded.find(file);
  if (it == loaded.end()) it = loaded.emplace(file, load_ruleset(std::string(PCGX_SOURCE_DIR) + "/rulesets/" + file)).first;
  return it->second;
}

size_t sequence_split_norms(const Graph& g, const std::string& norm = "RMSNorm") {
  size_t n = 0;
  for (const Node& node : g.nodes())
    if (node.op->name == norm && node.outputs[0].rank() == 3 && node.outputs[0].dims[1].degree > 1) ++n;
  return n;
}

// Sequence parallelism from proved rules (Korthikanti et al. 2022): with
// the shipped llama-v1 rules (RMSNorm's split along the sequence, lifted
// over the samples split: substitution.h), unity splits a LLaMA layer's
// norms along the sequence inside Megatron's tensor-parallel plan, and
// beats the expert's plan; unity-v1 alone has no rule for RMSNorm and
// splits none. Searched without the expert's sequence-parallel plan among
// its starts (seed_sequence_parallel), so the split comes from the rules,
// made from the expert's plan with the norms on one device of each group
// (BetweenHalves::kOneDevice). At twice the default budget: the default's
// partial split is slower than the expert's norms on copies, Megatron-LM's
// (docs/search.md).
TEST(UnitySearch, SplitsTheSequenceWithTheShippedLlamaRules) {
  const Graph g = build_model("llama", {{"layers", 2}, {"hidden", 1024}, {"heads", 8}, {"ffn", 2816}, {"seq", 1024}, {"batch", 8}, {"vocab", 8000}});
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency(), {}, {}, {Precision::kBf16});
  const MachineMapper mapper(cm);
  const std::vector<Ruleset> both{shipped_named("unity-v1.json"), shipped_named("llama-v1.json")};
  SearchOptions rules_only;
  rules_only.seed_sequence_parallel = false;
  SearchOptions deeper = rules_only;
  deeper.budget = 24;
  const SearchResult with = optimize(g, RuleLibrary(both), mapper, deeper);
  ASSERT_TRUE(with.strategy.estimate.feasible);
  EXPECT_GT(sequence_split_norms(with.strategy.graph), 0u);
  const SearchResult without = optimize(g, RuleLibrary(shipped_named("unity-v1.json")), mapper, rules_only);
  EXPECT_EQ(sequence_split_norms(without.strategy.graph), 0u);
  EXPECT_LT(with.strategy.estimate.time, without.strategy.estimate.time);
  SearchOptions e;
  e.algorithm = Algorithm::kExpert;
  EXPECT_LT(with.strategy.estimate.time, optimize(g, RuleLibrary(both), mapper, e).strategy.estimate.time);
}

// The same for GPT, whose norms are LayerNorms with gamma and beta and
// whose residual branches end in dropouts, each with its own seed: the
// shipped layernorm-v1 (the split needs both weights copied, four
// operators on one side) and dropout-v1 rules match every one of them
// because their proofs hold at any epsilon, rate and seed
// (ProofRecord::value_generic). Without them unity splits no norm.
TEST(UnitySearch, SplitsGptsSequenceWithValueGenericRules) {
  const Graph g = build_model("gpt", {{"layers", 2}, {"hidden", 1024}, {"heads", 8}, {"ffn", 4096}, {"seq", 1024}, {"batch", 8}, {"vocab", 8000}});
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency(), {}, {}, {Precision::kBf16});
  const MachineMapper mapper(cm);
  const std::vector<Ruleset> all{shipped_named("unity-v1.json"), shipped_named("layernorm-v1.json"), shipped_named("dropout-v1.json")};
  SearchOptions rules_only;
  rules_only.seed_sequence_parallel = false;
  SearchOptions deeper = rules_only;
  deeper.budget = 24;
  const SearchResult with = optimize(g, RuleLibrary(all), mapper, deeper);
  ASSERT_TRUE(with.strategy.estimate.feasible);
  EXPECT_GT(sequence_split_norms(with.strategy.graph, "LayerNorm"), 0u);
  const SearchResult without = optimize(g, RuleLibrary(shipped_named("unity-v1.json")), mapper, rules_only);
  EXPECT_EQ(sequence_split_norms(without.strategy.graph, "LayerNorm"), 0u);
  EXPECT_LT(with.strategy.estimate.time, without.strategy.estimate.time);
  SearchOptions e;
  e.algorithm = Algorithm::kExpert;
  EXPECT_LT(with.strategy.estimate.time, optimize(g, RuleLibrary(all), mapper, e).strategy.estimate.time);
}

// BERT's post-norms, which the rules cannot split one cheaper step at a
// time: unity starts from the expert's plan with sequence parallelism too
// (SearchOptions::seed_sequence_parallel), so it splits them and is as
// fast as that plan, where without that start it splits none.
TEST(UnitySearch, StartsFromTheExpertsSequenceParallelPlan) {
  const Graph g = build_model("bert-large", {{"layers", 2}, {"heads", 8}, {"seq", 512}, {"batch", 16}});
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency(), {}, {}, {Precision::kBf16});
  const MachineMapper mapper(cm);
  const RuleLibrary rules(shipped_named("unity-v1.json"));
  const SearchResult seeded = optimize(g, rules, mapper, SearchOptions{});
  SearchOptions rules_only;
  rules_only.seed_sequence_parallel = false;
  const SearchResult unseeded = optimize(g, rules, mapper, rules_only);
  SearchOptions e;
  e.algorithm = Algorithm::kExpert, e.sequence_parallel = true;
  const SearchResult expert_sp = optimize(g, rules, mapper, e);
  ASSERT_TRUE(seeded.strategy.estimate.feasible);
  EXPECT_GT(sequence_split_norms(seeded.strategy.graph, "LayerNorm"), 0u);
  EXPECT_EQ(sequence_split_norms(unseeded.strategy.graph, "LayerNorm"), 0u);
  EXPECT_LE(seeded.strategy.estimate.time, expert_sp.strategy.estimate.time * (1 + 1e-9));
  EXPECT_LT(seeded.strategy.estimate.time, unseeded.strategy.estimate.time);
}

}  // namespace
}  // namespace pcgx::search
