// The last step of the unity search (search/final_ranking.h): the finalists
// are mapped and simulated, the fastest in simulation is the result, and it
// is never slower in simulation than the search's best by the DP alone.
#include "model_param_name.h"
#include "pcgx/search/final_ranking.h"

#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "pcgx/pcg/zoo.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/search.h"
#include "search/shipped_library.h"
#include "search/values.h"

namespace pcgx::search {
namespace {

double simulated(const Graph& g, const MachineMapper& mapper) {
  const Strategy s = mapper.map(g);
  return Simulator(s.graph, s.views, mapper.cost()).time();
}

TEST(FinalRanking, TheFastestInSimulationWins) {
  const Graph g = build_model("dlrm-tiny");
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  std::vector<Finalist> f{{"unpartitioned", g, {}}, {"data parallel", best_data_parallel(g, mapper), {}}};
  if (auto e = tuned_expert(g, mapper)) f.push_back({"expert", *e, {}});
  const Ranking r = rank_by_simulation(f, mapper);
  ASSERT_EQ(r.finalists.size(), f.size());
  ASSERT_GE(r.chosen, 0);
  for (size_t i = 0; i < f.size(); ++i) {
    SCOPED_TRACE(f[i].label);
    EXPECT_EQ(r.finalists[i].label, f[i].label);
    ASSERT_TRUE(r.finalists[i].feasible);
    EXPECT_EQ(r.finalists[i].estimate, mapper.map(f[i].graph).estimate.time);
    EXPECT_EQ(r.finalists[i].simulated, simulated(f[i].graph, mapper));
    EXPECT_LE(r.finalists[static_cast<size_t>(r.chosen)].simulated, r.finalists[i].simulated);
  }
  EXPECT_EQ(rank_by_simulation({}, mapper).chosen, -1);
}

// The same plan with its nodes in another topological order: each node's
// inputs added last to first.
Strategy reordered(const Strategy& s) {
  const Graph& g = s.graph;
  Graph out(g.name());
  std::vector<NodeId> image(g.size(), -1);
  std::vector<MachineView> views;
  std::function<void(NodeId)> visit = [&](NodeId id) {
    if (image[static_cast<size_t>(id)] >= 0) return;
    const Node& n = g.node(id);
    for (auto it = n.inputs.rbegin(); it != n.inputs.rend(); ++it) visit(it->node);
    std::vector<TensorRef> in;
    for (const TensorRef& t : n.inputs) in.push_back({image[static_cast<size_t>(t.node)], t.output});
    image[static_cast<size_t>(id)] = out.add_like(g, id, std::move(in));
    views.push_back(s.views[static_cast<size_t>(id)]);
  };
  for (const TensorRef& o : g.outputs()) visit(o.node);
  for (size_t i = 0; i < g.size(); ++i) visit(static_cast<NodeId>(i));
  for (const TensorRef& o : g.outputs()) out.add_output({image[static_cast<size_t>(o.node)], o.output});
  return {std::move(out), std::move(views), s.estimate};
}

TEST(FinalRanking, APlanIsTheSameWhateverTheOrderOfItsNodes) {
  const Graph g = build_model("mlp-tiny");
  const CostModel cm(find_machine("dgx-h100").with_devices(4), default_efficiency());
  const MachineMapper mapper(cm);
  const Strategy dp = mapper.map(best_data_parallel(g, mapper));
  const Strategy other = reordered(dp);
  bool moved = false;
  for (size_t i = 0; i < dp.graph.size(); ++i) moved = moved || dp.graph.node(static_cast<NodeId>(i)).name != other.graph.node(static_cast<NodeId>(i)).name;
  ASSERT_TRUE(moved) << "the reordering left every node in place";
  EXPECT_TRUE(same_plan(dp, other));
  // Another view for one task grid is another plan.
  Strategy moved_view = other;
  for (size_t i = 0; i < moved_view.views.size(); ++i)
    if (moved_view.views[i].placed() && moved_view.graph.node(static_cast<NodeId>(i)).op->op_class == OpClass::kCompute) {
      moved_view.views[i].start += 1;
      break;
    }
  EXPECT_FALSE(same_plan(dp, moved_view));
  EXPECT_FALSE(same_plan(dp, mapper.map(g)));  // unpartitioned

  // Ranked: simulated once, the later finalist taking the first's time;
  // the ranking's time is reused for the chosen plan under the same cost
  // model only.
  const Ranking r = rank_by_simulation({{"data parallel", dp.graph, {}}, {"reordered", other.graph, {}}}, mapper);
  ASSERT_EQ(r.chosen, 0);
  EXPECT_EQ(r.finalists[1].simulated, r.finalists[0].simulated);
  EXPECT_EQ(r.finalists[0].simulated, simulated(dp.graph, mapper));
  ASSERT_TRUE(simulated_time(r, dp, cm).has_value());
  EXPECT_EQ(simulated_time(r, dp, cm)->time, r.finalists[0].simulated);
  EXPECT_EQ(simulated_time(r, dp, cm)->not_simulated, "");
  EXPECT_TRUE(simulated_time(r, other, cm).has_value());
  EXPECT_FALSE(simulated_time(r, moved_view, cm).has_value());
  const CostModel same_content(find_machine("dgx-h100").with_devices(4), default_efficiency());
  EXPECT_FALSE(simulated_time(r, dp, same_content).has_value());  // not the model it was priced by
  EXPECT_FALSE(simulated_time(Ranking{}, dp, cm).has_value());
  // A plan the simulator refused (too many tasks) is reported refused, not simulated again.
  Ranking refused = r;
  refused.chosen_simulation.not_simulated = "simulate: more than 10000000 tasks";
  ASSERT_TRUE(simulated_time(refused, dp, cm).has_value());
  EXPECT_EQ(simulated_time(refused, dp, cm)->not_simulated, refused.chosen_simulation.not_simulated);
}

class Ranked : public ::testing::TestWithParam<std::string> {};

TEST_P(Ranked, NeverSlowerInSimulationThanTheSearchsBest) {
  const Graph g = build_model(GetParam());
  const CostModel cm(find_machine("dgx-h100").with_devices(8), default_efficiency());
  const MachineMapper mapper(cm);
  SearchOptions o;
  o.budget = 4;
  // The simulation is announced (a step of its own, seconds at thousands of devices).
  std::mutex m;
  std::vector<std::string> milestones;
  o.progress = [&](const SearchProgress& p) {
    if (!p.milestone) return;
    const std::lock_guard lock(m);
    milestones.push_back(p.phase);
  };
  o.rank = SearchOptions::Rank::kEstimate;
  const SearchResult by_estimate = optimize(g, shipped_library(), mapper, o);
  EXPECT_EQ(by_estimate.ranking.chosen, -1);
  EXPECT_TRUE(milestones.empty());
  o.rank = SearchOptions::Rank::kSimulation;
  const SearchResult by_simulation = optimize(g, shipped_library(), mapper, o);
  ASSERT_GE(by_simulation.ranking.chosen, 0);
  EXPECT_EQ(milestones, std::vector<std::string>{"simulating " + std::to_string(by_simulation.ranking.finalists.size()) + " finalists to rank them"});
  EXPECT_EQ(by_simulation.ranking.finalists[0].label, "search");
  EXPECT_EQ(by_simulation.ranking.finalists[0].estimate, by_estimate.strategy.estimate.time);
  const double chosen = simulated(by_simulation.strategy.graph, mapper);
  EXPECT_EQ(chosen, by_simulation.ranking.finalists[static_cast<size_t>(by_simulation.ranking.chosen)].simulated);
  EXPECT_LE(chosen, simulated(by_estimate.strategy.graph, mapper));
  EXPECT_LT(max_difference(g, by_simulation.strategy.graph), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(TinyZoo, Ranked, ::testing::Values("mlp-tiny", "dlrm-tiny", "candle-uno-tiny"),
                         pcgx::testing::model_param_name);

}  // namespace
}  // namespace pcgx::search
