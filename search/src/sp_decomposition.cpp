// Series-parallel decomposition (see sp_decomposition.h).
#include "sp_decomposition.h"

#include <algorithm>
#include <numeric>

namespace pcgx::search {
namespace {

struct Decomposer {
  const Graph& g;
  const std::vector<std::vector<NodeId>>& readers;
  SPTree tree;
  std::vector<int> mark;  // stamp of the sub-set a node is in
  int stamp = 0;

  int add(SPNode n) {
    tree.nodes.push_back(std::move(n));
    return static_cast<int>(tree.nodes.size()) - 1;
  }

  // Distinct active producers inside the current sub-set that node n reads.
  std::vector<NodeId> internal_inputs(NodeId n) const {
    std::vector<NodeId> out;
    for (const TensorRef& t : g.node(n).inputs)
      if (mark[static_cast<size_t>(t.node)] == stamp && std::find(out.begin(), out.end(), t.node) == out.end())
        out.push_back(t.node);
    return out;
  }

  int run(std::vector<NodeId> set) {
    SPNode node;
    node.members = set;
    if (set.size() == 1) {
      node.node = set[0];
      return add(std::move(node));
    }
    const int my_stamp = ++stamp;
    for (NodeId n : set) mark[static_cast<size_t>(n)] = my_stamp;

    // Parallel: weakly connected components.
    std::vector<size_t> parent(set.size());
    std::iota(parent.begin(), parent.end(), 0);
    auto pos = [&](NodeId n) { return static_cast<size_t>(std::lower_bound(set.begin(), set.end(), n) - set.begin()); };
    auto find = [&](size_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    std::vector<std::vector<NodeId>> ins(set.size());
    for (size_t i = 0; i < set.size(); ++i) {
      stamp = my_stamp;
      ins[i] = internal_inputs(set[i]);
      for (NodeId p : ins[i]) parent[find(pos(p))] = find(i);
    }
    std::vector<std::vector<NodeId>> parts;
    {
      std::vector<int> comp(set.size(), -1);
      for (size_t i = 0; i < set.size(); ++i) {
        const size_t r = find(i);
        if (comp[r] < 0) comp[r] = static_cast<int>(parts.size()), parts.emplace_back();
        parts[static_cast<size_t>(comp[r])].push_back(set[i]);
      }
    }
    if (parts.size() > 1) {
      node.kind = SPNode::kParallel;
      for (auto& p : parts) node.children.push_back(run(std::move(p)));
      return add(std::move(node));
    }

    // Series: cuts where the open edges leave one node or all enter the next.
    std::vector<int> remaining(set.size(), 0);
    for (size_t i = 0; i < set.size(); ++i)
      for (NodeId p : ins[i]) ++remaining[pos(p)];
    std::vector<std::vector<NodeId>> segments(1);
    int open_nodes = 0, open_edges = 0;
    for (size_t i = 0; i < set.size(); ++i) {
      for (NodeId p : ins[i]) {
        const size_t j = pos(p);
        --open_edges;
        if (--remaining[j] == 0) --open_nodes;
      }
      if (remaining[i] > 0) ++open_nodes, open_edges += remaining[i];
      segments.back().push_back(set[i]);
      if (i + 1 == set.size()) break;
      int into_next = 0;
      for (NodeId p : ins[i + 1]) into_next += remaining[pos(p)] > 0;
      if (open_nodes <= 1 || open_edges == into_next) segments.emplace_back();
    }
    node.kind = SPNode::kSeries;
    if (segments.size() > 1) {
      for (auto& s : segments) node.children.push_back(run(std::move(s)));
    } else {
      for (NodeId n : set) node.children.push_back(run({n}));
    }
    return add(std::move(node));
  }
};

}  // namespace

SPTree decompose(const Graph& g, const std::vector<char>& active, const std::vector<std::vector<NodeId>>& readers) {
  Decomposer d{g, readers, {}, std::vector<int>(g.size(), 0), 0};
  std::vector<NodeId> all;
  for (const Node& n : g.nodes())
    if (active[static_cast<size_t>(n.id)]) all.push_back(n.id);
  if (!all.empty()) d.tree.root = d.run(std::move(all));
  return std::move(d.tree);
}

}  // namespace pcgx::search
