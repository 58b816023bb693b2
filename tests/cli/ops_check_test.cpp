// `pcgx ops check NAME`: what one operator has and lacks, and the exit code
// saying whether anything is missing.
#include <gtest/gtest.h>

#include "cli/run_pcgx.h"

namespace {

using pcgx::testing::run;

TEST(OpsCheck, AWhollyCoveredOperator) {
  const auto r = run("ops check Relu");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const std::string line : {"kernels         float yes, exact (mod p) yes", "gradient        yes", "encoding        relu",
                                 "every one holds on its instances",
                                 "two-operator candidates with Repartition,Combine,Replicate,Reduce proved",
                                 "opsets          attention, conv, recsys, unity",
                                 "missing         nothing"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
}

TEST(OpsCheck, WhatIsMissingIsNamedAndExitsOne) {
  const auto r = run("ops check Pipeline --no-check");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("missing         an SMT encoding: no rule of it can be proved"), std::string::npos) << r.out;
  const auto unknown = run("ops check Frob");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_EQ(unknown.out, "error: ops check: unknown operator 'Frob' (`pcgx ops` lists them)\n");
}

// An operator whose attributes need values for the generator takes them
// as --ops does (without them it says so: Rulegen.ParallelFormsOfOneOperator).
TEST(OpsCheck, ParallelFormsOfAnOperatorWithRequiredAttributes) {
  const auto given = run("ops check 'Pool2D(kernel_h=2,kernel_w=2)'");
  EXPECT_EQ(given.code, 0) << given.out;
  EXPECT_NE(given.out.find("parallel forms  88 of 88 two-operator candidates"), std::string::npos) << given.out;
}

}  // namespace
