// Every registry operator has what the pipeline needs of it: a compute
// operator its float and exact kernels, a gradient rule, an SMT encoding
// and axioms mentioning it; a parallel operator its shard-level evaluation
// and gradient, and an encoding. The only gaps are the ones the README
// states (Pipeline and Batch have no encoding). A new operator missing any
// piece fails here, named, as `pcgx ops check NAME` would name it.
#include <gtest/gtest.h>

#include <set>

#include "pcgx/pcg/registry.h"
#include "pcgx/verifier/op_coverage.h"

namespace pcgx::verify {
namespace {

TEST(RegistryCoverage, EveryOperatorHasItsPieces) {
  const AxiomSet axioms = load_axioms(default_axioms_dir());
  const std::set<std::string> not_encoded = {"Pipeline", "Batch"};  // README, "Status": not encoded
  int compute = 0, parallel = 0;
  for (const OpDef* op : OpRegistry::global().all()) {
    if (op->op_class == OpClass::kSource) continue;
    SCOPED_TRACE(op->name);
    const OpCoverage c = op_coverage(op->name, axioms, false);
    if (op->op_class == OpClass::kCompute) {
      ++compute;
      EXPECT_TRUE(op->kernel_f32) << "no float kernel";
      EXPECT_TRUE(op->kernel_mod) << "no exact kernel";
      EXPECT_TRUE(op->grad_f32) << "no gradient rule";
    } else {
      ++parallel;
      EXPECT_TRUE(op->shard_f32) << "no shard-level evaluation";
      EXPECT_TRUE(op->shard_grad_f32) << "no shard-level gradient";
    }
    if (not_encoded.count(op->name)) {
      EXPECT_TRUE(c.symbols.empty()) << "now encoded: take it off the list (and the README's)";
      continue;
    }
    EXPECT_FALSE(c.symbols.empty()) << "no SMT encoding (verifier/src/encoding.cpp, axioms/prelude.smt2)";
    EXPECT_FALSE(c.axioms.empty()) << "no axiom mentions it (axioms/*.smt2)";
  }
  EXPECT_GE(compute, 26);
  EXPECT_GE(parallel, 7);
}

}  // namespace
}  // namespace pcgx::verify
