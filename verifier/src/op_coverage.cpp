#include "pcgx/verifier/op_coverage.h"

#include <algorithm>
#include <filesystem>

#include "encoding.h"

namespace pcgx::verify {

OpCoverage op_coverage(const std::string& op, const AxiomSet& axioms, bool check) {
  OpCoverage c;
  for (const Encoding& e : encodings())
    if (op == e.op) c.symbols.push_back(e.symbol), c.declarations.push_back(declaration(e));
  if (c.symbols.empty()) return c;
  for (const AxiomInfo& a : axioms.axioms)
    if (std::find(a.operators.begin(), a.operators.end(), op) != a.operators.end())
      c.axioms.push_back({a.name, std::filesystem::path(a.file).filename().string(), false, {}});
  if (check && !c.axioms.empty()) {
    std::vector<std::string> names;
    for (const OpAxiom& a : c.axioms) names.push_back(a.name);
    const auto results = check_axioms(axioms, kDefaultAxiomInstances, kAxiomCheckSeed, names);
    for (OpAxiom& a : c.axioms)
      for (const AxiomCheck& r : results)
        if (r.name == a.name) a.checked = true, a.check = r;
  }
  return c;
}

}  // namespace pcgx::verify
