// Multi-dimensional machine views found by the machine mapping: Megatron's
// layout (tensor parallelism inside a node, data parallelism across nodes)
// comes out of the expert baseline on a machine of several nodes.
#include <gtest/gtest.h>

#include "pcgx/pcg/placement.h"
#include "pcgx/pcg/zoo.h"
#include "pcgx/search/baselines.h"
#include "pcgx/search/machine_mapping.h"
#include "search/toy_machines.h"

namespace pcgx::search {
namespace {

// Devices of every group of shards a parallel node on activations moves
// between (Replicate: one input shard and its copies; Reduce: the partial
// sums and their sum).
std::vector<std::vector<int64_t>> groups_of(const Placement& p, const Node& n) {
  std::map<int64_t, std::set<int64_t>> groups;
  const bool by_input = n.op->name == "Replicate";
  for (const Move& m : p.moves(n.id)) {
    auto& s = groups[by_input ? m.in_shard : m.out_shard];
    s.insert(p.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard));
    s.insert(p.owner({n.id, m.output}, m.out_shard));
  }
  std::vector<std::vector<int64_t>> out;
  for (const auto& [k, s] : groups) out.emplace_back(s.begin(), s.end());
  return out;
}

TEST(MachineViews, MegatronKeepsTensorParallelismInsideANode) {
  // bert-large-tiny on 2 nodes of 4 devices: tensor-parallel degree 4, data
  // parallel degree 2.
  const Machine m = two_level_machine();
  const CostModel cm(m, default_efficiency());
  const MachineMapper mapper(cm);
  const Graph g = build_model("bert-large-tiny", {{"batch", 8}});
  const Graph e = *expert(g, m, 8, 4);
  const Strategy s = mapper.map(e);
  ASSERT_TRUE(s.estimate.feasible) << s.estimate.infeasible;
  const Placement p(s.graph, s.views, 8);
  const SourceLayouts layouts = source_layouts(s.graph);
  int checked = 0, strided = 0;
  for (const Node& n : s.graph.nodes()) {
    if (!s.views[static_cast<size_t>(n.id)].strides.empty()) ++strided;
    // The tensor-parallel collectives (degree 4); the loss's Reduce over the
    // two data-parallel halves crosses the nodes, as it must.
    if ((n.op->name != "Replicate" && n.op->name != "Reduce") || layouts.is_layout(s.graph, n.id)) continue;
    if (n.attrs.get_int("degree") != 4) continue;
    for (const auto& group : groups_of(p, n)) {
      ++checked;
      EXPECT_EQ(group.front() / 4, group.back() / 4) << n.op->name << " " << describe(n) << " spans nodes";
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_GT(strided, 0);
  // The weights' replicas (data parallelism) span the nodes: every weight
  // gradient is all-reduced between them.
  EXPECT_GT(s.estimate.sync, 0.0);
  // With every tensor-parallel collective at the node link's speed, the
  // iteration stays within 2x of the same plan on one flat node of 8 (where
  // nothing crosses the slow network).
  Machine flat = m;
  flat.links = {{"fast", 0, 1e10, 1e-6, 1}};  // same numbers, one node of 8
  EXPECT_LT(s.estimate.time, 2.0 * MachineMapper(CostModel(flat, default_efficiency())).map(e).estimate.time);
}

TEST(MachineViews, FewerTasksThanDevicesSpreadAcrossNodes) {
  // A data-parallel MLP of 2 tasks on 2 nodes of 4: one task per node would
  // need nothing but the two nodes' network links; here the check is only
  // that whatever view is chosen keeps every task on a distinct device
  // inside the machine.
  const Machine m = two_level_machine();
  const CostModel cm(m, default_efficiency());
  const Graph g = data_parallel(build_model("mlp-tiny"), 2);
  const Strategy s = MachineMapper(cm).map(g);
  ASSERT_TRUE(s.estimate.feasible);
  const Placement p(s.graph, s.views, 8);
  for (const Node& n : s.graph.nodes()) {
    if (n.op->op_class != OpClass::kCompute || n.op->is_shard_level(n.attrs)) continue;
    std::set<int64_t> used(p.task_devices(n.id).begin(), p.task_devices(n.id).end());
    EXPECT_EQ(static_cast<int64_t>(used.size()), p.tasks(n.id).tasks);
    EXPECT_LT(*used.rbegin(), 8);
  }
}

}  // namespace
}  // namespace pcgx::search
