// A weight split over a node's devices and replicated over nodes is
// synchronized over one data-parallel ring per block, all at once: the
// rings share each node's network adapters (collectives.h,
// concurrent_shapes). Two adapters per node of four devices (the toy
// two-level machine, as Jean Zay's four per eight or Summit's two per
// six): each of the four rings gets half of one, where alone it would
// get one. The estimate and the simulator read the same sync groups.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/collectives.h"
#include "pcgx/search/cost_model.h"
#include "pcgx/search/machine_mapping.h"
#include "pcgx/search/search.h"
#include "pcgx/search/simulator.h"
#include "pcgx/search/user_plan.h"
#include "pcgx/rulesets/ruleset.h"
#include "search/plan_support.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

// Megatron-LM's tensor parallelism over a node's 4 devices, data
// parallelism over the 2 nodes.
Graph megatron(const Machine& m) {
  const Graph g = build_model("gpt-tiny", {{"batch", 8}, {"seq", 128}});
  const std::optional<Graph> t = expert(g, m, 8, 4, false);
  if (!t) throw Error("no tensor-parallel plan");
  return *t;
}

struct Synced {
  int64_t split = 0, whole = 0;  // weights in four rings of 2, in one ring of 8
  double split_links = 0;        // the network links of a split weight's ring (the last seen)
  Strategy strategy;
};

Synced synced(const Machine& m) {
  const CostModel cm(m, toy_efficiency());
  Synced out;
  out.strategy = MachineMapper(cm).map(megatron(m));
  const Strategy& s = out.strategy;
  const Placement place(s.graph, s.views, m.num_devices());
  const SourceLayouts layouts = source_layouts(s.graph);
  for (const Node& n : s.graph.nodes())
    for (const TensorRef& w : n.inputs)
      if (layouts.weight(w))
        if (const auto sg = cm.sync_group(place, w, 0); sg && sg->devices.size() == 8) {
          if (sg->group.size == 2) ++out.split, out.split_links = sg->group.links[1];
          if (sg->group.size == 8) {
            // One ring through all eight: every adapter of a node (4 members there).
            ++out.whole;
            EXPECT_DOUBLE_EQ(sg->group.links[1], static_cast<double>(m.links[1].ports));
          }
        }
  return out;
}

TEST(SharedAdapters, ATensorParallelWeightsRingsShareTheNodesAdapters) {
  const Machine two = two_level_machine();
  const Synced shared = synced(two);
  ASSERT_TRUE(shared.strategy.estimate.feasible);
  ASSERT_GT(shared.split, 0) << "no weight split over a node's devices";
  EXPECT_GT(shared.whole, 0) << "no weight replicated over all 8 devices";
  EXPECT_DOUBLE_EQ(shared.split_links, 0.5);
  // Four adapters a node: a ring each, as one ring alone would have.
  Machine four = two;
  four.links[1].ports = 4;
  const Synced own = synced(four);
  EXPECT_DOUBLE_EQ(own.split_links, 1);
  EXPECT_EQ(own.strategy.views, shared.strategy.views);
  // Sharing slows the buckets (twice the time through the network for
  // the split weights), and nothing else.
  const Estimate& a = shared.strategy.estimate;
  const Estimate& b = own.strategy.estimate;
  EXPECT_GT(a.sync, b.sync);
  EXPECT_DOUBLE_EQ(a.compute, b.compute);
  EXPECT_GE(a.time, b.time);
  // The simulator prices the same buckets.
  for (const auto& [m, s] : {std::pair{two, &shared.strategy}, std::pair{four, &own.strategy}}) {
    const CostModel cm(m, toy_efficiency());
    const Simulator sim(s->graph, s->views, cm);
    EXPECT_NEAR(simulated_estimate(sim).sync, s->estimate.sync, 1e-12);
  }
}

// Two weights whose rings have the same devices but share the adapters
// otherwise (fc0 split over a node's four devices: four rings, half an
// adapter each; fc1 over two: two rings, one each) are two collectives,
// never one bucket; fc2's lone ring on the same two devices, like fc1's,
// may share fc1's.
TEST(SharedAdapters, RingsSharedOtherwiseAreNeverOneBucket) {
  const Graph g = three_linears(8);
  SearchOptions o;
  o.algorithm = Algorithm::kPlan;
  o.plan = std::make_shared<const UserPlan>(plan_text(R"([
      {"select": {"name": "fc0"}, "partition": {"samples": 2, "out": 4}, "devices": [0, 1, 2, 3, 4, 5, 6, 7]},
      {"select": {"name": "fc1"}, "partition": {"samples": 2, "out": 2}, "devices": [0, 1, 4, 5]},
      {"select": {"name": "fc2"}, "partition": {"samples": 2}, "devices": [0, 4]}])"));
  const CostModel cm(two_level_machine(), toy_efficiency());
  static const Ruleset none;
  const Strategy s = optimize(g, RuleLibrary(none), MachineMapper(cm), o).strategy;
  const Placement place(s.graph, s.views, 8);
  const SourceLayouts layouts = source_layouts(s.graph);
  std::map<std::string, SyncGroup> synced;
  for (const Node& n : s.graph.nodes())
    for (const TensorRef& w : n.inputs)
      if (layouts.weight(w))
        if (const auto sg = cm.sync_group(place, w, 0)) synced.emplace(n.name, *sg);
  ASSERT_EQ(synced.size(), 3u);
  const SyncGroup &a = synced.at("fc0"), &b = synced.at("fc1"), &c = synced.at("fc2");
  ASSERT_EQ(a.group.size, 2);
  EXPECT_DOUBLE_EQ(a.group.links[1], 0.5);
  EXPECT_DOUBLE_EQ(b.group.links[1], 1);
  EXPECT_DOUBLE_EQ(c.group.links[1], 1);
  EXPECT_NE(a.key, b.key);
  EXPECT_EQ(b.key, c.key) << "the same ring, shaped the same: one bucket may hold both";
}

}  // namespace
}  // namespace pcgx::search
