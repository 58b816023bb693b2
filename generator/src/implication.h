#pragma once
// Stage 3 of candidate pruning (internal): rewriting a graph with kept
// smaller candidates, to tell whether a pair is implied by them.
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pair_context.h"

namespace pcgx::gen::detail {

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


}  // namespace pcgx::gen::detail
