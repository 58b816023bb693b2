// The communication a parallelized PCG runs (see derived_communication.h).
#include "pcgx/search/derived_communication.h"

#include <algorithm>
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
    // The devices sending (the first operator's inputs) and receiving (the
    // last one's outputs).
    const NodeId second = partner[static_cast<size_t>(n.id)];
    const NodeId last = second >= 0 ? second : n.id;
    std::set<int64_t> senders, receivers;
    for (const Move& m : p.moves(n.id)) senders.insert(p.owner(n.inputs[static_cast<size_t>(m.input)], m.in_shard));
    for (const Move& m : p.moves(last)) receivers.insert(p.owner({last, m.output}, m.out_shard));
    std::set<int64_t> all = senders;
    all.insert(receivers.begin(), receivers.end());
    DerivedMove d;
    d.devices = static_cast<int64_t>(all.size());
    d.from = producer(n.inputs.empty() ? TensorRef{n.id, 0} : n.inputs[0]);
    d.bytes = cost.activation_bytes(g.shape(n.inputs.at(0)));
    if (second >= 0) {
      done.insert(second);
      const std::vector<NodeId> inside = layout_change_inside(g, n.id, second);
      done.insert(inside.begin(), inside.end());
      const auto c = layout_change(n.op->data_move, g.node(second).op->data_move);
      const auto t = cost.layout_change_time(p, n.id, second, 0);
      // A collective only among the same devices; else (and for a sum
      // splitting several dimensions) the cost model prices the pieces
      // exchanged.
      d.what = c && t && inside.empty() && senders == receivers ? std::string(to_string(*c)) : "exchange";
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
    out.push_back(std::move(d));
  }
  std::stable_sort(out.begin(), out.end(), [](const DerivedMove& a, const DerivedMove& b) { return a.time.total() > b.time.total(); });
  return out;
}

}  // namespace pcgx::search
