#pragma once
// What the verifier holds for one operator (`pcgx ops check NAME`): the SMT
// symbols of its encodings, the axioms that mention them by file, and, when
// asked, each such axiom's check (`pcgx axioms check`'s instances). The
// registry's side (kernels, gradient) and the generator's (opsets) are the
// tool's to add.
#include <string>
#include <vector>

#include "pcgx/verifier/verifier.h"

namespace pcgx::verify {

struct OpAxiom {
  std::string name, file;
  bool checked = false;
  AxiomCheck check;  // when checked
};

struct OpCoverage {
  std::vector<std::string> symbols;  // empty: no encoding, so no rule of it can be proved
  std::vector<std::string> declarations;  // per symbol, as axiom files see it (derived from OpDef::smt)
  std::vector<OpAxiom> axioms;       // mentioning a symbol, in file order
};

// `check` runs the default axiom check on the axioms found (seconds).
OpCoverage op_coverage(const std::string& op, const AxiomSet& axioms, bool check);

}  // namespace pcgx::verify
