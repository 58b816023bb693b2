// The communication a parallelized PCG runs (see derived_communication.h).
#include "pcgx/search/derived_communication.h"

#include <set>

#include "pcgx/pcg/source_layout.h"
#include "pcgx/pcg/step_communication.h"
#include "pcgx/search/collectives.h"

namespace pcgx::search {
namespace {

bool moves_data(const Node& n) { return n.op->is_shard_level(n.attrs); }

std::string single_name(DataMove m) {
  switch (m) {
    case DataMove::kReplicate: return "broadcast";
    case DataMove::kRepartition: return "scatter";
    case DataMove::kReduce: return "reduce";
    case DataMove::kCombine: return "gather";
    case DataMove::kAllReduce: return "all-reduce";
    default: return "copies";
  }
}

}  // namespace

std::vector<DerivedMove> derived_communication(const Placement& p, const CostModel& cost) {
  const Graph& g = p.graph();
  const SourceLayouts layouts = source_layouts(g);
  const std::vector<NodeId> partner = layout_change_partners(g, layouts);
  const auto consumers = g.consumers();
  // The compute operator (or source) a tensor comes from, through parallel operators.
  auto producer = [&](TensorRef t) {
    while (moves_data(g.node(t.node)) && !g.node(t.node).inputs.empty()) t = g.node(t.node).inputs[0];
    return g.node(t.node).name;
  };
  // The compute operators reading a node's output, through parallel operators.
  auto readers = [&](NodeId n) {
    std::set<std::string> names;
    std::vector<NodeId> work{n};
    while (!work.empty()) {
      const NodeId k = work.back();
      work.pop_back();
      for (const auto& [c, i] : consumers[static_cast<size_t>(k)]) {
        if (moves_data(g.node(c))) work.push_back(c);
        else names.insert(g.node(c).name.empty() ? "#" + std::to_string(c) : g.node(c).name);
      }
    }
    std::string out;
    for (const std::string& s : names) out += (out.empty() ? "" : ", ") + s;
    return out;
  };
  std::vector<DerivedMove> out;
  std::set<NodeId> done;
  for (const Node& n : g.nodes()) {
    if (!moves_data(n) || layouts.is_layout(g, n.id) || done.count(n.id)) continue;
    int64_t devices = 0;
    {
      std::set<int64_t> touched;
      for (const Move& m : p.moves(n.id)) touched.insert(p.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard));
      devices = static_cast<int64_t>(touched.size());
    }
    DerivedMove d;
    d.from = producer(n.inputs.empty() ? TensorRef{n.id, 0} : n.inputs[0]);
    d.bytes = cost.activation_bytes(g.shape(n.inputs.at(0)));
    const NodeId second = partner[static_cast<size_t>(n.id)];
    if (second >= 0) {
      done.insert(second);
      const auto c = layout_change(n.op->data_move, g.node(second).op->data_move);
      const auto t = cost.layout_change_time(p, n.id, second, 0);
      d.what = c && t ? std::string(to_string(*c)) : "exchange";
      if (t) {
        d.time = *t;
      } else {
        const Seconds a = cost.parallel_time(p, n.id, 0), b = cost.parallel_time(p, second, 0);
        d.time = {a.forward + b.forward, a.backward + b.backward};
      }
      d.to = readers(second);
    } else {
      d.what = single_name(n.op->data_move);
      d.time = cost.parallel_time(p, n.id, 0);
      d.to = readers(n.id);
    }
    d.devices = devices;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace pcgx::search
