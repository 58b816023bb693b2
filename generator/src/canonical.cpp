#include "canonical.h"

#include <algorithm>
#include <numeric>

namespace pcgx::gen {

Form canonical_form(const Fragment& f, bool abstract, const std::function<const std::string&(uint32_t)>& key) {
  const size_t n = f.ops.size();
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  Form best;
  bool have = false;
  // Every permutation that is a topological order.
  do {
    std::vector<int> pos(n);
    for (size_t i = 0; i < n; ++i) pos[static_cast<size_t>(order[i])] = static_cast<int>(i);
    bool topo = true;
    for (size_t i = 0; i < n && topo; ++i)
      for (const auto& in : f.ops[i].in)
        if (in.internal && pos[static_cast<size_t>(in.a)] > pos[i]) topo = false;
    if (!topo) continue;
    std::vector<int> var_of_ext(f.externals.size(), -1), ext_of_var;
    std::string text;
    for (int idx : order) {
      const FragOp& op = f.ops[static_cast<size_t>(idx)];
      text += key(op.inst);
      text += '(';
      for (size_t k = 0; k < op.in.size(); ++k) {
        if (k) text += ',';
        const auto& in = op.in[k];
        if (in.internal) {
          text += '#' + std::to_string(pos[static_cast<size_t>(in.a)]) + '.' + std::to_string(in.b);
        } else if (abstract) {
          int& v = var_of_ext[static_cast<size_t>(in.a)];
          if (v < 0) {
            v = static_cast<int>(ext_of_var.size());
            ext_of_var.push_back(in.a);
          }
          text += '$' + std::to_string(v) + ':' + f.externals[static_cast<size_t>(in.a)].tag;
        } else {
          text += f.externals[static_cast<size_t>(in.a)].name;
        }
      }
      text += ");";
    }
    std::vector<std::string> outs;
    for (const auto& [op, o] : f.outputs) {
      if (op < 0) {
        // An external passed through as an output (the empty graph).
        outs.push_back(abstract ? "$out:" + f.externals[static_cast<size_t>(o)].tag : f.externals[static_cast<size_t>(o)].name);
      } else {
        outs.push_back('#' + std::to_string(pos[static_cast<size_t>(op)]) + '.' + std::to_string(o));
      }
    }
    std::sort(outs.begin(), outs.end());
    text += "->";
    for (const auto& o : outs) text += o + ';';
    if (!have || text < best.text) {
      best.text = std::move(text);
      best.position_of_op = pos;
      best.external_of_var = ext_of_var;
      have = true;
    }
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

}  // namespace pcgx::gen
