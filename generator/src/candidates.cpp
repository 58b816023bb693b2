// Candidate pairs from fingerprint classes, and the three pruning stages
// (see candidates.h); stages 1-2 live in pair_context.h, stage 3's rewriting
// in implication.h.
#include "pcgx/generator/candidates.h"

#include <algorithm>
#include <bitset>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "implication.h"

namespace pcgx::gen {

using detail::Context;
using detail::Implication;
using detail::Member;

namespace {

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) { return parent[static_cast<size_t>(x)] == x ? x : parent[static_cast<size_t>(x)] = find(parent[static_cast<size_t>(x)]); }
  void unite(int a, int b) { parent[static_cast<size_t>(find(a))] = find(b); }
};

// A class that still has candidate pairs after stages 1 and 2, and the
// equalities stage 3 may use in it.
struct OpenClass {
  std::vector<SmallGraph> graphs;
  std::map<std::string, int> index_of_form;
  UnionFind uf{0};
  // Pairs with a common subgraph, by size: derivable from strictly smaller pairs.
  std::map<size_t, std::vector<std::pair<int, int>>> derived;
};

struct Edge {
  size_t cls;
  int a, b;            // a: the source side (more operators)
  size_t size;         // operators on both sides
  size_t refs;         // input references on both sides
  int reorder;         // 0 when both sides hold the same operators (a commutation)
  std::string tie;
  size_t key;          // the pair's renaming class
  std::vector<std::pair<int, int>> output_map;
};

// A renamed copy of a candidate pair: it holds once its original is settled.
struct Copy {
  size_t cls;
  int a, b;
};

// The pool tensors a graph reads.
std::bitset<256> inputs_read(const SmallGraph& g) {
  std::bitset<256> s;
  for (const SmallOp& op : g.ops)
    for (uint8_t i = 0; i < op.n_in; ++i)
      if (op.in[i].op < 0) s.set(op.in[i].index);
  for (const Ref& r : g.outputs)
    if (r.op < 0) s.set(r.index);
  return s;
}

// Whether the side with fewer operators (the target) reads only inputs the
// other reads, and sides of one size read the same: otherwise no match of
// the source binds every input of the target. Only functions that ignore
// an input meet here (MSELoss(x, x) and MSELoss(y, y), both 0).
bool binds_every_input(const SmallGraph& a, const SmallGraph& b) {
  const std::bitset<256> x = inputs_read(a), y = inputs_read(b);
  if (a.ops.size() == b.ops.size()) return x == y;
  return a.ops.size() > b.ops.size() ? (y & ~x).none() : (x & ~y).none();
}

size_t refs(const SmallGraph& g) {
  size_t n = 0;
  for (const SmallOp& op : g.ops) n += op.n_in;
  return n;
}

std::multiset<std::string> op_names(const Context& ctx, const SmallGraph& g) {
  std::multiset<std::string> s;
  for (const SmallOp& op : g.ops) s.insert(ctx.e_.instances().at(op.inst).op->name);
  return s;
}

}  // namespace

std::vector<CandidatePair> find_candidates(const Enumerator& e, std::vector<GraphRecord> records, StageCounts& counts) {
  std::stable_sort(records.begin(), records.end(),
                   [](const GraphRecord& a, const GraphRecord& b) { return a.fingerprint < b.fingerprint; });
  Context ctx(e);
  std::unordered_map<std::string, size_t> key_ids;   // pair key -> renaming class
  std::vector<std::vector<Copy>> copies;             // per renaming class, its copies
  std::vector<OpenClass> open;
  std::vector<Edge> edges;
  for (size_t i = 0; i < records.size();) {
    size_t j = i;
    while (j < records.size() && records[j].fingerprint == records[i].fingerprint) ++j;
    if (j - i >= 2) {
      ++counts.classes;
      std::vector<Member> members;
      for (size_t k = i; k < j; ++k) members.push_back(ctx.member(records[k]));
      const size_t m = members.size();
      counts.raw_pairs += m * (m - 1) / 2;
      OpenClass oc;
      std::vector<std::pair<int, int>> rest;
      // Stage 1: a common subgraph makes a pair derivable from smaller ones.
      for (size_t a = 0; a < m; ++a)
        for (size_t b = a + 1; b < m; ++b) {
          if (!binds_every_input(members[a].g, members[b].g)) continue;
          if (ctx.common_subgraph(members[a], members[b])) {
            oc.derived[members[a].g.ops.size() + members[b].g.ops.size()].emplace_back(static_cast<int>(a), static_cast<int>(b));
          } else {
            rest.emplace_back(static_cast<int>(a), static_cast<int>(b));
          }
        }
      counts.after_common_subgraph += rest.size();
      // Stage 2: a renamed copy of an earlier pair.
      std::vector<std::pair<std::pair<int, int>, size_t>> cand, copy;
      for (const auto& [a, b] : rest) {
        const auto [it, fresh] = key_ids.emplace(ctx.pair_key(members[static_cast<size_t>(a)].g, members[static_cast<size_t>(b)].g),
                                                 key_ids.size());
        if (fresh) copies.emplace_back();
        (fresh ? cand : copy).push_back({{a, b}, it->second});
      }
      counts.after_renaming += cand.size();
      if (!cand.empty() || !copy.empty()) {
        const size_t cls = open.size();
        std::vector<std::string> forms;
        for (size_t k = 0; k < m; ++k) {
          forms.push_back(ctx.form(members[k].g));
          oc.index_of_form.emplace(forms.back(), static_cast<int>(k));
          oc.graphs.push_back(members[k].g);
        }
        oc.uf = UnionFind(m);
        for (const auto& [ab, key] : copy) copies[key].push_back({cls, ab.first, ab.second});
        for (auto [ab, key] : cand) {
          auto [a, b] = ab;
          const Member* src = &members[static_cast<size_t>(a)];
          const Member* dst = &members[static_cast<size_t>(b)];
          if (src->g.ops.size() < dst->g.ops.size() ||
              (src->g.ops.size() == dst->g.ops.size() && forms[static_cast<size_t>(a)] < forms[static_cast<size_t>(b)])) {
            std::swap(src, dst);
            std::swap(a, b);
          }
          edges.push_back({cls, a, b, src->g.ops.size() + dst->g.ops.size(), refs(src->g) + refs(dst->g),
                           op_names(ctx, src->g) == op_names(ctx, dst->g) ? 0 : 1,
                           forms[static_cast<size_t>(a)] + "|" + forms[static_cast<size_t>(b)], key,
                           Context::output_map(*src, *dst)});
        }
        open.push_back(std::move(oc));
      }
    }
    i = j;
  }
  records.clear();
  records.shrink_to_fit();

  // Stage 3, smallest first (fewest operators, then fewest input references,
  // then commutations before other pairs). Equalities enter each class's
  // union-find only once justified: pairs with a common subgraph when their
  // size is reached (they follow from strictly smaller pairs), renamed copies
  // once their original is settled, and candidates as they are settled. A
  // candidate is dropped when its sides are already known equal, or when up
  // to two rewrites with strictly smaller kept candidates turn its source
  // into a graph known equal to its target.
  std::stable_sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) {
    return std::tie(x.size, x.refs, x.reorder, x.tie) < std::tie(y.size, y.refs, y.reorder, y.tie);
  });
  Implication imp(ctx);
  std::vector<CandidatePair> kept;
  size_t batch_start = 0;
  size_t derived_upto = 0;
  auto admit_derived = [&](size_t size) {
    for (OpenClass& oc : open)
      for (auto it = oc.derived.begin(); it != oc.derived.end() && it->first <= size;) {
        for (const auto& [a, b] : it->second) oc.uf.unite(a, b);
        it = oc.derived.erase(it);
      }
    derived_upto = size;
  };
  for (size_t n = 0; n < edges.size(); ++n) {
    const Edge& ed = edges[n];
    if (n == 0 || ed.size != edges[n - 1].size) {
      for (size_t q = batch_start; q < kept.size(); ++q) imp.add(kept[q]);
      batch_start = kept.size();
      if (ed.size > derived_upto || n == 0) admit_derived(ed.size);
    }
    OpenClass& oc = open[ed.cls];
    bool keep = false;
    if (oc.uf.find(ed.a) != oc.uf.find(ed.b)) {
      const CandidatePair pair{oc.graphs[static_cast<size_t>(ed.a)], oc.graphs[static_cast<size_t>(ed.b)], ed.output_map};
      auto known_equal_to_b = [&](const std::string& form) {
        auto it = oc.index_of_form.find(form);
        return it != oc.index_of_form.end() && oc.uf.find(it->second) == oc.uf.find(ed.b);
      };
      keep = !imp.implied(pair, known_equal_to_b);
      oc.uf.unite(ed.a, ed.b);
      if (keep) kept.push_back(pair);
    }
    // The original is settled: its renamed copies hold too.
    for (const Copy& c : copies[ed.key]) open[c.cls].uf.unite(c.a, c.b);
    copies[ed.key].clear();
  }
  counts.after_implied = kept.size();
  return kept;
}

}  // namespace pcgx::gen

