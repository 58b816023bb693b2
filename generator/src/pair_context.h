#pragma once
// Stages 1 and 2 of candidate pruning (internal): what is known of each
// member of a fingerprint class, canonical forms over input renamings, and
// the common-subgraph test.
#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "canonical.h"
#include "pcgx/generator/candidates.h"

namespace pcgx::gen::detail {

// A member of a fingerprint class, with what pruning needs to know of it.
struct Member {
  SmallGraph g;
  std::array<uint64_t, kMaxOps * kMaxOutputsPerOp> hashes{};  // op output value hashes
  std::vector<uint64_t> output_hashes;
  std::vector<uint64_t> keys;  // per op: structural key of the op and everything it depends on
};

class Context {
 public:
  explicit Context(const Enumerator& e) : e_(e) {
    const auto& pool = e.pool();
    for (size_t p = 0; p < pool.size(); ++p) {
      groups_[pool[p].group].push_back(static_cast<int>(p));
      shape_tag_.push_back(pool[p].shape.to_string());
    }
  }

  const std::string& key(uint32_t inst) const {
    auto it = keys_.find(inst);
    if (it == keys_.end()) it = keys_.emplace(inst, e_.instances().at(inst).key).first;
    return it->second;
  }
  auto key_fn() const {
    return [this](uint32_t i) -> const std::string& { return key(i); };
  }

  Member member(const GraphRecord& r) const {
    Member m{r.graph, r.hashes, {}, {}};
    for (const Ref& o : r.graph.outputs) m.output_hashes.push_back(hash_of(m, o));
    for (size_t i = 0; i < r.graph.ops.size(); ++i) m.keys.push_back(e_.structural_key(r.graph, i));
    return m;
  }

  uint64_t hash_of(const Member& m, const Ref& r) const {
    return r.op < 0 ? e_.pool_hashes()[r.index] : m.hashes[static_cast<size_t>(r.op) * kMaxOutputsPerOp + r.index];
  }

  const std::string& pool_name(int p) const { return e_.pool()[static_cast<size_t>(p)].name; }

  // The whole graph as a fragment over pool tensors.
  Fragment fragment(const SmallGraph& g, const std::vector<int>* rename = nullptr) const {
    Fragment f;
    std::map<int, int> ext;
    auto external = [&](int p) {
      auto it = ext.find(p);
      if (it != ext.end()) return it->second;
      const int idx = static_cast<int>(f.externals.size());
      f.externals.push_back({p, pool_name(p), shape_tag_[static_cast<size_t>(p)]});
      return ext[p] = idx;
    };
    for (const SmallOp& op : g.ops) {
      FragOp fo{op.inst, {}};
      for (int k = 0; k < op.n_in; ++k) {
        const Ref r = op.in[static_cast<size_t>(k)];
        if (r.op < 0) {
          fo.in.push_back({false, external(rename ? (*rename)[r.index] : r.index), 0});
        } else {
          fo.in.push_back({true, r.op, r.index});
        }
      }
      f.ops.push_back(std::move(fo));
    }
    for (const Ref& r : g.outputs)
      f.outputs.emplace_back(r.op < 0 ? -1 : r.op, r.op < 0 ? external(rename ? (*rename)[r.index] : r.index) : r.index);
    return f;
  }

  std::string form(const SmallGraph& g, const std::vector<int>* rename = nullptr) const {
    return canonical_form(fragment(g, rename), false, key_fn()).text;
  }

  // Stage 1 key: the smallest form over renamings and both orientations.
  std::string pair_key(const SmallGraph& a, const SmallGraph& b) const {
    std::vector<int> rename(e_.pool().size());
    std::iota(rename.begin(), rename.end(), 0);
    std::string best;
    std::vector<std::vector<int>> groups;
    for (const auto& [g, members] : groups_)
      if (members.size() > 1) groups.push_back(members);
    // Odometer over the permutations of every group.
    std::vector<std::vector<int>> perms = groups;
    while (true) {
      for (size_t gi = 0; gi < groups.size(); ++gi)
        for (size_t k = 0; k < groups[gi].size(); ++k) rename[static_cast<size_t>(groups[gi][k])] = perms[gi][k];
      const std::string fa = form(a, &rename), fb = form(b, &rename);
      const std::string k1 = fa + "|" + fb, k2 = fb + "|" + fa;
      const std::string& k = std::min(k1, k2);
      if (best.empty() || k < best) best = k;
      size_t gi = 0;
      for (; gi < perms.size(); ++gi) {
        if (std::next_permutation(perms[gi].begin(), perms[gi].end())) break;
      }
      if (gi == perms.size()) break;
    }
    return best;
  }

  // Output i of a -> output j of b, by equal hashes.
  static std::vector<std::pair<int, int>> output_map(const Member& a, const Member& b) {
    std::vector<std::pair<int, int>> map;
    std::vector<bool> used(b.output_hashes.size(), false);
    for (size_t i = 0; i < a.output_hashes.size(); ++i)
      for (size_t j = 0; j < b.output_hashes.size(); ++j)
        if (!used[j] && a.output_hashes[i] == b.output_hashes[j]) {
          used[j] = true;
          map.emplace_back(static_cast<int>(i), static_cast<int>(j));
          break;
        }
    return map;
  }

  // Stage 2.
  bool common_subgraph(const Member& a, const Member& b) const {
    // An identical operator (with identical inputs) on both sides: the pair
    // follows from the smaller one with that operator's output made a fresh
    // input, provided that one holds for every value of it. For F(s) = s it
    // would be F(y) = y, which holds only if F is an identity:
    // Relu(Relu(x)) = Relu(x) holds on Relu's range alone, so such a pair is
    // kept (stage 3 still drops it when a kept identity implies it).
    for (size_t i = 0; i < a.keys.size(); ++i)
      for (size_t j = 0; j < b.keys.size(); ++j)
        if (a.keys[i] == b.keys[j] && !one_more_operator(a, b, static_cast<int>(i), static_cast<int>(j))) return true;
    // Every output is the same operator on fingerprint-equal inputs.
    const auto map = output_map(a, b);
    bool all_suffix = !map.empty();
    for (const auto& [i, j] : map) {
      const Ref ra = a.g.outputs[static_cast<size_t>(i)], rb = b.g.outputs[static_cast<size_t>(j)];
      if (ra.op < 0 || rb.op < 0 || ra.index != rb.index) {
        all_suffix = false;
        break;
      }
      const SmallOp& oa = a.g.ops[static_cast<size_t>(ra.op)];
      const SmallOp& ob = b.g.ops[static_cast<size_t>(rb.op)];
      bool same = oa.inst == ob.inst && oa.n_in == ob.n_in;
      for (int k = 0; same && k < oa.n_in; ++k)
        same = hash_of(a, oa.in[static_cast<size_t>(k)]) == hash_of(b, ob.in[static_cast<size_t>(k)]);
      if (!same) {
        all_suffix = false;
        break;
      }
    }
    if (all_suffix) return true;
    // Independent pieces that pair up by their outputs.
    const auto pa = pieces(a), pb = pieces(b);
    if (pa.size() < 2 && pb.size() < 2) return false;
    std::multiset<std::vector<uint64_t>> sa(pa.begin(), pa.end()), sb(pb.begin(), pb.end());
    if (pa.size() != pb.size()) return false;
    return sa == sb;
  }

  static bool is_output(const SmallGraph& g, int op) {
    return std::any_of(g.outputs.begin(), g.outputs.end(), [op](const Ref& r) { return r.op == op; });
  }
  // F(s) = s: one single-output side is the shared operator's output s, the
  // other one more operator applied to it. Larger pairs of this kind
  // (Combine(Repartition(Concat(x, y))) = Concat(x, y), replica reshuffles
  // with several outputs) stay pruned: they gave the search no plan.
  static bool one_more_operator(const Member& a, const Member& b, int i, int j) {
    if (a.g.outputs.size() != 1 || b.g.outputs.size() != 1) return false;
    if (is_output(a.g, i) == is_output(b.g, j)) return false;
    const Member& inner = is_output(a.g, i) ? b : a;  // s internal here
    const Member& outer = is_output(a.g, i) ? a : b;  // s the output here
    return inner.g.ops.size() == outer.g.ops.size() + 1;
  }

  // The sorted output hashes of each piece (operators joined by internal edges).
  std::vector<std::vector<uint64_t>> pieces(const Member& m) const {
    const size_t n = m.g.ops.size();
    std::vector<int> parent(n);
    std::iota(parent.begin(), parent.end(), 0);
    std::function<int(int)> find = [&](int x) { return parent[static_cast<size_t>(x)] == x ? x : parent[static_cast<size_t>(x)] = find(parent[static_cast<size_t>(x)]); };
    for (size_t i = 0; i < n; ++i)
      for (int k = 0; k < m.g.ops[i].n_in; ++k) {
        const Ref r = m.g.ops[i].in[static_cast<size_t>(k)];
        if (r.op >= 0) parent[static_cast<size_t>(find(static_cast<int>(i)))] = find(r.op);
      }
    std::map<int, std::vector<uint64_t>> by_root;
    for (size_t o = 0; o < m.g.outputs.size(); ++o) {
      const Ref r = m.g.outputs[o];
      by_root[r.op < 0 ? -1 - r.index : find(r.op)].push_back(m.output_hashes[o]);
    }
    std::vector<std::vector<uint64_t>> out;
    for (auto& [root, hs] : by_root) {
      std::sort(hs.begin(), hs.end());
      out.push_back(hs);
    }
    return out;
  }

  const Enumerator& e_;
  std::map<int, std::vector<int>> groups_;
  std::vector<std::string> shape_tag_;
  mutable std::map<uint32_t, std::string> keys_;
};


}  // namespace pcgx::gen::detail
