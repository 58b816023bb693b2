#include "pcgx/generator/candidates.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <unordered_set>

#include "canonical.h"

namespace pcgx::gen {
namespace {

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
    // An identical operator (with identical inputs) on both sides.
    for (uint64_t ka : a.keys)
      for (uint64_t kb : b.keys)
        if (ka == kb) return true;
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

// Stage 3: rewriting with kept smaller candidates.
class Implication {
 public:
  explicit Implication(const Context& ctx) : ctx_(ctx) {}

  void add(const CandidatePair& c) {
    const int idx = static_cast<int>(kept_.size());
    kept_.push_back(c);
    index(idx, false);
    index(idx, true);
  }

  // Do at most `kSteps` rewrites of the source with kept candidates give a
  // graph that `equal_to_target` accepts (the target, or a graph known
  // equal to it)?
  static constexpr int kSteps = 2;
  bool implied(const CandidatePair& c, const std::function<bool(const std::string&)>& equal_to_target) const {
    std::vector<SmallGraph> frontier{c.source};
    std::set<std::string> visited{ctx_.form(c.source)};
    for (int step = 0; step < kSteps && !frontier.empty(); ++step) {
      std::vector<SmallGraph> next;
      for (const SmallGraph& g : frontier)
        for (SmallGraph& r : rewrites(g)) {
          const std::string f = ctx_.form(r);
          if (equal_to_target(f)) return true;
          if (visited.insert(f).second) next.push_back(std::move(r));
        }
      frontier = std::move(next);
    }
    return false;
  }

  // Every graph one rewrite with a kept candidate makes of `g`.
  std::vector<SmallGraph> rewrites(const SmallGraph& g) const {
    std::vector<SmallGraph> out;
    if (patterns_.empty()) return out;
    const Enumerator::TensorHashes shapes = ctx_.e_.hashes(g);
    const size_t n = g.ops.size();
    for (uint32_t mask = 1; mask < (1u << n); ++mask) {
      if (!convex(g, mask)) continue;
      std::vector<int> frag_of(n, -1), op_of;
      const Fragment f = fragment_of(g, shapes, mask, frag_of, op_of);
      const Form pattern = canonical_form(f, true, ctx_.key_fn());
      auto it = patterns_.find(pattern.text);
      if (it == patterns_.end()) continue;
      for (const auto& [k, reversed] : it->second) {
        SmallGraph r = apply(g, mask, pattern, op_of, k, reversed);
        if (!r.ops.empty() || !r.outputs.empty()) out.push_back(std::move(r));
      }
    }
    return out;
  }

 private:
  void index(int idx, bool reversed) {
    const CandidatePair& c = kept_[static_cast<size_t>(idx)];
    const SmallGraph& lhs = reversed ? c.target : c.source;
    if (lhs.ops.empty()) return;
    Fragment f;
    std::map<int, int> ext;
    for (const SmallOp& op : lhs.ops) {
      FragOp fo{op.inst, {}};
      for (int k = 0; k < op.n_in; ++k) {
        const Ref r = op.in[static_cast<size_t>(k)];
        if (r.op < 0) {
          auto it = ext.find(r.index);
          if (it == ext.end()) {
            it = ext.emplace(r.index, static_cast<int>(f.externals.size())).first;
            f.externals.push_back({r.index, ctx_.pool_name(r.index), ctx_.shape_tag_[r.index]});
          }
          fo.in.push_back({false, it->second, 0});
        } else {
          fo.in.push_back({true, r.op, r.index});
        }
      }
      f.ops.push_back(std::move(fo));
    }
    for (const Ref& r : lhs.outputs) {
      if (r.op < 0) return;  // an output that is an input: not a pattern
      f.outputs.emplace_back(r.op, r.index);
    }
    const Form form = canonical_form(f, true, ctx_.key_fn());
    patterns_[form.text].emplace_back(idx, reversed);
    lhs_forms_[{idx, reversed}] = {f, form};
  }

  static bool convex(const SmallGraph& g, uint32_t mask) {
    // No path leaves the subset and comes back.
    const size_t n = g.ops.size();
    std::vector<uint32_t> reach(n, 0);  // ops reachable downstream
    for (size_t i = n; i-- > 0;)
      for (size_t j = i + 1; j < n; ++j)
        for (int k = 0; k < g.ops[j].n_in; ++k)
          if (g.ops[j].in[static_cast<size_t>(k)].op == static_cast<int>(i)) reach[i] |= (1u << j) | reach[j];
    for (size_t i = 0; i < n; ++i) {
      if (!(mask & (1u << i))) continue;
      for (size_t j = 0; j < n; ++j)
        if (!(mask & (1u << j)) && (reach[i] & (1u << j)) && (reach[j] & mask)) return false;
    }
    return true;
  }

  Fragment fragment_of(const SmallGraph& g, const Enumerator::TensorHashes& m, uint32_t mask, std::vector<int>& frag_of,
                       std::vector<int>& op_of) const {
    Fragment f;
    const size_t n = g.ops.size();
    for (size_t i = 0; i < n; ++i)
      if (mask & (1u << i)) {
        frag_of[i] = static_cast<int>(op_of.size());
        op_of.push_back(static_cast<int>(i));
      }
    std::map<std::pair<int, int>, int> ext;
    auto tag = [&](const Ref& r) {
      if (r.op < 0) return ctx_.shape_tag_[r.index];
      return m.op_shapes[static_cast<size_t>(r.op)][r.index];
    };
    for (int i : op_of) {
      const SmallOp& op = g.ops[static_cast<size_t>(i)];
      FragOp fo{op.inst, {}};
      for (int k = 0; k < op.n_in; ++k) {
        const Ref r = op.in[static_cast<size_t>(k)];
        if (r.op >= 0 && (mask & (1u << r.op))) {
          fo.in.push_back({true, frag_of[static_cast<size_t>(r.op)], r.index});
        } else {
          const std::pair<int, int> id{r.op, r.index};
          auto it = ext.find(id);
          if (it == ext.end()) {
            it = ext.emplace(id, static_cast<int>(f.externals.size())).first;
            f.externals.push_back({static_cast<int>(f.externals.size()), "", tag(r)});
          }
          fo.in.push_back({false, it->second, 0});
        }
      }
      f.ops.push_back(std::move(fo));
    }
    // Outputs: subset outputs used outside it or that are graph outputs.
    for (int i : op_of)
      for (uint8_t o = 0; o < 4; ++o) {
        const Ref r{static_cast<int8_t>(i), o};
        bool out = std::find(g.outputs.begin(), g.outputs.end(), r) != g.outputs.end();
        for (size_t j = 0; j < n && !out; ++j)
          if (!(mask & (1u << j)))
            for (int k = 0; k < g.ops[j].n_in; ++k) out = out || g.ops[j].in[static_cast<size_t>(k)] == r;
        if (out) f.outputs.emplace_back(frag_of[static_cast<size_t>(i)], o);
      }
    // Remember which graph tensor each external is.
    ext_refs_.assign(f.externals.size(), Ref{});
    for (const auto& [id, idx] : ext) ext_refs_[static_cast<size_t>(idx)] = Ref{static_cast<int8_t>(id.first), static_cast<uint8_t>(id.second)};
    return f;
  }

  // Replaces the subset by the kept candidate's other side.
  SmallGraph apply(const SmallGraph& g, uint32_t mask, const Form& match, const std::vector<int>& op_of,
                   int k, bool reversed) const {
    const CandidatePair& c = kept_[static_cast<size_t>(k)];
    const SmallGraph& rhs = reversed ? c.source : c.target;
    const auto& [lf, lform] = lhs_forms_.at({k, reversed});
    // Pattern variable v is pool tensor lf.externals[lform.external_of_var[v]].id of the
    // candidate, and graph tensor ext_refs_[match.external_of_var[v]] here.
    std::map<int, Ref> bind;
    for (size_t v = 0; v < lform.external_of_var.size(); ++v)
      bind[lf.externals[static_cast<size_t>(lform.external_of_var[v])].id] = ext_refs_[static_cast<size_t>(match.external_of_var[v])];
    // Candidate lhs output (op, o) <-> subset output, through canonical positions.
    std::map<std::pair<int, int>, std::pair<int, int>> subset_of_lhs;  // lhs (op, o) -> graph (op, o)
    std::vector<int> lhs_op_at(lform.position_of_op.size()), sub_op_at(match.position_of_op.size());
    for (size_t i = 0; i < lform.position_of_op.size(); ++i) lhs_op_at[static_cast<size_t>(lform.position_of_op[i])] = static_cast<int>(i);
    for (size_t i = 0; i < match.position_of_op.size(); ++i) sub_op_at[static_cast<size_t>(match.position_of_op[i])] = static_cast<int>(i);
    for (size_t p = 0; p < lhs_op_at.size(); ++p)
      for (int o = 0; o < 4; ++o) subset_of_lhs[{lhs_op_at[p], o}] = {op_of[static_cast<size_t>(sub_op_at[p])], o};
    // lhs output index -> rhs output ref.
    const SmallGraph& lhs = reversed ? c.target : c.source;
    std::map<std::pair<int, int>, Ref> replacement;  // graph (op, o) -> rhs ref
    for (const auto& [a, b] : c.output_map) {
      const int li = reversed ? b : a, ri = reversed ? a : b;
      const Ref lr = lhs.outputs[static_cast<size_t>(li)];
      replacement[subset_of_lhs[{lr.op, lr.index}]] = rhs.outputs[static_cast<size_t>(ri)];
    }
    // Build: kept graph ops, then rhs ops, re-sorted topologically by form().
    SmallGraph out;
    const size_t n = g.ops.size();
    std::vector<int> new_of_old(n, -1), new_of_rhs(rhs.ops.size(), -1);
    // Emit in dependency order: repeatedly place any op whose inputs are placed.
    struct Pending {
      bool from_rhs;
      int idx;
    };
    std::vector<Pending> todo;
    for (size_t i = 0; i < n; ++i)
      if (!(mask & (1u << i))) todo.push_back({false, static_cast<int>(i)});
    for (size_t i = 0; i < rhs.ops.size(); ++i) todo.push_back({true, static_cast<int>(i)});
    std::function<bool(const Ref&, bool, Ref&)> resolve = [&](const Ref& r, bool in_rhs, Ref& res) -> bool {
      if (in_rhs) {
        if (r.op >= 0) {
          if (new_of_rhs[static_cast<size_t>(r.op)] < 0) return false;
          res = {static_cast<int8_t>(new_of_rhs[static_cast<size_t>(r.op)]), r.index};
          return true;
        }
        auto it = bind.find(r.index);
        if (it == bind.end()) {
          res = r;  // a pool tensor the pattern does not bind
          return true;
        }
        return resolve(it->second, false, res);
      }
      if (r.op < 0) {
        res = r;
        return true;
      }
      auto rep = replacement.find({r.op, r.index});
      if (mask & (1u << r.op)) {
        if (rep == replacement.end()) return false;
        return resolve(rep->second, true, res);
      }
      if (new_of_old[static_cast<size_t>(r.op)] < 0) return false;
      res = {static_cast<int8_t>(new_of_old[static_cast<size_t>(r.op)]), r.index};
      return true;
    };
    bool progress = true;
    while (!todo.empty() && progress) {
      progress = false;
      for (size_t t = 0; t < todo.size(); ++t) {
        const Pending p = todo[t];
        const SmallOp& op = p.from_rhs ? rhs.ops[static_cast<size_t>(p.idx)] : g.ops[static_cast<size_t>(p.idx)];
        SmallOp placed = op;
        bool ok = true;
        for (int q = 0; q < op.n_in && ok; ++q) ok = resolve(op.in[static_cast<size_t>(q)], p.from_rhs, placed.in[static_cast<size_t>(q)]);
        if (!ok) continue;
        const int idx = static_cast<int>(out.ops.size());
        if (out.ops.full()) return {};
        out.ops.push_back(placed);
        (p.from_rhs ? new_of_rhs : new_of_old)[static_cast<size_t>(p.idx)] = idx;
        todo.erase(todo.begin() + static_cast<std::ptrdiff_t>(t));
        progress = true;
        break;
      }
    }
    if (!todo.empty()) return {};
    for (const Ref& r : g.outputs) {
      Ref res;
      if (!resolve(r, false, res)) return {};
      out.outputs.push_back(res);
    }
    return out;
  }

  const Context& ctx_;
  std::vector<CandidatePair> kept_;
  std::map<std::string, std::vector<std::pair<int, bool>>> patterns_;
  std::map<std::pair<int, bool>, std::pair<Fragment, Form>> lhs_forms_;
  mutable std::vector<Ref> ext_refs_;
};

}  // namespace

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
