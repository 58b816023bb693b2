// Every registry operator has what the pipeline needs of it: a compute
// operator its float and exact kernels, a gradient rule, an SMT encoding
// and axioms mentioning it; a parallel operator its shard-level evaluation
// and gradient, and an encoding. The only gaps are the ones docs/status.md
// states (Pipeline and Batch have no encoding). A new operator missing any
// piece fails here, named, as `pcgx ops check NAME` would name it.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "pcgx/generator/opset.h"
#include "pcgx/pcg/registry.h"
#include "pcgx/verifier/op_coverage.h"

#ifndef PCGX_SOURCE_DIR
#define PCGX_SOURCE_DIR "."
#endif

namespace pcgx::verify {
namespace {

TEST(RegistryCoverage, EveryOperatorHasItsPieces) {
  const AxiomSet axioms = load_axioms(default_axioms_dir());
  const std::set<std::string> not_encoded = {"Pipeline", "Batch"};  // docs/status.md: not encoded
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
      EXPECT_TRUE(c.symbols.empty()) << "now encoded: take it off the list (and docs/status.md's)";
      continue;
    }
    EXPECT_FALSE(c.symbols.empty()) << "no SMT encoding (OpDef::smt in its registry entry)";
    EXPECT_FALSE(c.axioms.empty()) << "no axiom mentions it (axioms/*.smt2)";
  }
  EXPECT_GE(compute, 28);
  EXPECT_GE(parallel, 7);
}

// Every operator is in a shipped opset (rulesets/opsets/*.json), so that
// `pcgx regenerate --opset NAME` can prove rules of it, except these, whose
// rules no shipped ruleset has yet; docs/adding-an-operator.md lists them.
const std::set<std::string> in_no_opset = {"Gelu", "Tanh", "Clip", "BatchNorm", "BatchSum",
                                           "BatchSquares", "BatchNormApply", "SoftmaxCrossEntropy", "ClassLogSumExp", "CrossEntropyApply", "MSELoss",
                                           "Reshape", "Reciprocal", "AllReduce", "Pipeline", "Batch"};

TEST(RegistryCoverage, EveryOperatorIsInAnOpset) {
  std::set<std::string> member;
  for (const gen::Opset& s : gen::named_opsets())
    for (const std::string& op : s.operators()) member.insert(op);
  for (const OpDef* op : OpRegistry::global().all()) {
    if (op->op_class == OpClass::kSource) continue;
    if (in_no_opset.count(op->name))
      EXPECT_FALSE(member.count(op->name)) << op->name << " is now in an opset: take it off the list (and the doc's)";
    else
      EXPECT_TRUE(member.count(op->name)) << op->name << " is in no rulesets/opsets/*.json";
  }
}

// docs/adding-an-operator.md names every piece the tests above require and
// every operator they let off, so that following it is enough.
TEST(RegistryCoverage, TheAddingAnOperatorDocNamesEveryPiece) {
  std::ifstream in(std::string(PCGX_SOURCE_DIR) + "/docs/adding-an-operator.md");
  ASSERT_TRUE(in) << "docs/adding-an-operator.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (const char* piece : {"kernel_f32", "kernel_mod", "grad_f32", "OpDef::smt", "elementwise", "any_rank", "axioms/",
                            "rulesets/opsets/", "pcgx ops check", "pcgx axioms check", "pcgx regenerate --ops",
                            "tests/pcg/gradients_test.cpp", "registry_coverage_test.cpp", "tests/op_cases.h"})
    EXPECT_NE(doc.find(piece), std::string::npos) << "the doc does not mention " << piece;
  for (const std::string& op : in_no_opset)
    EXPECT_NE(doc.find(op), std::string::npos) << "the doc does not list " << op << " among the operators in no opset";
}

}  // namespace
}  // namespace pcgx::verify
