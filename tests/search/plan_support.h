#pragma once
// What the plan tests (user_plan_test.cpp, plan_rewrites_test.cpp) share:
// a plan from its rules alone, and the check that a lowered plan computes
// what its model computes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "pcgx/pcg/graph.h"
#include "pcgx/pcg/interpreter.h"
#include "pcgx/search/user_plan.h"

namespace pcgx::search {

inline void expect_same_outputs(const Graph& lowered, const Graph& model) {
  const SourceFn<float> src = random_sources<float>(9);  // by node name: the same values in both graphs
  const auto want = evaluate_outputs<float>(model, src), got = evaluate_outputs<float>(lowered, src);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].data.size(), want[o].data.size());
    for (size_t i = 0; i < want[o].data.size(); ++i)
      EXPECT_NEAR(got[o].data[i], want[o].data[i], 1e-4 * (1 + std::abs(want[o].data[i]))) << "output " << o << " element " << i;
  }
}

inline UserPlan plan_text(const std::string& rules) {
  return plan_from_json(R"({"format": "pcgx.plan", "format_version": 1, "rules": )" + rules + "}", "p.json");
}

}  // namespace pcgx::search
