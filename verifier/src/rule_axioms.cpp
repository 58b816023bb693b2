#include <filesystem>
#include <map>

#include "pcgx/pcg/error.h"
#include "pcgx/pcg/graph_json.h"
#include "pcgx/rulesets/sha256.h"
#include "terms.h"

namespace pcgx::verify {

AxiomSet axioms_from_rules(const Ruleset& rules, const AxiomSet& base, std::vector<std::string>& skipped) {
  AxiomSet out;
  out.dir = base.dir + " + rules of " + rules.name;
  out.declarations = base.declarations;
  out.text = base.declarations;
  z3::context ctx;
  Terms T(ctx);
  for (const Rule& rule : rules.rules) {
    try {
      T.clear_inputs();
      std::vector<TensorRef> so, to;
      for (const auto& [i, j] : rule.output_map) {
        so.push_back(rule.source.outputs().at(static_cast<size_t>(i)));
        to.push_back(rule.target.outputs().at(static_cast<size_t>(j)));
      }
      const auto src = T.encode(rule.source, so);
      const auto dst = T.encode(rule.target, to);
      // Inputs of both sides, with their parallel state as the precondition.
      std::map<std::string, ParallelTensorShape> inputs;
      for (const Graph* g : {&rule.source, &rule.target})
        for (const Node& n : g->nodes())
          if (n.op->op_class == OpClass::kSource) inputs[n.name] = n.outputs[0];
      std::string binders, pre;
      for (const auto& [name, s] : inputs) {
        binders += "(|" + name + "| Tensor) ";
        pre += "(= (rank |" + name + "|) " + std::to_string(s.rank()) + ") (= (rep |" + name + "|) " + std::to_string(s.replica) + ") ";
        for (int d = 0; d < s.rank(); ++d)
          pre += "(= (deg |" + name + "| " + std::to_string(d) + ") " + std::to_string(s.dims[static_cast<size_t>(d)].degree) + ") ";
      }
      for (size_t k = 0; k < src.size(); ++k) {
        const std::string name = rule.id + (src.size() > 1 ? "." + std::to_string(k) : "");
        out.text += "(assert (! (forall (" + binders + ") (=> (and " + pre + ") (= " + src[k].to_string() + " " +
                    dst[k].to_string() + "))) :named |" + name + "|))\n";
        out.names.push_back(name);
      }
    } catch (const Error& e) {
      skipped.push_back(rule.id + ": " + e.what());
    }
  }
  out.files = {out.dir};
  out.hash = sha256_hex(out.text);
  return out;
}

}  // namespace pcgx::verify
