#pragma once
// Two training runs that should agree: up to the order of their sums (the
// same losses, step by step, and the same trained weights, each within
// `tolerance` of the reference at its own scale, tensor_compare.h), or to
// the bit.
#include <gtest/gtest.h>

#include <cmath>

#include "pcgx/runtime/trainer.h"
#include "tensor_compare.h"

namespace pcgx::testing {

inline void expect_same_training(const runtime::TrainResult& got, const runtime::TrainResult& want, double tolerance) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s)
    EXPECT_NEAR(got.losses[s], want.losses[s], tolerance * std::fabs(want.losses[s]) + 1e-7) << "step " << s;
  ASSERT_EQ(got.parameters.size(), want.parameters.size());
  for (const auto& [name, w] : want.parameters) EXPECT_LT(relative_difference(got.parameters.at(name), w, 1e-2), tolerance) << name;
}

inline void expect_same_bits(const runtime::TrainResult& got, const runtime::TrainResult& want) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s) EXPECT_EQ(got.losses[s], want.losses[s]) << "step " << s;
  ASSERT_EQ(got.parameters.size(), want.parameters.size());
  for (const auto& [name, w] : want.parameters) EXPECT_TRUE(got.parameters.at(name) == w) << name;
}

}  // namespace pcgx::testing
