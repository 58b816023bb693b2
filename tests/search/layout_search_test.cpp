// The layout search (layout_search.h): the sequences it enumerates take
// one layout to the other; where a plan's conversion has a cheaper
// sequence it is chosen, priced lower, and the rewritten plan computes what
// the model computes; conversions that are already one collective stay.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "pcgx/pcg/machine.h"
#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/rulesets/ruleset.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/layout_search.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/pipeline.h"
#include "pcgx/search/search.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/user_plan.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

namespace fs = std::filesystem;

ParallelTensorShape layout(int64_t replica, std::vector<int64_t> degrees) {
  const std::vector<int64_t> sizes{8, 16, 32};
  ParallelTensorShape s = ParallelTensorShape::unpartitioned(sizes, DataType::kFloat32);
  s.replica = replica;
  for (size_t j = 0; j < degrees.size(); ++j) s.dims[j].degree = degrees[j];
  return s;
}

// What a sequence does to a layout.
ParallelTensorShape apply(ParallelTensorShape s, const LayoutStep& step) {
  switch (step.move) {
    case DataMove::kReduce: s.replica /= step.degree; break;
    case DataMove::kReplicate: s.replica *= step.degree; break;
    case DataMove::kCombine: s.dims[static_cast<size_t>(step.dim)].degree /= step.degree; break;
    case DataMove::kRepartition: s.dims[static_cast<size_t>(step.dim)].degree *= step.degree; break;
    default: ADD_FAILURE() << "not a layout step";
  }
  return s;
}

TEST(LayoutSearch, EverySequenceTakesOneLayoutToTheOther) {
  // Partial sums over 2 slots, samples split 2 ways -> hidden split 4 ways.
  const ParallelTensorShape from = layout(2, {2, 1, 1}), to = layout(1, {1, 1, 4});
  const auto seqs = layout_sequences(from, to, 2, 1);
  ASSERT_GE(seqs.size(), 2u);
  std::set<std::string> seen;
  for (const auto& seq : seqs) {
    SCOPED_TRACE(describe(seq));
    EXPECT_TRUE(seen.insert(describe(seq)).second) << "listed twice";
    ASSERT_FALSE(seq.empty());
    EXPECT_EQ(seq.front(), (LayoutStep{DataMove::kReduce, -1, 2}));  // the partial sums summed first, all at once
    // Never more shards than the larger layout, but for the one that splits
    // first (then 2 x 4: the pieces of one exchange).
    const bool split_first = describe(seq) == "Reduce(2) Repartition2(4) Combine0(2)";
    ParallelTensorShape s = from;
    for (const LayoutStep& step : seq) {
      s = apply(s, step);
      EXPECT_FALSE(s.invalid_reason());
      EXPECT_LE(s.num_shards(), split_first ? 8 : 4);
    }
    EXPECT_EQ(s, to);
  }
  // pcgx's fixed conversion, the reduce-scatter then all-to-all, and the
  // split first are all there.
  EXPECT_TRUE(seen.count("Reduce(2) Combine0(2) Repartition2(4)"));
  EXPECT_TRUE(seen.count("Reduce(2) Repartition2(2) Combine0(2) Repartition2(2)"));
  EXPECT_TRUE(seen.count("Reduce(2) Repartition2(4) Combine0(2)"));
}

TEST(LayoutSearch, EveryGrowingDimensionSplitsFirst) {
  // Partial sums, samples split -> two dimensions split 2 ways each.
  std::set<std::string> seen;
  for (const auto& seq : layout_sequences(layout(2, {2, 1, 1}), layout(1, {1, 2, 2}), 2, 1)) seen.insert(describe(seq));
  EXPECT_TRUE(seen.count("Reduce(2) Repartition1(2) Repartition2(2) Combine0(2)"));
  EXPECT_TRUE(seen.count("Reduce(2) Combine0(2) Repartition1(2) Repartition2(2)"));
}

TEST(LayoutSearch, CopiesComeInPartsToo) {
  // Partial sums, samples split -> copies everywhere: an all-reduce, then an all-gather.
  const auto seqs = layout_sequences(layout(2, {2, 1, 1}), layout(4, {1, 1, 1}), 2, 4);
  std::set<std::string> seen;
  for (const auto& seq : seqs) seen.insert(describe(seq));
  EXPECT_TRUE(seen.count("Reduce(2) Combine0(2) Replicate(4)"));
  EXPECT_TRUE(seen.count("Reduce(2) Replicate(2) Combine0(2) Replicate(2)"));
}

TEST(LayoutSearch, LayoutsThatDoNotMatchHaveNoSequence) {
  EXPECT_TRUE(layout_sequences(layout(2, {2, 1, 1}), layout(1, {1, 1, 4}), 3, 1).empty());  // 3 does not divide the slots
  EXPECT_TRUE(layout_sequences(layout(2, {2, 1, 1}), layout(4, {1, 1, 4}), 2, 1).empty());  // the slots do not add up
  ParallelTensorShape other = layout(1, {1, 1, 4});
  other.dims[0].size = 4;
  EXPECT_TRUE(layout_sequences(layout(1, {2, 1, 1}), other, 1, 1).empty());  // another tensor
}

// A feed-forward split by Megatron-LM's rows (its output partial sums)
// inside data parallelism, read by a dropout split along the hidden
// dimension 4 ways.
UserPlan hidden_split_plan() {
  return plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, "rules": [
    {"select": {}, "partition": {"samples": 2}},
    {"select": {"name": "block*.mlp.intermediate"}, "partition": {"samples": 2, "out": 2}},
    {"select": {"name": "block*.mlp.ffn_output"}, "partition": {"samples": 2, "reduce": 2}},
    {"select": {"name": "block*.mlp_dropout"}, "partition": {"dim2": 4}}]})",
                        "hidden.json");
}

// The parallel operators of a graph.
int64_t parallel_operators(const Graph& g) {
  int64_t n = 0;
  for (const Node& x : g.nodes()) n += x.op->op_class == OpClass::kParallel;
  return n;
}

TEST(LayoutSearch, ACheaperSequenceIsChosenAndComputesTheModel) {
  const Graph model = build_model("gpt", {{"layers", 2}, {"batch", 8}});
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  const Strategy st = mapper.map(lower_plan(model, hidden_split_plan(), 4));
  const Relaid r = cheapest_layout_changes(st.graph, st.views, cm);
  ASSERT_EQ(r.choices.size(), 2u);  // one per layer
  for (const LayoutChoice& c : r.choices) {
    SCOPED_TRACE(c.from + " -> " + c.to);
    EXPECT_EQ(c.before, "Reduce(2) Combine0(2) Repartition2(4)");
    // The sum and the split one exchange, each partial block sent straight
    // to the device that needs it: the naive plan's price, the least.
    EXPECT_EQ(c.after, "Reduce(2) Repartition2(4) Combine0(2)");
    EXPECT_LT(c.after_time.total(), c.before_time.total());
    EXPECT_NEAR(c.after_time.total(), c.naive_time.total(), 1e-9 * c.naive_time.total());
  }
  EXPECT_EQ(parallel_operators(r.graph), parallel_operators(st.graph));  // the same three operators per layer, reordered
  ASSERT_EQ(r.views.size(), r.graph.size());
  for (size_t i = 0; i < st.graph.size(); ++i)
    if (r.image[i] >= 0) {
      EXPECT_EQ(r.views[static_cast<size_t>(r.image[i])], st.views[i]);
    }
  // The whole plan, priced again at the same views, is faster by what the
  // two conversions save.
  const double saved = 2 * (r.choices[0].before_time.total() - r.choices[0].after_time.total());
  const double before = mapper.map(st.graph).estimate.time, after = mapper.map(r.graph).estimate.time;
  EXPECT_LT(after, before);
  EXPECT_LE(before - after, saved * (1 + 1e-9));
  // At the tiny sizes, where the interpreter runs, the same choice computes the model.
  const Graph tiny = build_model("gpt-tiny", {{"batch", 4}});
  const Strategy small = mapper.map(lower_plan(tiny, hidden_split_plan(), 4));
  const Relaid rs = cheapest_layout_changes(small.graph, small.views, cm);
  ASSERT_FALSE(rs.choices.empty());
  EXPECT_LT(max_difference(rs.graph, tiny), 1e-4);
}

// The same plan with the dropout split along two dimensions, 2 ways each
// (V(2) D0(2) -> D1(2) D2(2)): the sum and both splits are one exchange
// (relayout.h), each partial block sent straight to the device that needs
// it, the naive plan's price; before they were, the best sequence was a
// reduce-scatter and an all-to-all, each step sending again what the one
// before moved (0.455 ms against the naive 0.172 at these sizes).
TEST(LayoutSearch, SplittingTwoDimensionsIsOneExchangeToo) {
  const std::string two = R"({"format": "pcgx.plan", "format_version": 1, "rules": [
    {"select": {}, "partition": {"samples": 2}},
    {"select": {"name": "block*.mlp.intermediate"}, "partition": {"samples": 2, "out": 2}},
    {"select": {"name": "block*.mlp.ffn_output"}, "partition": {"samples": 2, "reduce": 2}},
    {"select": {"name": "block*.mlp_dropout"}, "partition": {"dim1": 2, "dim2": 2}}]})";
  const Graph model = build_model("gpt", {{"layers", 2}, {"batch", 8}});
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  const Strategy st = mapper.map(lower_plan(model, plan_from_json(two, "two.json"), 4));
  const Relaid r = cheapest_layout_changes(st.graph, st.views, cm);
  int sums = 0;
  for (const LayoutChoice& c : r.choices) {
    if (c.before != "Reduce(2) Combine0(2) Repartition1(2) Repartition2(2)") continue;
    SCOPED_TRACE(c.from + " -> " + c.to);
    ++sums;
    EXPECT_EQ(c.after, "Reduce(2) Repartition1(2) Repartition2(2) Combine0(2)");
    EXPECT_NEAR(c.after_time.total(), c.naive_time.total(), 1e-9 * c.naive_time.total());
    EXPECT_LT(c.after_time.total(), c.before_time.total() / 2);
  }
  EXPECT_EQ(sums, 2);  // one per layer
  const Strategy rewritten = mapper.map(r.graph);
  EXPECT_LT(rewritten.estimate.time, mapper.map(st.graph).estimate.time);
  // The simulator runs the step as the estimate prices it.
  EXPECT_NEAR(Simulator(rewritten.graph, rewritten.views, cm).time(), rewritten.estimate.time, 1e-3 * rewritten.estimate.time);
  // At the tiny sizes, where the interpreter runs, the rewritten plan computes the model.
  const Graph tiny = build_model("gpt-tiny", {{"batch", 4}});
  const Strategy small = mapper.map(lower_plan(tiny, plan_from_json(two, "two.json"), 4));
  const Relaid rs = cheapest_layout_changes(small.graph, small.views, cm);
  ASSERT_FALSE(rs.choices.empty());
  EXPECT_LT(max_difference(rs.graph, tiny), 1e-4);
}

TEST(LayoutSearch, OneCollectiveStaysAsItIs) {
  // Megatron-LM's plan converts with one collective each time (all-reduce,
  // reduce-scatter, all-gather): nothing cheaper to find.
  const Graph model = build_model("gpt", {{"layers", 2}, {"batch", 8}});
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const Strategy st =
      MachineMapper(cm).map(lower_plan(model, load_plan((fs::path(PCGX_SOURCE_DIR) / "data/plans/gpt-megatron-2x2.json").string()), 4));
  const Relaid r = cheapest_layout_changes(st.graph, st.views, cm);
  EXPECT_TRUE(r.choices.empty());
  EXPECT_EQ(r.graph.size(), st.graph.size());
  // Nor do synchronized BatchNorm's all-reduces of its statistics over 2
  // nodes, which a posted exchange would undercut only by paying one
  // latency for its many messages.
  const Graph cnn = build_model("resnext-50-tiny", {{"batch", 16}});
  const CostModel cm16(find_machine("dgx-h100").with_devices(16), default_efficiency());
  const Strategy dp = MachineMapper(cm16).map(lower_plan(
      cnn, plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, "rules": [{"select": {}, "partition": {"samples": 16}}]})", "dp.json"), 16));
  int64_t all_reduces = 0;
  for (const Node& n : dp.graph.nodes()) all_reduces += n.op->data_move == DataMove::kReduce && n.attrs.get_int("degree") == 16;
  EXPECT_GT(all_reduces, 0);
  EXPECT_TRUE(cheapest_layout_changes(dp.graph, dp.views, cm16).choices.empty());
}

// `plan` lowered as written (Algorithm::kPlan).
SearchResult as_written(const Graph& model, const UserPlan& plan, const MachineMapper& mapper, bool layout_search = true) {
  SearchOptions o;
  o.algorithm = Algorithm::kPlan;
  o.plan = std::make_shared<const UserPlan>(plan);
  o.layout_search = layout_search;
  static const Ruleset none;
  return optimize(model, RuleLibrary(none), mapper, o);
}

// A conversion that changes nothing (two all-to-alls that undo each
// other) between two operators of an input's values is dropped, operators
// and all: each task then reads its shard where it is. The same chain
// after what is computed from a weight alone (its stored layout, priced
// as such) is left alone.
TEST(LayoutSearch, AnIdentityConversionIsDroppedAndAWeightsLayoutKept) {
  for (const char* source : {"Input", "Weight"}) {
    SCOPED_TRACE(source);
    Graph g("g");
    const NodeId x = g.add(source, {{"shape", IntList{8, 4}}, {"degrees", IntList{2, 1}}}, {}, "x");
    // (From a weight, ScalarMul is data movement or scaling: its layout.)
    const NodeId a = std::string(source) == "Weight" ? g.add("ScalarMul", {{"scalar", 2.0}}, {{x, 0}}, "a") : g.add("Relu", {}, {{x, 0}}, "a");
    NodeId t = a;
    std::vector<NodeId> chain;
    for (auto [op, dim] : std::vector<std::pair<const char*, int64_t>>{{"Combine", 0}, {"Repartition", 1}, {"Combine", 1}, {"Repartition", 0}})
      chain.push_back(t = g.add(op, {{"dim", dim}, {"degree", int64_t{2}}}, {{t, 0}}));
    const NodeId b = g.add("Relu", {}, {{t, 0}}, "b");
    g.add_output({b, 0});
    const CostModel cm(find_machine("dgx-h100").with_devices(2), default_efficiency());
    std::vector<MachineView> views(g.size(), MachineView{});
    views[static_cast<size_t>(a)] = views[static_cast<size_t>(b)] = MachineView{0, 1, {}};  // task i on device i
    const Relaid r = cheapest_layout_changes(g, views, cm);
    if (std::string(source) == "Weight") {
      EXPECT_TRUE(r.choices.empty());
      EXPECT_EQ(parallel_operators(r.graph), 4);
      continue;
    }
    ASSERT_EQ(r.choices.size(), 1u);
    EXPECT_EQ(r.choices[0].before, "Combine0(2) Repartition1(2) Combine1(2) Repartition0(2)");
    EXPECT_EQ(r.choices[0].after, "");
    EXPECT_EQ(r.choices[0].after_time.total(), 0.0);
    EXPECT_EQ(parallel_operators(r.graph), 0);
    for (NodeId c : chain) EXPECT_EQ(r.image[static_cast<size_t>(c)], -1);
    EXPECT_LT(max_difference(r.graph, g), 1e-6);
  }
}

// A plan that places operators itself is priced by simulation at its
// stated devices, the rewrite too: it is kept only where that simulation
// is faster, and the stated devices stay.
TEST(LayoutSearch, StatedDevicesArePricedWhereTheyAre) {
  const Graph model = build_model("gpt", {{"layers", 2}, {"batch", 8}});
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  const UserPlan stated = plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, "rules": [
    {"select": {}, "partition": {"samples": 2}},
    {"select": {"name": "block*.mlp.intermediate"}, "partition": {"samples": 2, "out": 2}},
    {"select": {"name": "block*.mlp.ffn_output"}, "partition": {"samples": 2, "reduce": 2}},
    {"select": {"name": "block*.mlp_dropout"}, "partition": {"dim2": 4}, "devices": [0, 1, 2, 3]}]})",
                                         "stated.json");
  const SearchResult r = as_written(model, stated, mapper);
  ASSERT_TRUE(r.strategy.estimate.feasible);
  EXPECT_NEAR(r.strategy.estimate.time, simulated_estimate(Simulator(r.strategy.graph, r.strategy.views, cm)).time,
              1e-12 * r.strategy.estimate.time);
  const SearchResult as_lowered = as_written(model, stated, mapper, false);
  EXPECT_TRUE(as_lowered.relaid.empty());
  ASSERT_EQ(r.relaid.size(), 2u);
  EXPECT_LT(r.strategy.estimate.time, as_lowered.strategy.estimate.time);
  for (const Node& n : r.strategy.graph.nodes())
    if (n.name == "block0.mlp_dropout") {
      EXPECT_EQ(r.strategy.views[static_cast<size_t>(n.id)].start, 0);
    }
}

TEST(LayoutSearch, APlanAsWrittenRunsTheCheaperSequence) {
  const Graph model = build_model("gpt", {{"layers", 2}, {"batch", 8}});
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  const SearchResult r = as_written(model, hidden_split_plan(), mapper);
  ASSERT_EQ(r.relaid.size(), 2u);
  const double as_lowered = mapper.map(lower_plan(model, hidden_split_plan(), 4)).estimate.time;
  EXPECT_LT(r.strategy.estimate.time, as_lowered);
  // The conversion the strategy runs is the chosen one.
  const auto consumers = r.strategy.graph.consumers();
  int found = 0;
  for (const Node& n : r.strategy.graph.nodes()) {
    if (n.name.find("mlp.ffn_output") == std::string::npos || n.op->op_class != OpClass::kCompute) continue;
    std::vector<NodeId> chain;
    NodeId x = consumers[static_cast<size_t>(n.id)].at(0).first;
    while (r.strategy.graph.node(x).op->op_class == OpClass::kParallel) {
      chain.push_back(x);
      x = consumers[static_cast<size_t>(x)].at(0).first;
    }
    std::vector<LayoutStep> steps;
    for (NodeId c : chain) steps.push_back(layout_step(r.strategy.graph.node(c)));
    EXPECT_EQ(describe(steps), "Reduce(2) Repartition2(4) Combine0(2)");
    ++found;
  }
  EXPECT_EQ(found, 2);
}

// A plan whose unstated operators unity searches gets the same rewrite
// of the conversions between what it states: faster, and still the model.
TEST(LayoutSearch, APlanWhoseRestIsSearchedRunsTheCheaperSequence) {
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.algorithm = Algorithm::kUnity;
  o.plan = std::make_shared<const UserPlan>(plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, "unstated": "search", "rules": [
    {"select": {"name": "block*.mlp.intermediate"}, "partition": {"samples": 2, "out": 2}},
    {"select": {"name": "block*.mlp.ffn_output"}, "partition": {"samples": 2, "reduce": 2}},
    {"select": {"name": "block*.mlp_dropout"}, "partition": {"dim2": 4}}]})",
                                                           "rest.json"));
  static const Ruleset none;
  auto searched = [&](const Graph& model, bool layout_search) {
    o.layout_search = layout_search;
    return optimize(model, RuleLibrary(none), mapper, o);
  };
  const Graph model = build_model("gpt", {{"layers", 2}, {"batch", 8}});
  const SearchResult as_found = searched(model, false), r = searched(model, true);
  EXPECT_TRUE(as_found.relaid.empty());
  ASSERT_EQ(r.relaid.size(), 2u);
  for (const LayoutChoice& c : r.relaid) EXPECT_EQ(c.after, "Reduce(2) Repartition2(4) Combine0(2)") << c.from;
  EXPECT_LT(r.strategy.estimate.time, as_found.strategy.estimate.time);
  const Graph tiny = build_model("gpt-tiny", {{"batch", 16}});
  const SearchResult small = searched(tiny, true);
  ASSERT_FALSE(small.relaid.empty());
  EXPECT_LT(max_difference(small.strategy.graph, tiny), 1e-4);
}

// A pipelined plan's conversions are searched too, on each stage's chunk,
// and kept where the chunk cut into its micro-batches runs faster: the
// joined strategy runs the cheaper sequence in every layer of both
// stages, is faster than the plan as lowered, and computes the model.
TEST(LayoutSearch, APipelinedPlansChunksRunTheCheaperSequence) {
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency());
  SearchOptions o;
  o.algorithm = Algorithm::kPlan;
  o.plan = std::make_shared<const UserPlan>(hidden_split_plan());
  static const Ruleset none;
  auto joined = [&](const Graph& model, bool layout_search) {
    o.layout_search = layout_search;
    return optimize_pipeline(model, RuleLibrary(none), cm, o, PipelineOptions{2, 4});
  };
  const Graph model = build_model("gpt", {{"layers", 2}, {"batch", 8}});
  const PipelineResult as_lowered = joined(model, false), r = joined(model, true);
  EXPECT_TRUE(as_lowered.search.relaid.empty());
  ASSERT_EQ(r.search.relaid.size(), 2u);  // one layer a stage
  for (const LayoutChoice& c : r.search.relaid) {
    SCOPED_TRACE(c.from);
    EXPECT_EQ(c.before, "Reduce(2) Combine0(2) Repartition2(4)");
    EXPECT_EQ(c.after, "Reduce(2) Repartition2(4) Combine0(2)");
    EXPECT_LT(c.after_time.total(), c.before_time.total());
  }
  EXPECT_LT(r.search.strategy.estimate.time, as_lowered.search.strategy.estimate.time);
  // Each layer's sum is read by the hidden dimension's split, in the micro-batches.
  const Graph& g = r.search.strategy.graph;
  int splits_of_sums = 0;
  for (const Node& n : g.nodes())
    if (n.op->data_move == DataMove::kRepartition && n.attrs.get_int("dim") == 2 && n.attrs.get_int("degree") == 4 &&
        g.node(n.inputs[0].node).op->data_move == DataMove::kReduce) {
      ++splits_of_sums;
      EXPECT_EQ(n.outputs[0].dims[0].pipeline, 4);
    }
  EXPECT_EQ(splits_of_sums, 2);
  // A plan stating devices (within each stage) is priced by simulation,
  // chunk by chunk and whole, the rewrite too; its devices stay.
  o.plan = std::make_shared<const UserPlan>(plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, "rules": [
    {"select": {}, "partition": {"samples": 2}},
    {"select": {"name": "block*.mlp.intermediate"}, "partition": {"samples": 2, "out": 2}},
    {"select": {"name": "block*.mlp.ffn_output"}, "partition": {"samples": 2, "reduce": 2}},
    {"select": {"name": "block*.mlp_dropout"}, "partition": {"dim2": 4}, "devices": [0, 1, 2, 3]}]})",
                                                           "stated.json"));
  const PipelineResult placed_as_lowered = joined(model, false), placed = joined(model, true);
  ASSERT_TRUE(placed.simulated);
  EXPECT_EQ(placed.search.relaid.size(), 2u);
  EXPECT_LT(placed.search.strategy.estimate.time, placed_as_lowered.search.strategy.estimate.time);
  int dropouts = 0;
  for (const Node& n : placed.search.strategy.graph.nodes())
    if (n.name == "block1.mlp_dropout") {
      ++dropouts;
      EXPECT_EQ(placed.search.strategy.views[static_cast<size_t>(n.id)].start, 4);  // stage 2's first device
    }
  EXPECT_EQ(dropouts, 1);
  // At the tiny sizes, where the interpreter runs, the same choice computes the model.
  o.plan = std::make_shared<const UserPlan>(hidden_split_plan());
  const Graph tiny = build_model("gpt-tiny", {{"batch", 16}});
  const PipelineResult small = joined(tiny, true);
  ASSERT_FALSE(small.search.relaid.empty());
  EXPECT_LT(max_difference(small.search.strategy.graph, tiny), 1e-4);
}

}  // namespace
}  // namespace pcgx::search
